// libpq pipeline mode: queue many statements, send one Sync, read the results in order.
//
//   auto p = conn.pipeline();
//   for (...) p.add("INSERT ...", params);
//   std::vector<Result> results = p.run();
//
// run() enters pipeline mode, sends every queued statement (flushing as it goes so a
// large pipeline cannot deadlock on full socket buffers), sends one Sync, reads exactly
// one result per statement and leaves pipeline mode. The statements run in one implicit
// transaction unless the caller opened one. If a statement fails, the server skips the
// rest (PGRES_PIPELINE_ABORTED); run() drains to the Sync so the connection stays
// usable, then throws PipelineError naming the index of the failing statement.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pg/params.hpp"
#include "pg/result.hpp"

namespace awa::pg {

class Connection;

class Pipeline {
 public:
  explicit Pipeline(Connection& conn) : conn_(conn) {}

  void add(std::string_view sql, const Params& params);
  // Executes a statement prepared with Connection::prepare or exec_cached.
  void add_cached(std::string_view sql, const Params& params);
  std::size_t size() const noexcept { return items_.size(); }

  std::vector<Result> run();

 private:
  struct Item {
    std::string sql;
    Params params;
    bool cached;
  };
  Connection& conn_;
  std::vector<Item> items_;
};

}  // namespace awa::pg
