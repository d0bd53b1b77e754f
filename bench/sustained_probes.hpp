// scripts/bench sustained's probes (sustained.cpp says what each figure means): the
// commit accounting of the benchmark's own sessions, the WAL position, the Client's
// durable-completion timeline and the depth / dead-tuple sampler.
//
// Thread safety: CompletionWatcher and Sampler each run a thread from construction until
// stop() (or destruction); the connection given to a Sampler is its alone meanwhile, and
// the Client must outlive both. Everything else belongs to the calling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "awa/client.hpp"
#include "bench_common.hpp"
#include "pg/connection.hpp"
#include "sustained_run.hpp"

namespace awa::bench::sustained {

inline constexpr std::string_view kQueue = "sustained";
// Every session of this benchmark has an application_name starting with kAppPrefix; the
// sampler counts the active sessions that do not (other load on the server).
inline constexpr std::string_view kAppPrefix = "awa_bench_sustained";
inline constexpr std::string_view kClientApp = "awa_bench_sustained_client";
inline constexpr std::chrono::seconds kStatementTimeout{120};

// A session's local transaction id (pg_locks' virtualxid "backend/lxid") goes up by one for
// every transaction the session starts, whatever made it (a statement, a Parse with its own
// Sync, each segment of a pipeline, a NOTIFY after a commit). mark() returns the id of its
// own statement and forces the session's pending statistics out before the server
// answers, so pg_stat_database has counted every transaction up to and including it.
std::int64_t mark(pg::Connection& c);

struct DbCounters {
  std::int64_t commits = 0;    // pg_stat_database.xact_commit of this database
  std::int64_t rollbacks = 0;  // xact_rollback
  std::int64_t lxid = 0;       // the reading statement's local transaction id
};
// Read inside one statement: what was flushed before it, not the statement itself.
DbCounters read_db(pg::Connection& c);

// autovacuum + autoanalyze runs so far on the tables of `schema`.
std::int64_t autovacuum_runs(pg::Connection& c, const std::string& schema);

// DATABASE_URL with statement_timeout and synchronous_commit = on for every session opened
// with it (libpq's `options`: the Client opens its connections itself). Throws when the URL
// already sets options.
std::string client_url();

// A benchmark session "awa_bench_sustained_<role>" with a statement_timeout and
// synchronous_commit = on.
pg::Connection open_session(std::string_view role);

// (ns since `base`, ClientStats::completed - completed0) at every change of the count,
// polled every millisecond.
class CompletionWatcher {
 public:
  using Point = std::pair<std::int64_t, std::uint64_t>;
  CompletionWatcher(const Client& client, Clock::time_point base, std::uint64_t completed0)
      : client_(client),
        base_(base),
        completed0_(completed0),
        thread_([this](const std::stop_token& stop) { loop(stop); }) {}
  CompletionWatcher(const CompletionWatcher&) = delete;
  CompletionWatcher& operator=(const CompletionWatcher&) = delete;

  std::vector<Point> stop();

 private:
  void poll();
  void loop(const std::stop_token& stop);

  const Client& client_;
  Clock::time_point base_;
  std::uint64_t completed0_;
  std::vector<Point> points_;  // the watcher thread's until joined
  std::jthread thread_;        // last: starts after everything above exists
};

// The count reached at `t_ns` on a watcher's timeline.
std::uint64_t completed_at(const std::vector<CompletionWatcher::Point>& points, std::int64_t t_ns);

// Depth, in-flight jobs and other active sessions every kSampleInterval, dead tuples every
// kDeadEvery-th sample, on `conn` by an absolute schedule from t0 (a late sample skips the
// ticks it missed). A failed sample ends sampling; stop() rethrows it.
class Sampler {
 public:
  Sampler(pg::Connection& conn, const Client& client, const ScopedSchema& schema,
          Clock::time_point t0, std::uint64_t completed0);
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Runs the sampler's statements once on `conn`, so that the first sample of the window
  // does not pay for planning them.
  static void prime(pg::Connection& conn, const ScopedSchema& schema);

  std::vector<SustainedSample> stop();

 private:
  void take(int tick);
  void loop(const std::stop_token& stop);

  pg::Connection& conn_;
  const Client& client_;
  std::string schema_;
  std::string depth_sql_;
  Clock::time_point t0_;
  std::uint64_t completed0_;
  std::vector<SustainedSample> samples_;  // the sampler thread's until joined
  std::exception_ptr error_;
  std::jthread thread_;  // last: starts after everything above exists
};

}  // namespace awa::bench::sustained
