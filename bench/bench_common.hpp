// Shared pieces of the benchmark programs (bench/*.cpp, one binary each, run through
// scripts/bench): connection set-up, throw-away schemas, a producer fleet behind a start
// line, summary statistics, a Markdown table printer, JSON output and a wait-event
// sampler over pg_stat_activity.
//
// Every benchmark talks only to the server DATABASE_URL names and ends by itself: all
// work is a fixed number of jobs, and every session has a statement_timeout so a lock
// that is never released ends the run with an error instead of hanging it.
//
// Thread safety: unless a comment says otherwise, an object belongs to one thread.
// WaitSampler runs its own thread; watch() and retire() may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/client.hpp"
#include "pg/connection.hpp"

namespace awa::bench {

using Clock = std::chrono::steady_clock;

// The application_name of benchmark producer sessions; the wait sampler looks for it.
inline constexpr std::string_view kProducerApp = "awa_bench_producer";

// $DATABASE_URL; throws std::runtime_error when unset (scripts/bench sets it).
std::string database_url();

// Connect options for DATABASE_URL with the given application_name.
pg::ConnectOptions connect_options(std::string application_name);

// Connects and sets the session's statement_timeout (the run's bound on any one wait).
pg::Connection connect(std::string application_name, std::chrono::seconds statement_timeout);

// The server's WAL insert position, pg_current_wal_lsn(), in bytes: the difference of two
// readings is the WAL the cluster wrote between them.
std::int64_t wal_position(pg::Connection& conn);

// "1,2,4,8" -> {1, 2, 4, 8}. Throws std::invalid_argument naming `what` on bad input.
std::vector<int> parse_int_list(std::string_view text, std::string_view what);

// p50 / p95 / p99 (nearest rank) and max of a sample, with its size.
struct Percentiles {
  double p50 = 0;
  double p95 = 0;
  double p99 = 0;
  double max = 0;
  std::size_t n = 0;

  nlohmann::json to_json() const {
    return {{"p50", p50}, {"p95", p95}, {"p99", p99}, {"max", max}, {"jobs", n}};
  }
};
Percentiles percentiles(std::vector<double> values);

double mean(std::span<const double> values);
double median(std::span<const double> values);
// "median (min–max)", each formatted with `spec` (e.g. "{:.1f}"); the form the docs quote.
std::string median_range(std::span<const double> values, std::string_view spec);

// 123456.7 -> "123,457"
std::string thousands(double value);

// A schema that exists from construction to destruction: created empty (after dropping
// a leftover of the same name), dropped with CASCADE at the end. `admin` must outlive it
// and must not be inside a transaction when the destructor runs.
class ScopedSchema {
 public:
  ScopedSchema(pg::Connection& admin, std::string name);
  ~ScopedSchema();
  ScopedSchema(const ScopedSchema&) = delete;
  ScopedSchema& operator=(const ScopedSchema&) = delete;

  const std::string& name() const noexcept { return name_; }
  const std::string& quoted() const noexcept { return quoted_; }

 private:
  pg::Connection& admin_;
  std::string name_;
  std::string quoted_;
};

// "bench_<prefix>_<pid>_<n>": unique within this process and across processes.
std::string unique_schema_name(std::string_view prefix);

// AWA_BENCH_FEATURES: "off" runs every cell on the function set without its optional
// features (schema::strip_optional_features); unset or "on", the functions as shipped.
// Any other value throws. The report's machine line says which ran.
bool optional_features_off();
// Migrates `schema` with this build (schema::Migrator) and, when optional_features_off(),
// re-installs the functions without their optional features.
void migrate_schema(pg::Connection& admin, const std::string& schema);

// Hooks of run_fleet, run on the calling thread.
struct FleetHooks {
  std::function<void()> on_ready;    // every worker prepared; the line is not released yet
  std::function<void()> on_release;  // right after the release (e.g. start a sampler)
};

// Runs `workers` threads. Worker i first runs prepare(i) (connect, warm up: not timed)
// and then waits at a start line. When every worker has prepared, on_ready() runs, the
// start line is released, on_release() runs, and each worker runs work(i).
// Returns the wall time from the release to the end of the last work(i).
// If any prepare() throws, no work() runs; the first exception of any worker is
// rethrown after every thread has been joined.
std::chrono::nanoseconds run_fleet(int workers, const std::function<void(int)>& prepare,
                                   const std::function<void(int)>& work,
                                   const FleetHooks& hooks = {});

// What the host and the server look like, for the report.
struct MachineInfo {
  unsigned nproc = 0;
  std::uint64_t memory_bytes = 0;
  std::string loadavg;  // /proc/loadavg's 1/5/15-minute averages when the run started
  std::string server_version;
  std::string server_address;                   // inet_server_addr():inet_server_port()
  std::map<std::string, std::string> settings;  // fsync, synchronous_commit, ...
  bool optional_features_off = false;           // AWA_BENCH_FEATURES=off

  std::string describe() const;
  nlohmann::json to_json() const;
};
MachineInfo machine_info(pg::Connection& conn);
std::string loadavg();

// A Markdown table with aligned columns, so output pastes into docs as is.
class TablePrinter {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };

  explicit TablePrinter(std::vector<Column> columns);
  // REQUIRES: cells.size() == number of columns.
  void add_row(std::vector<std::string> cells);
  std::string render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Counts of (wait_event_type, wait_event) over samples of backends. A backend that is
// running has no wait event: it is counted as ("CPU", "running"). An idle backend
// (between transactions, waiting for its client) is ("Client", "ClientRead (idle in
// client)").
struct WaitProfile {
  struct Entry {
    std::string type;
    std::string event;
    double percent = 0;
  };
  std::map<std::pair<std::string, std::string>, std::uint64_t> counts;
  std::uint64_t samples = 0;  // backend observations
  std::uint64_t polls = 0;    // pg_stat_activity reads

  void merge(const WaitProfile& other);
  // The `limit` most frequent waits, largest first, as % of samples.
  std::vector<Entry> top(std::size_t limit) const;
  nlohmann::json to_json(std::size_t limit) const;
  std::string render(std::size_t limit) const;  // a TablePrinter table
};

// Polls pg_stat_activity on its own connection every `interval` for the given backend
// pids (only while start()..stop()). The connection is the sampler's alone; its own
// backend never matches the pids. Sampling ends at stop(), or when every watched backend
// has retired. A failed poll ends sampling; stop() rethrows it.
class WaitSampler {
 public:
  WaitSampler(pg::Connection& conn, std::vector<int> pids, std::chrono::milliseconds interval);
  ~WaitSampler();
  WaitSampler(const WaitSampler&) = delete;
  WaitSampler& operator=(const WaitSampler&) = delete;

  // Adds a backend to sample. Thread-safe.
  void watch(int pid);
  void start();
  WaitProfile stop();
  // The backend finished its work: it is not sampled any more, so producers that end
  // early do not show up as idle while the others still run. Thread-safe.
  void retire(int pid);

 private:
  void loop(const std::stop_token& stop);
  std::string pid_array() const;

  pg::Connection& conn_;
  std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::set<int> pids_;   // guarded by mu_
  WaitProfile profile_;  // written by the sampler thread only until it is joined
  std::exception_ptr error_;
  std::jthread thread_;
};

// Writes `doc` to `path` (pretty-printed); throws std::runtime_error on failure.
void write_json(const std::string& path, const nlohmann::json& doc);

// Open-loop pacing of a producer: job `seq` of a schedule of `rate` jobs/s starting at
// `t0` is due at t0 + seq / rate. Sleeps until then, or, when already late, raises
// `max_late` by the delay. Returns the due time, or nullopt once `give_up` has passed
// (the producer stops sending).
std::optional<Clock::time_point> wait_until_due(Clock::time_point t0, std::int64_t seq, int rate,
                                                Clock::time_point give_up,
                                                std::chrono::nanoseconds& max_late);

// A Client's counters as the benchmarks report them (the "client" object of their JSON).
nlohmann::json client_stats_json(const ClientStats& stats);

}  // namespace awa::bench
