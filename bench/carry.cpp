// scripts/bench carry: what ring maintenance writes for work that outlives a lap of the
// queue ring (docs/design/rings.md, "A backlog never blocks the ring"). Two cells, each in
// a fresh throw-away schema, driven tick by tick on one thread so that nothing else writes
// while maintenance runs:
//
// 1. failures — retained failed jobs. Each tick stands for 5 seconds of a service (a rotation
// interval):
//    --successes jobs that complete and --failures jobs that fail for good (max_attempts 1)
//    are enqueued, claimed and completed, then every ring gets the leader's maintenance
//    step (runtime::maintain_ring, rotation due). 16 ticks are one lap of the queue ring.
//    The failed jobs stay inside their retention (72 h) for the whole run.
// 2. backlog — a paused queue's backlog. --backlog jobs are enqueued (COPY) into a paused
//    queue; a second queue gets --successes jobs per tick, so the rings keep rotating, for
//    --backlog-laps laps. Then the queue is resumed and drained (claims of 512, each batch
//    completed) while the maintenance step keeps running about once a second (rotation due
//    every 5 s); finally maintenance runs until it has nothing left to write.
//
// Measured per lap: rows maintenance wrote (rows carried forward, plus rows deleted by the
// keep-slot sweep), WAL bytes of the maintenance calls (pg_current_wal_lsn around each
// one; autovacuum running at the same moment is counted too) and their wall time. For the
// backlog also the drain time after resume and what maintenance wrote after it.
//
// Bounded: fixed job and tick counts, a statement_timeout on every session.
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "bench_common.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "runtime/ring_maintenance.hpp"
#include "storage/store_access.hpp"

namespace awa::bench {
namespace {

constexpr auto kStatementTimeout = std::chrono::seconds(600);
constexpr auto kRetention = std::chrono::seconds(std::chrono::hours(72));
constexpr int kTicksPerLap = 16;  // the queue ring's slot count
// What a tick stands for: the leader's default rotation interval (5 failures a tick = 1/s).
constexpr double kSecondsPerTick = 5;

struct Options {
  std::vector<std::string> cases{"failures", "backlog"};
  int failure_laps = 50;
  int failures = 5;    // per tick
  int successes = 45;  // per tick

  std::int64_t backlog = 1'000'000;
  int backlog_laps = 30;
  std::string json_path;
};

struct Lap {
  int lap = 0;
  std::int64_t rows_written = 0;
  std::int64_t wal_bytes = 0;
  double maintenance_ms = 0;
};

// Maintenance totals over some calls.
struct Work {
  std::int64_t rows_written = 0;
  std::int64_t wal_bytes = 0;
  double ms = 0;
  bool wrote() const { return rows_written > 0; }
};

// The leader's ring step on every ring, timed, with the WAL it wrote.
Work maintain(Connection& conn, const Admin& admin, bool rotate_due) {
  auto& c = pg::native(conn);
  Work w;
  const auto wal0 = wal_position(c);
  const auto t0 = Clock::now();
  for (const char* ring : kRings) {
    const auto tick = runtime::maintain_ring(conn, admin, ring, rotate_due, kRetention);
    w.rows_written += tick.rows_carried + tick.rows_swept;
  }
  w.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  w.wal_bytes = wal_position(c) - wal0;
  return w;
}

void add(Lap& lap, const Work& w) {
  lap.rows_written += w.rows_written;
  lap.wal_bytes += w.wal_bytes;
  lap.maintenance_ms += w.ms;
}

InsertOpts opts(const std::string& queue, int max_attempts) {
  InsertOpts o;
  o.queue = queue;
  o.max_attempts = max_attempts;
  return o;
}

// Enqueues `ok` jobs that will complete and `bad` that will fail for good, claims and
// completes them all.
void run_jobs(pg::Connection& c, QueueStorage& store, const std::string& queue, int ok, int bad) {
  std::vector<NewJob> jobs;
  for (int i = 0; i < ok; ++i) jobs.emplace_back("ok", nlohmann::json{{"i", i}}, opts(queue, 1));
  for (int i = 0; i < bad; ++i)
    jobs.emplace_back("bad", nlohmann::json{{"i", i}, {"pad", std::string(200, 'x')}},
                      opts(queue, 1));
  storage::insert_many(store, c, jobs);
  std::size_t done = 0;
  while (done < jobs.size()) {
    QueueStorage::ClaimOptions co;
    co.max_batch = 512;
    const auto claimed = storage::consumer(store).claim(c, queue, co);
    if (claimed.empty()) throw std::runtime_error("claimed nothing with jobs still pending");
    std::vector<Completion> out;
    for (const auto& e : claimed) {
      out.push_back(e.kind == "bad" ? Completion::of(e, Outcome::kFail, "failed on purpose")
                                    : Completion::of(e, Outcome::kCompleted));
    }
    for (const auto& r : storage::consumer(store).complete(c, out)) {
      if (r.stale()) throw std::runtime_error(fmt::format("stale completion of {}", r.job_id));
    }
    done += claimed.size();
  }
}

void prepare(pg::Connection& admin, const ScopedSchema& s) { migrate_schema(admin, s.name()); }

nlohmann::json laps_json(const std::vector<Lap>& laps) {
  auto out = nlohmann::json::array();
  for (const auto& l : laps) {
    out.push_back({{"lap", l.lap},
                   {"rows_written", l.rows_written},
                   {"wal_bytes", l.wal_bytes},
                   {"maintenance_ms", l.maintenance_ms}});
  }
  return out;
}

std::string laps_table(const std::vector<Lap>& laps) {
  TablePrinter t({{"lap", TablePrinter::Align::kRight},
                  {"rows written", TablePrinter::Align::kRight},
                  {"WAL MB", TablePrinter::Align::kRight},
                  {"maintenance ms", TablePrinter::Align::kRight}});
  const auto n = static_cast<int>(laps.size());
  for (const auto& l : laps) {
    // First laps, every tenth and the last: enough to see the trend.
    if (l.lap > 3 && l.lap % 10 != 0 && l.lap != n) continue;
    t.add_row({std::to_string(l.lap), thousands(static_cast<double>(l.rows_written)),
               fmt::format("{:.2f}", static_cast<double>(l.wal_bytes) / 1e6),
               fmt::format("{:.0f}", l.maintenance_ms)});
  }
  return t.render();
}

Lap totals(const std::vector<Lap>& laps) {
  Lap sum;
  for (const auto& l : laps) {
    sum.rows_written += l.rows_written;
    sum.wal_bytes += l.wal_bytes;
    sum.maintenance_ms += l.maintenance_ms;
  }
  return sum;
}

nlohmann::json failures_cell(pg::Connection& admin_conn, const Options& o) {
  ScopedSchema schema(admin_conn, unique_schema_name("carry_fail"));
  prepare(admin_conn, schema);
  QueueStorage store(StorageOptions{schema.name()});
  auto conn = pg::adopt(connect("awa_bench_carry", kStatementTimeout));
  const Admin admin(schema.name());
  std::vector<Lap> laps;
  for (int lap = 1; lap <= o.failure_laps; ++lap) {
    Lap l{lap};
    for (int t = 0; t < kTicksPerLap; ++t) {
      run_jobs(pg::native(conn), store, "work", o.successes, o.failures);
      add(l, maintain(conn, admin, true));
    }
    laps.push_back(l);
  }
  const auto failed = admin.queue_counts(conn, "work").failed;
  fmt::print("\nfailures: {} laps of {} ticks, {} failed jobs retained at the end\n{}\n",
             o.failure_laps, kTicksPerLap, failed, laps_table(laps));
  const Lap sum = totals(laps);
  fmt::print("total: {} rows written, {:.1f} MB WAL, {:.1f} s of maintenance\n",
             thousands(static_cast<double>(sum.rows_written)),
             static_cast<double>(sum.wal_bytes) / 1e6, sum.maintenance_ms / 1e3);
  return {{"laps", laps_json(laps)},
          {"failed_retained", failed},
          {"rows_written", sum.rows_written},
          {"wal_bytes", sum.wal_bytes},
          {"maintenance_ms", sum.maintenance_ms}};
}

nlohmann::json backlog_cell(pg::Connection& admin_conn, const Options& o) {
  ScopedSchema schema(admin_conn, unique_schema_name("carry_backlog"));
  prepare(admin_conn, schema);
  QueueStorage store(StorageOptions{schema.name()});
  auto conn = pg::adopt(connect("awa_bench_carry", kStatementTimeout));
  auto& c = pg::native(conn);
  const Admin admin(schema.name());
  admin.pause_queue(conn, "backlog");

  const auto seed0 = Clock::now();
  std::vector<NewJob> jobs;
  for (std::int64_t i = 0; i < o.backlog; ++i) {
    jobs.emplace_back("ok", nlohmann::json{{"n", i}}, opts("backlog", 25));
    if (jobs.size() == 5000 || i + 1 == o.backlog) {
      storage::insert_many_copy(store, c, jobs);
      jobs.clear();
    }
  }
  const double seed_s = std::chrono::duration<double>(Clock::now() - seed0).count();
  fmt::print("\nbacklog: {} jobs enqueued in {:.1f} s\n", thousands(static_cast<double>(o.backlog)),
             seed_s);

  std::vector<Lap> laps;
  for (int lap = 1; lap <= o.backlog_laps; ++lap) {
    Lap l{lap};
    for (int t = 0; t < kTicksPerLap; ++t) {
      run_jobs(c, store, "traffic", o.successes, 0);
      add(l, maintain(conn, admin, true));
    }
    laps.push_back(l);
  }
  fmt::print("held for {} laps:\n{}\n", o.backlog_laps, laps_table(laps));

  // Resume and drain, with the leader's cadence: a ring step about every second, a
  // rotation due every 5 s.
  admin.resume_queue(conn, "backlog");
  Work during;
  const auto d0 = Clock::now();
  auto last_step = d0;
  auto last_rotate = d0;
  std::int64_t drained = 0;
  for (;;) {
    QueueStorage::ClaimOptions co;
    co.max_batch = 512;
    const auto claimed = storage::consumer(store).claim(c, "backlog", co);
    if (!claimed.empty()) {
      std::vector<Completion> out;
      for (const auto& e : claimed) out.push_back(Completion::of(e, Outcome::kCompleted));
      storage::consumer(store).complete(c, out);
      drained += static_cast<std::int64_t>(claimed.size());
    }
    const auto now = Clock::now();
    if (now - last_step >= std::chrono::seconds(1) || claimed.empty()) {
      const bool rotate = now - last_rotate >= std::chrono::seconds(5);
      if (rotate) last_rotate = now;
      const auto w = maintain(conn, admin, rotate);
      during.rows_written += w.rows_written;
      during.wal_bytes += w.wal_bytes;
      during.ms += w.ms;
      last_step = now;
    }
    if (claimed.empty()) break;
    if (now - d0 > std::chrono::minutes(20)) throw std::runtime_error("drain took over 20 minutes");
  }
  const double drain_s = std::chrono::duration<double>(Clock::now() - d0).count();
  if (drained != o.backlog)
    throw std::runtime_error(fmt::format("drained {} of {} jobs", drained, o.backlog));

  // What maintenance still has to write once the queue is empty (bounded).
  Work after;
  for (int i = 0; i < 200; ++i) {
    const auto w = maintain(conn, admin, true);
    after.rows_written += w.rows_written;
    after.wal_bytes += w.wal_bytes;
    after.ms += w.ms;
    if (!w.wrote() && i >= kTicksPerLap) break;
    run_jobs(c, store, "traffic", 1, 0);  // keeps the rings rotating
  }
  const Lap sum = totals(laps);
  fmt::print(
      "held: {} rows written, {:.1f} MB WAL, {:.1f} s of maintenance\n"
      "drain after resume: {:.1f} s ({} jobs/s); maintenance meanwhile {} rows, {:.1f} MB WAL\n"
      "after the drain: {} rows, {:.1f} MB WAL, {:.1f} s\n",
      thousands(static_cast<double>(sum.rows_written)), static_cast<double>(sum.wal_bytes) / 1e6,
      sum.maintenance_ms / 1e3, drain_s, thousands(static_cast<double>(o.backlog) / drain_s),
      thousands(static_cast<double>(during.rows_written)),
      static_cast<double>(during.wal_bytes) / 1e6,
      thousands(static_cast<double>(after.rows_written)),
      static_cast<double>(after.wal_bytes) / 1e6, after.ms / 1e3);
  return {
      {"laps", laps_json(laps)},
      {"backlog", o.backlog},
      {"seed_s", seed_s},
      {"rows_written", sum.rows_written},
      {"wal_bytes", sum.wal_bytes},
      {"maintenance_ms", sum.maintenance_ms},
      {"drain_s", drain_s},
      {"during_drain", {{"rows_written", during.rows_written}, {"wal_bytes", during.wal_bytes}}},
      {"after_drain",
       {{"rows_written", after.rows_written},
        {"wal_bytes", after.wal_bytes},
        {"maintenance_ms", after.ms}}}};
}

int run(const Options& o) {
  auto admin = connect("awa_bench_admin", kStatementTimeout);
  const auto machine = machine_info(admin);
  fmt::print("carry: {}\n{}\n", fmt::join(o.cases, ","), machine.describe());
  nlohmann::json doc{{"benchmark", "carry"},
                     {"ticks_per_lap", kTicksPerLap},
                     {"seconds_per_tick", kSecondsPerTick},
                     {"machine", machine.to_json()}};
  for (const auto& name : o.cases) {
    if (name == "failures") {
      doc["failures"] = failures_cell(admin, o);
      doc["failures"]["per_tick"] = {{"failures", o.failures}, {"successes", o.successes}};
    } else if (name == "backlog") {
      doc["backlog"] = backlog_cell(admin, o);
    } else {
      throw std::invalid_argument("unknown case '" + name + "' (failures, backlog)");
    }
  }
  if (!o.json_path.empty()) {
    write_json(o.json_path, doc);
    fmt::print("wrote {}\n", o.json_path);
  }
  return 0;
}

}  // namespace
}  // namespace awa::bench

int main(int argc, char** argv) {
  awa::bench::Options o;
  CLI::App app{"carry: rows and WAL ring maintenance writes for retained failures and a backlog"};
  std::string cases = "failures,backlog";
  app.add_option("--cases", cases, "failures, backlog")->capture_default_str();
  app.add_option("--failure-laps", o.failure_laps, "laps of the failures cell")
      ->capture_default_str();
  app.add_option("--failures", o.failures, "failed jobs per tick")->capture_default_str();
  app.add_option("--successes", o.successes, "completed jobs per tick")->capture_default_str();
  app.add_option("--backlog", o.backlog, "paused backlog jobs")->capture_default_str();
  app.add_option("--backlog-laps", o.backlog_laps, "laps the backlog is held")
      ->capture_default_str();
  app.add_option("--json", o.json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the maintenance step logs every carry
  try {
    o.cases.clear();
    std::string::size_type start = 0;
    while (start <= cases.size()) {
      const auto end = cases.find(',', start);
      o.cases.push_back(cases.substr(start, end == std::string::npos ? end : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    if (o.failure_laps < 1 || o.backlog_laps < 1 || o.backlog < 1 || o.failures < 0 ||
        o.successes < 1) {
      throw std::invalid_argument("laps, --backlog and --successes must be >= 1");
    }
    return awa::bench::run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "carry: {}\n", e.what());
    return 1;
  }
}
