#include <fmt/format.h>

#include "awa/client.hpp"
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

}  // namespace awa
