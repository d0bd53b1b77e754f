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
//
// sync() splits the pipeline into segments, each ended by its own Sync: without an
// explicit transaction each segment is its own implicit transaction, committed before
// the next segment runs, and still all of it is sent in one round trip. A failure aborts
// the rest of its segment only. Statements added with add_cached_best_effort() never make
// run() throw: their failure leaves an empty Result in their slot and a message in
// best_effort_errors() (e.g. a wake-up sent after the commit that it announces).
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

  void add(std::string_view sql, const Params& params, Format format = Format::kText);
  // Executes a statement prepared with Connection::prepare or exec_cached.
  void add_cached(std::string_view sql, const Params& params);
  // A prepared statement whose failure is reported, not thrown (see above).
  void add_cached_best_effort(std::string_view sql, const Params& params);
  // Ends the current segment (no-op when it is empty).
  void sync();
  std::size_t size() const noexcept { return items_.size(); }

  std::vector<Result> run();
  // The failures of best-effort statements in the last run(), in statement order.
  const std::vector<std::string>& best_effort_errors() const noexcept {
    return best_effort_errors_;
  }

 private:
  struct Item {
    std::string sql;
    Params params;
    bool cached;
    bool best_effort = false;
    bool sync_after = false;  // a Sync follows this statement
    Format format = Format::kText;
  };
  Connection& conn_;
  std::vector<Item> items_;
  std::vector<std::string> best_effort_errors_;
};

}  // namespace awa::pg
