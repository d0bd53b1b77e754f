#include "storage/dependencies.hpp"

#include <fmt/format.h>

#include "pg/params.hpp"
#include "schema/sql_catalog.hpp"

namespace awa::storage {

int verify_waiting_jobs(pg::Connection& conn, const std::string& quoted_schema, int limit) {
  const auto res =
      conn.exec(sql::render(sql::file("queries/runtime/verify_waiting.sql"), quoted_schema),
                pg::make_params(limit));
  return res.get<int>(0, 0);
}

int purge_dependencies(pg::Connection& conn, const std::string& quoted_schema,
                       std::chrono::seconds keep) {
  const auto res =
      conn.exec(sql::render(sql::file("queries/runtime/purge_dependencies.sql"), quoted_schema),
                pg::make_params(fmt::format("{} seconds", keep.count())));
  return res.get<int>(0, 0);
}

std::vector<std::pair<JobId, std::string>> parent_results(pg::Connection& conn,
                                                          const std::string& quoted_schema,
                                                          JobId job) {
  const auto res =
      conn.exec(sql::render(sql::file("queries/consume/parent_results.sql"), quoted_schema),
                pg::make_params(static_cast<std::int64_t>(job)));
  std::vector<std::pair<JobId, std::string>> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    out.emplace_back(res.get<std::int64_t>(r, 0), res.get<std::string>(r, 1));
  }
  return out;
}

}  // namespace awa::storage
