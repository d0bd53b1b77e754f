#include "drain_cells.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "pg/copy.hpp"
#include "storage/store_access.hpp"

namespace awa::bench {
namespace {

constexpr std::string_view kQueue = "drain";
constexpr auto kStatementTimeout = std::chrono::seconds(120);
constexpr auto kDrainLimit = std::chrono::minutes(10);

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto idx = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  return v[idx];
}

// Commits so far in this database. Backends publish their counters lazily; each worker
// asks for a flush (flush_stats) before this is read, and the reader drops its cached
// snapshot so it sees them.
std::int64_t xact_commits(pg::Connection& c) {
  c.exec("SELECT pg_stat_clear_snapshot()");
  return c.exec("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
      .get<std::int64_t>(0, 0);
}

void flush_stats(pg::Connection& c) {
  c.exec("SELECT pg_stat_force_next_flush()");
  c.exec("SELECT 1");
}

// Runs `claimers` threads over fn(conn, done) until `total` rows are drained.
template <class Step>
std::chrono::nanoseconds drain_fleet(int claimers, int total, const std::string& schema_sql,
                                     std::vector<pg::Connection>& conns, Step step) {
  std::atomic<int> done{0};
  auto elapsed = run_fleet(
      claimers,
      [&](int i) { conns[static_cast<std::size_t>(i)].exec("SET search_path TO " + schema_sql); },
      [&](int i) {
        auto& c = conns[static_cast<std::size_t>(i)];
        const auto give_up = Clock::now() + kDrainLimit;
        while (done.load() < total) {
          if (Clock::now() > give_up) throw std::runtime_error("drain did not finish in time");
          const int n = step(i, c);
          if (n == 0) std::this_thread::yield();  // another claimer holds the only lane
          done += n;
        }
      });
  for (auto& c : conns) flush_stats(c);
  return elapsed;
}

// One claim step of a drainer: rows taken, the claim's latency, transactions committed.
struct StepResult {
  int rows;
  double claim_ms;
  int transactions;
};

// Drains with `o.claimers` fresh connections running step(conn) until o.jobs rows are
// gone, and measures the cell: throughput, WAL and commits per job, claim latency.
template <class Step>
DrainCell measure_drain(pg::Connection& admin, const DrainSetup& o, const ScopedSchema& schema,
                        Step step) {
  std::vector<pg::Connection> conns;
  for (int i = 0; i < o.claimers; ++i) {
    conns.push_back(connect("awa_bench_drain", kStatementTimeout));
  }
  flush_stats(admin);
  const auto wal0 = wal_position(admin);
  const auto commits0 = xact_commits(admin);
  std::mutex mu;
  std::vector<double> claim_ms;
  std::atomic<std::int64_t> txns{0};
  const auto elapsed =
      drain_fleet(o.claimers, o.jobs, schema.quoted(), conns, [&](int, pg::Connection& c) {
        const StepResult r = step(c);
        txns += r.transactions;
        std::lock_guard lock(mu);
        claim_ms.push_back(r.claim_ms);
        return r.rows;
      });
  const auto wal1 = wal_position(admin);
  const auto commits1 = xact_commits(admin);
  DrainCell cell;
  const double secs = std::chrono::duration<double>(elapsed).count();
  cell.jobs_per_s = o.jobs / secs;
  cell.wal_bytes_per_job = static_cast<double>(wal1 - wal0) / o.jobs;
  cell.commits_per_job = static_cast<double>(commits1 - commits0) / o.jobs;
  cell.client_commits_per_job = static_cast<double>(txns.load()) / o.jobs;
  cell.claim_p50_ms = percentile(claim_ms, 0.50);
  cell.claim_p99_ms = percentile(claim_ms, 0.99);
  return cell;
}

}  // namespace

void seed_queue(pg::Connection& admin, const ScopedSchema& schema, std::string_view queue,
                int shards, int jobs, std::string_view kind, int keys) {
  migrate_schema(admin, schema.name());
  admin.query(
      fmt::format("INSERT INTO {}.queue_meta (queue, enqueue_shards) VALUES ($1, $2) "
                  "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards",
                  schema.quoted()),
      std::string(queue), shards);
  QueueStorage store(StorageOptions{schema.name()});
  InsertOpts opts;
  opts.queue = std::string(queue);
  std::vector<NewJob> batch;
  for (int i = 0; i < jobs; ++i) {
    if (keys > 0) opts.ordering_key = fmt::format("k{}", i % keys);
    batch.emplace_back(std::string(kind), nlohmann::json{{"seq", i}}, opts);
    if (batch.size() == 5000 || i + 1 == jobs) {
      storage::insert_many_copy(store, admin, batch);
      batch.clear();
    }
  }
  admin.exec(fmt::format("VACUUM ANALYZE {}.ready_entries", schema.quoted()));
}

DrainCell drain_textbook(pg::Connection& admin, const DrainSetup& o) {
  ScopedSchema schema(admin, unique_schema_name("drain_tb"));
  admin.exec(fmt::format(
      "CREATE TABLE {0}.jobs (id bigserial PRIMARY KEY, queue text NOT NULL, priority smallint "
      "NOT NULL, kind text NOT NULL, args jsonb NOT NULL, attempt smallint NOT NULL DEFAULT 0, "
      "max_attempts smallint NOT NULL, run_at timestamptz NOT NULL DEFAULT now(), created_at "
      "timestamptz NOT NULL DEFAULT now()); CREATE INDEX ON {0}.jobs (priority, id)",
      schema.quoted()));
  {
    auto copy = admin.copy_in(fmt::format(
        "COPY {}.jobs (queue, priority, kind, args, max_attempts) FROM STDIN", schema.quoted()));
    for (int i = 0; i < o.jobs; ++i) {
      const std::string args = fmt::format("{{\"n\": {}}}", i);
      const std::optional<std::string_view> row[] = {kQueue, "2", "noop", args, "25"};
      copy.row(row);
    }
    copy.finish();
  }
  admin.exec(fmt::format("VACUUM ANALYZE {}.jobs", schema.quoted()));
  // The same batch size as the claim's, so the two compare like for like.
  const std::string del = fmt::format(
      "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs ORDER BY priority, id "
      "FOR UPDATE SKIP LOCKED LIMIT {}) RETURNING *",
      o.claim_batch);
  return measure_drain(admin, o, schema, [&](pg::Connection& c) {
    const auto t0 = Clock::now();
    const int n = c.exec_cached(del, {}).rows();
    return StepResult{n, std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), 1};
  });
}

DrainCell drain_storage(pg::Connection& admin, const DrainSetup& o, int shards) {
  ScopedSchema schema(admin, unique_schema_name("drain_q"));
  seed_queue(admin, schema, kQueue, shards, o.jobs, "noop");
  QueueStorage store(StorageOptions{schema.name()});
  std::atomic<std::int64_t> stale{0};
  QueueStorage::ClaimOptions co;
  co.max_batch = o.claim_batch;
  const DrainCell cell = measure_drain(admin, o, schema, [&](pg::Connection& c) {
    const auto t0 = Clock::now();
    const auto claimed = storage::consumer(store).claim(c, std::string(kQueue), co);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (claimed.empty()) return StepResult{0, ms, 1};
    std::vector<Completion> done;
    done.reserve(claimed.size());
    for (const auto& e : claimed) done.push_back(Completion::of(e, Outcome::kCompleted));
    for (const auto& r : storage::consumer(store).complete(c, done)) stale += r.stale() ? 1 : 0;
    return StepResult{static_cast<int>(claimed.size()), ms, 2};
  });
  const auto completed = admin
                             .exec(fmt::format("SELECT completed FROM {}.queue_counts_exact('{}')",
                                               schema.quoted(), kQueue))
                             .get<std::int64_t>(0, 0);
  if (completed != o.jobs || stale.load() != 0) {
    throw std::runtime_error(fmt::format("drain S={}: {} completed of {}, {} stale", shards,
                                         completed, o.jobs, stale.load()));
  }
  return cell;
}

DrainCell median_cell(const std::vector<DrainCell>& cells) {
  const auto med = [&](auto field) {
    std::vector<double> v;
    for (const auto& c : cells) v.push_back(c.*field);
    return median(v);
  };
  DrainCell m;
  m.jobs_per_s = med(&DrainCell::jobs_per_s);
  m.wal_bytes_per_job = med(&DrainCell::wal_bytes_per_job);
  m.commits_per_job = med(&DrainCell::commits_per_job);
  m.client_commits_per_job = med(&DrainCell::client_commits_per_job);
  m.claim_p50_ms = med(&DrainCell::claim_p50_ms);
  m.claim_p99_ms = med(&DrainCell::claim_p99_ms);
  return m;
}

}  // namespace awa::bench
