#include <fmt/format.h>

#include "awa/client.hpp"
#include "runtime/client_impl.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/dependencies.hpp"
#include "storage/stored_json.hpp"
#include "storage/validate.hpp"

namespace awa {

JobResult JobResult::completed(const nlohmann::json& result) {
  JobResult r(Outcome::kCompleted);
  std::string text;
  try {
    text = result.dump();
  } catch (const nlohmann::json::exception& e) {  // a string that is not UTF-8
    throw InvalidArgument(fmt::format("the job's result cannot be stored: {}", e.what()));
  }
  storage::validate_json_text("the job's result", text, kMaxArgsBytes);
  r.result_json_ = std::move(text);
  return r;
}

void JobContext::complete_in(Connection& conn, const nlohmann::json& result) {
  finalize_in(conn, JobResult::completed(result).result_json());
}

std::map<JobId, nlohmann::json> Client::Impl::parent_results(JobId job) {
  auto conn = pool_->acquire();
  std::map<JobId, nlohmann::json> out;
  for (const auto& [parent, text] :
       storage::parent_results(*conn, sql::quote_schema(options_.schema), job)) {
    nlohmann::json v;
    if (auto why = storage::decode_stored_json(text, v); !why.empty()) {
      throw UndecodableJson(
          fmt::format("the result of parent job {} could not be decoded: {}", parent, why));
    }
    out.emplace(parent, std::move(v));
  }
  return out;
}

}  // namespace awa
