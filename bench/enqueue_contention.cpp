// scripts/bench enqueue-contention: ADR-025's test_queue_storage_enqueue_contention.
//
// P producer threads, each with its own connection and all sharing one QueueStorage (one
// store per process, as in a service), enqueue to the same queue and priority in
// self-committing batches. The sweep runs over the queue's enqueue_shards (the ADR's
// lever) and over the two write paths (multi-row INSERT and COPY), and measures a
// ceiling in the same run: the same producers, batches and row contents inserted into a
// plain table with only a primary key, so "vs ceiling" says how much of what this server
// can insert the queue keeps, independent of the machine.
//
// A second, diagnostic ceiling adds to the plain INSERT the pg_notify statement that the
// enqueue path sends with every batch, to show what the notification alone costs.
//
// With --batch 1 (single-job enqueue: one insert() call, one job, its own transaction) a
// third reference is measured: raw single-row commits, i.e. the same producers each
// sending one plain `INSERT ... VALUES` per transaction into the plain table. That is
// what this server can commit one row at a time, and the yardstick of single-job enqueue.
//
// A fourth reference, the bare ready table, puts the same rows into the queue's own
// ready_entries (the migrated schema: its partition, its ADR-025 primary key, its BRIN
// index) with no lane: no reservation, no lane lock, no lane head; each producer writes
// one shard with its own sequence for lane_seq. It is what the table's shape alone
// allows, so the gap between it and the plain-table ceiling is the cost of the row and
// its key, and the gap between the queue's cells and it is the cost of the enqueue logic.
//
// Cells are interleaved across runs (run 1: ceilings, S=1, S=2, ...; run 2: ...) so that
// drift (other load, checkpoints, caches) hits every cell alike. Each cell gets a fresh
// schema and fresh connections; warm-up (connect, prepare, create the lanes) is not timed.
// After each cell the rows are counted (and, for the queue, the shards they landed on):
// a mismatch ends the benchmark with an error rather than printing a wrong number.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "bench_common.hpp"
#include "pg/connection.hpp"
#include "pg/pipeline.hpp"
#include "schema/migrator.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/pg_array.hpp"
#include "storage/store_access.hpp"

namespace awa::bench {
namespace {

constexpr std::string_view kQueue = "bench";
constexpr int kPriority = 2;
constexpr std::string_view kKind = "bench";
constexpr std::size_t kWarmupJobs = 10;
constexpr std::size_t kTopWaits = 8;

// The benchmark's fixture SQL ({0} = the quoted cell schema). The plain table has the
// ready row's payload columns and nothing but a primary key: the cheapest durable home
// for the same rows on this server.
constexpr std::string_view kPlainTable =
    "CREATE TABLE {0}.plain_jobs (id bigserial PRIMARY KEY, queue text NOT NULL, "
    "priority smallint NOT NULL, kind text NOT NULL, args jsonb NOT NULL, "
    "max_attempts smallint NOT NULL, run_at timestamptz NOT NULL, "
    "created_at timestamptz NOT NULL)";
constexpr std::string_view kPlainInsert =
    "INSERT INTO {0}.plain_jobs (queue, priority, kind, args, max_attempts, run_at, created_at) "
    "SELECT $1, $2, t.kind, t.args, t.max_attempts, coalesce(t.run_at, now()), now() "
    "FROM unnest($3::text[], $4::jsonb[], $5::smallint[], $6::timestamptz[]) "
    "AS t(kind, args, max_attempts, run_at)";
// The raw single-row commit: one row, one statement, one (implicit) transaction.
constexpr std::string_view kPlainInsertOne =
    "INSERT INTO {0}.plain_jobs (queue, priority, kind, args, max_attempts, run_at, created_at) "
    "VALUES ($1, $2, $3, $4::jsonb, $5, now(), now())";
constexpr std::string_view kCountPlain = "SELECT count(*) FROM {0}.plain_jobs";
// The bare ready table: $1 slot, $2 queue, $3 priority, $4 shard, $5 the shard's sequence.
constexpr std::string_view kBareInsert =
    "INSERT INTO {0}.ready_entries (ready_slot, queue, priority, enqueue_shard, lane_seq, "
    "job_id, kind, args, max_attempts, run_at, created_at) "
    "SELECT $1, $2, $3, $4, nextval($5::regclass), nextval('{0}.job_ids'), t.kind, t.args, "
    "t.max_attempts, coalesce(t.run_at, now()), now() "
    "FROM unnest($6::text[], $7::jsonb[], $8::smallint[], $9::timestamptz[]) "
    "AS t(kind, args, max_attempts, run_at)";
constexpr std::string_view kBareSequence = "CREATE SEQUENCE {0}.bare_lane_{1}";
constexpr std::string_view kCurrentSlot = "SELECT {0}.ring_current_slot('queue')";
// ADR-025's operator procedure for setting a queue's shard count.
constexpr std::string_view kSeedShards =
    "INSERT INTO {0}.queue_meta (queue, enqueue_shards) VALUES ($1, $2) "
    "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards";
constexpr std::string_view kCountReady =
    "SELECT count(*), count(DISTINCT enqueue_shard) FROM {0}.ready_entries WHERE queue = $1";
constexpr std::string_view kCountLanes =
    "SELECT count(*) FROM {0}.queue_enqueue_heads WHERE queue = $1";

// kCeilingNotify is a diagnostic: the ceiling's INSERT plus the pg_notify statement the
// enqueue path sends with every batch, in one implicit transaction. It separates what the
// notification costs from what the queue's own tables and locks cost.
// kSingleRow is the raw single-row commit reference (one row per transaction, whatever
// --batch says), measured when --batch is 1.
// kBareReady is the bare ready table (see the top of this file), measured at the S of the
// target (8 batched, 16 single-job, or the largest S swept).
enum class Mode { kCeiling, kCeilingNotify, kSingleRow, kBareReady, kInsert, kCopy };

// The plain-table references.
bool is_ceiling(Mode m) {
  return m == Mode::kCeiling || m == Mode::kCeilingNotify || m == Mode::kSingleRow;
}
// Every cell that is not the queue's own enqueue path.
bool is_reference(Mode m) { return is_ceiling(m) || m == Mode::kBareReady; }

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kCeiling:
      return "ceiling";
    case Mode::kCeilingNotify:
      return "ceiling_notify";
    case Mode::kSingleRow:
      return "single_row_commit";
    case Mode::kBareReady:
      return "bare_ready";
    case Mode::kInsert:
      return "insert";
    case Mode::kCopy:
      return "copy";
  }
  return "?";
}

// Which cells the wait sampler watches. Sampling costs the server a little CPU, so by
// default every cell pays it alike and the ratios between cells stay fair.
enum class WaitCells { kAll, kEnds, kNone };

struct Options {
  std::vector<int> shards{1, 2, 4, 8};
  std::string shards_source = "--shards";
  int producers = 16;
  int jobs_per_producer = 15000;
  int batch = 500;
  std::vector<Mode> modes{Mode::kInsert, Mode::kCopy};
  int runs = 3;
  std::string json_path;
  WaitCells wait_cells = WaitCells::kAll;
  int sample_ms = 5;
  int statement_timeout_s = 120;
  bool checkpoint = true;
  bool notify_ceiling = true;
  bool single_row_cell = true;  // measured only when batch == 1
  bool bare_ready_cell = true;
};

// The S that issue 11's target names (8 batched, 16 single-job), or the largest S swept.
int target_shards(const Options& o) {
  const int wanted = o.batch > 1 ? 8 : 16;
  return std::find(o.shards.begin(), o.shards.end(), wanted) != o.shards.end() ? wanted
                                                                               : o.shards.back();
}

// A verification failure: the benchmark measured something other than it claims.
class VerificationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Workload {
  std::vector<std::vector<NewJob>> timed;   // per producer: jobs_per_producer jobs
  std::vector<std::vector<NewJob>> warmup;  // per producer: warm-up batches, flattened
  std::size_t warmup_batches = 1;
  std::uint64_t timed_jobs = 0;
  std::uint64_t warmup_jobs = 0;
};

Workload make_workload(const Options& o) {
  Workload w;
  const int max_shards = *std::max_element(o.shards.begin(), o.shards.end());
  // Enough warm-up batches that the rotor visits every shard before timing starts, so no
  // lane is created inside the timed window (one batch per producer whenever S <= P).
  w.warmup_batches =
      static_cast<std::size_t>(std::max(1, (max_shards + o.producers - 1) / o.producers));
  InsertOpts opts;
  opts.queue = std::string(kQueue);
  opts.priority = kPriority;
  std::int64_t n = 0;
  for (int p = 0; p < o.producers; ++p) {
    auto& timed = w.timed.emplace_back();
    timed.reserve(static_cast<std::size_t>(o.jobs_per_producer));
    for (int i = 0; i < o.jobs_per_producer; ++i) {
      timed.emplace_back(std::string(kKind), nlohmann::json{{"n", n++}}, opts);
    }
    auto& warm = w.warmup.emplace_back();
    for (std::size_t i = 0; i < w.warmup_batches * kWarmupJobs; ++i) {
      warm.emplace_back(std::string(kKind), nlohmann::json{{"warmup", n++}}, opts);
    }
    w.timed_jobs += timed.size();
    w.warmup_jobs += warm.size();
  }
  return w;
}

// One self-committing statement: the plain-table counterpart of an insert_many batch.
// REQUIRES: every job in `jobs` has the same queue and priority (true of this workload).
// The rows' arrays ($kind, $args, $max_attempts, $run_at) appended to `p`.
pg::Params& add_row_arrays(pg::Params& p, std::span<const NewJob> jobs) {
  storage::ArrayLiteral kinds, args, attempts, run_at;
  for (const auto& j : jobs) {
    kinds.add(j.kind);
    args.add(j.args_json);
    attempts.add(static_cast<std::int64_t>(j.opts.max_attempts));
    run_at.add_null();  // the workload never schedules: run_at is the insert time
  }
  return p.add(std::move(kinds).finish())
      .add(std::move(args).finish())
      .add(std::move(attempts).finish())
      .add(std::move(run_at).finish());
}

pg::Params plain_params(std::span<const NewJob> jobs) {
  pg::Params p = pg::make_params(jobs.front().opts.queue, jobs.front().opts.priority);
  add_row_arrays(p, jobs);
  return p;
}

// The bare ready table's write: one statement, this producer's shard and sequence.
struct BareLane {
  int slot = 0;
  int shard = 0;
  std::string sequence;  // quoted, schema-qualified
};

void insert_bare(pg::Connection& conn, const std::string& sql, const BareLane& lane,
                 std::span<const NewJob> jobs) {
  pg::Params p = pg::make_params(lane.slot, jobs.front().opts.queue, jobs.front().opts.priority,
                                 lane.shard, lane.sequence);
  conn.exec_cached(sql, add_row_arrays(p, jobs));
}

void insert_plain(pg::Connection& conn, const std::string& sql, std::span<const NewJob> jobs) {
  conn.exec_cached(sql, plain_params(jobs));
}

// One self-committing single-row INSERT per job.
void insert_plain_rows(pg::Connection& conn, const std::string& sql, std::span<const NewJob> jobs) {
  for (const auto& j : jobs) {
    conn.exec_cached(sql, pg::make_params(j.opts.queue, j.opts.priority, j.kind, j.args_json,
                                          j.opts.max_attempts));
  }
}

// The INSERT and the enqueue path's own notify statement in one pipeline: one implicit
// transaction, one round trip, as insert_many sends them.
void insert_plain_notify(pg::Connection& conn, const std::string& sql,
                         const std::string& notify_sql, std::span<const NewJob> jobs) {
  pg::Pipeline pipe = conn.pipeline();
  pipe.add_cached(sql, plain_params(jobs));
  pipe.add_cached(notify_sql, pg::make_params("{" + jobs.front().opts.queue + "}"));
  pipe.run();
}

struct CellOutcome {
  double jobs_per_s = 0;
  double seconds = 0;
  std::uint64_t jobs = 0;
  std::uint64_t lane_creations_timed = 0;  // should be 0: warm-up creates every lane
  std::optional<WaitProfile> waits;
};

CellOutcome run_cell(pg::Connection& admin, const Options& o, const Workload& w, Mode mode,
                     int shards, bool sample) {
  ScopedSchema schema(admin, unique_schema_name("ec"));
  const auto render = [&](std::string_view sql) {
    return fmt::format(fmt::runtime(sql), schema.quoted());
  };
  std::optional<QueueStorage> store;
  int bare_slot = 0;
  if (is_ceiling(mode)) {
    admin.exec(render(kPlainTable));
  } else if (mode == Mode::kBareReady) {
    schema::Migrator(schema.name()).migrate(admin);
    bare_slot = admin.exec(render(kCurrentSlot)).get<int>(0, 0);
    for (int s = 0; s < shards; ++s) {
      admin.exec(fmt::format(fmt::runtime(kBareSequence), schema.quoted(), s));
    }
  } else {
    schema::Migrator(schema.name()).migrate(admin);
    admin.query(render(kSeedShards), std::string(kQueue), shards);
    store.emplace(StorageOptions{schema.name()});
  }
  // Start every cell from a clean checkpoint so a timed checkpoint (and the full-page
  // writes after it) does not land on one cell only.
  if (o.checkpoint) admin.exec("CHECKPOINT");

  const std::string plain_sql = render(kPlainInsert);
  const std::string plain_one_sql = render(kPlainInsertOne);
  const std::string bare_sql = render(kBareInsert);
  const auto bare_lane = [&](std::size_t producer) {
    const int shard = static_cast<int>(producer % static_cast<std::size_t>(shards));
    return BareLane{bare_slot, shard, fmt::format("{}.bare_lane_{}", schema.quoted(), shard)};
  };
  // The enqueue path's notify (sql/queries/enqueue/notify.sql) without its channel
  // helper function, which the plain schema does not have; the queue name is short.
  const std::string notify_sql = "SELECT pg_notify('awa:' || q, '') FROM unnest($1::text[]) AS q";
  const auto insert = [&](std::size_t producer, pg::Connection& conn,
                          std::span<const NewJob> jobs) {
    switch (mode) {
      case Mode::kCeiling:
        insert_plain(conn, plain_sql, jobs);
        break;
      case Mode::kCeilingNotify:
        insert_plain_notify(conn, plain_sql, notify_sql, jobs);
        break;
      case Mode::kSingleRow:
        insert_plain_rows(conn, plain_one_sql, jobs);
        break;
      case Mode::kBareReady:
        insert_bare(conn, bare_sql, bare_lane(producer), jobs);
        break;
      case Mode::kInsert:
        storage::insert_many(*store, conn, jobs);
        break;
      case Mode::kCopy:
        storage::insert_many_copy(*store, conn, jobs);
        break;
    }
  };

  const auto producers = static_cast<std::size_t>(o.producers);
  const auto timeout = std::chrono::seconds(o.statement_timeout_s);
  std::vector<std::optional<pg::Connection>> conns(producers);
  std::vector<int> pids(producers, 0);
  std::optional<pg::Connection> sampler_conn;
  std::optional<WaitSampler> sampler;
  if (sample) {
    sampler_conn.emplace(connect("awa_bench_sampler", timeout));
    sampler.emplace(*sampler_conn, std::vector<int>{}, std::chrono::milliseconds(o.sample_ms));
  }
  const auto batch = static_cast<std::size_t>(o.batch);

  const auto prepare = [&](int i) {
    const auto p = static_cast<std::size_t>(i);
    auto& conn = conns[p].emplace(connect(std::string(kProducerApp), timeout));
    pids[p] = conn.backend_pid();
    const std::span<const NewJob> warm(w.warmup[p]);
    for (std::size_t off = 0; off < warm.size(); off += kWarmupJobs) {
      insert(p, conn, warm.subspan(off, std::min(kWarmupJobs, warm.size() - off)));
    }
    if (sampler) sampler->watch(pids[p]);
  };
  const auto work = [&](int i) {
    const auto p = static_cast<std::size_t>(i);
    const std::span<const NewJob> jobs(w.timed[p]);
    for (std::size_t off = 0; off < jobs.size(); off += batch) {
      insert(p, *conns[p], jobs.subspan(off, std::min(batch, jobs.size() - off)));
    }
    if (sampler) sampler->retire(pids[p]);
  };
  // Lane creations are counted from the release on: warm-up ones are expected.
  std::uint64_t creations_before = 0;
  FleetHooks hooks;
  hooks.on_ready = [&] {
    if (store) creations_before = store->stats().lane_creations;
  };
  hooks.on_release = [&] {
    if (sampler) sampler->start();
  };
  const auto elapsed = run_fleet(o.producers, prepare, work, hooks);

  CellOutcome out;
  if (sampler) out.waits = sampler->stop();
  if (store) out.lane_creations_timed = store->stats().lane_creations - creations_before;
  conns.clear();

  out.jobs = w.timed_jobs;
  out.seconds = std::chrono::duration<double>(elapsed).count();
  out.jobs_per_s = static_cast<double>(out.jobs) / out.seconds;

  // Verify that every job is where it should be, and that S was in effect.
  const std::uint64_t expected = w.timed_jobs + w.warmup_jobs;
  if (is_ceiling(mode)) {
    const auto n = admin.exec(render(kCountPlain)).get<std::int64_t>(0, 0);
    if (static_cast<std::uint64_t>(n) != expected) {
      throw VerificationError(
          fmt::format("{}: plain_jobs holds {} rows, expected {}", mode_name(mode), n, expected));
    }
  } else {
    const auto res = admin.query(render(kCountReady), std::string(kQueue));
    const auto n = res.get<std::int64_t>(0, 0);
    const auto used_shards = res.get<std::int64_t>(0, 1);
    if (mode == Mode::kBareReady) {
      const auto want_shards = std::min(shards, o.producers);
      if (static_cast<std::uint64_t>(n) != expected || used_shards != want_shards) {
        throw VerificationError(
            fmt::format("{} S={}: ready_entries holds {} rows on {} shards, expected {} on {}",
                        mode_name(mode), shards, n, used_shards, expected, want_shards));
      }
      return out;
    }
    const auto lanes =
        admin.query(render(kCountLanes), std::string(kQueue)).get<std::int64_t>(0, 0);
    if (static_cast<std::uint64_t>(n) != expected) {
      throw VerificationError(fmt::format("{} S={}: ready_entries holds {} rows, expected {}",
                                          mode_name(mode), shards, n, expected));
    }
    if (used_shards != shards || lanes != shards) {
      throw VerificationError(
          fmt::format("{} S={}: rows landed on {} shards over {} lanes; expected {} of each",
                      mode_name(mode), shards, used_shards, lanes, shards));
    }
  }
  return out;
}

// --- the sweep ---------------------------------------------------------------------------

// One cell of the sweep and its measurements, one slot per run.
struct Cell {
  Mode mode;
  int shards;                                  // 0 for the ceilings
  std::vector<std::optional<double>> rate;     // jobs/s
  std::vector<std::optional<double>> seconds;  // timed wall time
  std::uint64_t lane_creations_timed = 0;
  std::optional<WaitProfile> waits;  // summed over the runs that sampled this cell

  std::vector<double> rates() const {
    std::vector<double> v;
    for (const auto& r : rate) {
      if (r) v.push_back(*r);
    }
    return v;
  }
  bool measured() const { return !rates().empty(); }
  double mean_rate() const { return mean(rates()); }
  double median_rate() const { return median(rates()); }
  std::string label() const {
    if (mode == Mode::kBareReady) return fmt::format("{} S={}", mode_label(), shards);
    return is_ceiling(mode) ? mode_label() : fmt::format("{} S={}", mode_name(mode), shards);
  }
  std::string mode_label() const {
    switch (mode) {
      case Mode::kCeiling:
        return "plain table (ceiling)";
      case Mode::kCeilingNotify:
        return "plain table + notify";
      case Mode::kSingleRow:
        return "raw single-row commits";
      case Mode::kBareReady:
        return "bare ready table";
      default:
        return mode_name(mode);
    }
  }
  std::string shards_label() const { return is_ceiling(mode) ? "-" : std::to_string(shards); }
};

struct Report {
  std::vector<Cell> cells;  // the order of a run: ceilings, then each mode by ascending S
  std::map<Mode, std::string> errors;  // modes that failed, and how
  double total_seconds = 0;

  const Cell& ceiling() const { return cells.front(); }
  // The raw single-row commit reference, when measured (--batch 1).
  const Cell* single_row() const { return measured(Mode::kSingleRow); }
  // The bare ready table, when measured.
  const Cell* bare_ready() const { return measured(Mode::kBareReady); }
  const Cell* measured(Mode mode) const {
    for (const auto& c : cells) {
      if (c.mode == mode) return c.measured() ? &c : nullptr;
    }
    return nullptr;
  }
  const Cell* find(Mode mode, int shards) const {
    for (const auto& c : cells) {
      if (c.mode == mode && c.shards == shards) return &c;
    }
    return nullptr;
  }
  // The S=<smallest S> cell of the same mode, for "vs S=1"; nullptr for the ceilings.
  const Cell* base_of(const Cell& c, const Options& o) const {
    return is_reference(c.mode) ? nullptr : find(c.mode, o.shards.front());
  }
};

std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b <= 0) return std::nullopt;
  return *a / *b;
}

std::string fmt_opt(std::optional<double> v, std::string_view spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
}

nlohmann::json json_opt(std::optional<double> v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The cells whose wait tables are printed: the ceilings and the smallest and largest S of
// each mode (the JSON has every sampled cell).
bool is_end(const Options& o, const Cell& c) {
  return is_reference(c.mode) || c.shards == o.shards.front() || c.shards == o.shards.back();
}

bool sampled(const Options& o, const Cell& c) {
  switch (o.wait_cells) {
    case WaitCells::kNone:
      return false;
    case WaitCells::kAll:
      return true;
    case WaitCells::kEnds:
      return is_end(o, c);
  }
  return false;
}

void print_progress(const Report& report, const Options& o, const Cell& cell, std::size_t r,
                    const CellOutcome& out) {
  std::string suffix;
  if (cell.mode != Mode::kCeiling) {
    suffix += fmt_opt(ratio(cell.rate[r], report.ceiling().rate[r]), "  vs ceiling {:.2f}");
  }
  if (const Cell* base = report.base_of(cell, o); base != nullptr && base != &cell) {
    suffix += fmt::format("  vs S={} ", base->shards) +
              fmt_opt(ratio(cell.rate[r], base->rate[r]), "{:.2f}x");
  }
  if (const Cell* one = report.find(Mode::kSingleRow, 0);
      one != nullptr && !is_ceiling(cell.mode)) {
    suffix += fmt_opt(ratio(cell.rate[r], one->rate[r]), "  vs 1-row commits {:.2f}");
  }
  for (const auto& bare : report.cells) {
    if (bare.mode == Mode::kBareReady && !is_reference(cell.mode)) {
      suffix += fmt_opt(ratio(cell.rate[r], bare.rate[r]), "  vs bare {:.2f}");
    }
  }
  fmt::print("run {}/{}  {:<20} {:>10} jobs/s  ({} jobs in {:.2f} s){}\n", r + 1, o.runs,
             cell.label(), thousands(out.jobs_per_s), out.jobs, out.seconds, suffix);
  std::fflush(stdout);
}

// Runs every cell of every run, in the interleaved order. A mode whose enqueue call fails
// is reported and skipped from then on; a ceiling failure or a verification failure ends
// the sweep (nothing would be comparable, or the numbers would be wrong).
Report run_sweep(pg::Connection& admin, const Options& o, const Workload& w) {
  Report report;
  const auto runs = static_cast<std::size_t>(o.runs);
  const auto add_cell = [&](Mode m, int shards) {
    report.cells.push_back(Cell{m, shards, std::vector<std::optional<double>>(runs),
                                std::vector<std::optional<double>>(runs), 0, std::nullopt});
  };
  add_cell(Mode::kCeiling, 0);
  if (o.notify_ceiling) add_cell(Mode::kCeilingNotify, 0);
  if (o.single_row_cell && o.batch == 1) add_cell(Mode::kSingleRow, 0);
  if (o.bare_ready_cell) add_cell(Mode::kBareReady, target_shards(o));
  for (const auto m : o.modes) {
    for (const int s : o.shards) add_cell(m, s);
  }

  const auto started = Clock::now();
  for (std::size_t r = 0; r < runs; ++r) {
    for (auto& cell : report.cells) {
      if (report.errors.count(cell.mode) != 0) continue;
      try {
        const CellOutcome out = run_cell(admin, o, w, cell.mode, cell.shards, sampled(o, cell));
        cell.rate[r] = out.jobs_per_s;
        cell.seconds[r] = out.seconds;
        cell.lane_creations_timed += out.lane_creations_timed;
        if (out.waits) {
          if (!cell.waits) cell.waits.emplace();
          cell.waits->merge(*out.waits);
        }
        print_progress(report, o, cell, r, out);
      } catch (const VerificationError&) {
        throw;
      } catch (const std::exception& e) {
        if (is_reference(cell.mode)) throw;
        auto& error = report.errors[cell.mode];
        error = fmt::format("{} (run {}): {}", cell.label(), r + 1, e.what());
        fmt::print(stderr, "ERROR: {} mode failed; skipping it from now on: {}\n",
                   mode_name(cell.mode), error);
      }
    }
  }
  report.total_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return report;
}

// --- the report --------------------------------------------------------------------------

struct ThroughputJson {
  nlohmann::json results = nlohmann::json::array();  // the queue's cells
  nlohmann::json ceiling_notify = nullptr;
  nlohmann::json bare_ready = nullptr;
};

// Prints the summary and per-run tables; returns their JSON.
ThroughputJson print_throughput(const Report& report, const Options& o) {
  const auto runs = static_cast<std::size_t>(o.runs);
  const Cell& ceiling = report.ceiling();
  const Cell* one = report.single_row();
  const Cell* bare = report.bare_ready();
  const std::string vs_base = fmt::format("vs S={}", o.shards.front());
  std::vector<TablePrinter::Column> summary_columns{
      {"shards", TablePrinter::Align::kRight},      {"mode"},
      {"mean jobs/s", TablePrinter::Align::kRight}, {"median jobs/s", TablePrinter::Align::kRight},
      {vs_base, TablePrinter::Align::kRight},       {"vs ceiling", TablePrinter::Align::kRight}};
  if (one != nullptr) summary_columns.push_back({"vs 1-row commits", TablePrinter::Align::kRight});
  if (bare != nullptr) summary_columns.push_back({"vs bare ready", TablePrinter::Align::kRight});
  TablePrinter summary(std::move(summary_columns));
  std::vector<TablePrinter::Column> per_run_columns{{"shards", TablePrinter::Align::kRight},
                                                    {"mode"}};
  for (std::size_t r = 0; r < runs; ++r) {
    per_run_columns.push_back({fmt::format("run {}: jobs/s, vs ceiling, {}{}", r + 1, vs_base,
                                           one != nullptr ? ", vs 1-row commits" : ""),
                               TablePrinter::Align::kRight});
  }
  TablePrinter per_run(std::move(per_run_columns));

  ThroughputJson out;
  for (const auto& cell : report.cells) {
    if (!cell.measured()) continue;
    const Cell* base = report.base_of(cell, o);
    const std::optional<double> vs_s1 = base != nullptr && base->measured()
                                            ? ratio(cell.mean_rate(), base->mean_rate())
                                            : std::nullopt;
    const std::optional<double> vs_ceiling = ratio(cell.mean_rate(), ceiling.mean_rate());
    const std::optional<double> vs_one =
        one != nullptr ? ratio(cell.mean_rate(), one->mean_rate()) : std::nullopt;
    std::vector<std::string> summary_row{
        cell.shards_label(),           cell.mode_label(),         thousands(cell.mean_rate()),
        thousands(cell.median_rate()), fmt_opt(vs_s1, "{:.2f}x"), fmt_opt(vs_ceiling, "{:.2f}")};
    if (one != nullptr) summary_row.push_back(fmt_opt(vs_one, "{:.2f}"));
    const std::optional<double> vs_bare = bare != nullptr && !is_ceiling(cell.mode)
                                              ? ratio(cell.mean_rate(), bare->mean_rate())
                                              : std::nullopt;
    if (bare != nullptr) summary_row.push_back(fmt_opt(vs_bare, "{:.2f}"));
    summary.add_row(std::move(summary_row));

    std::vector<std::string> row{cell.shards_label(), cell.mode_label()};
    nlohmann::json rate_runs = nlohmann::json::array(), seconds_runs = nlohmann::json::array(),
                   vs_s1_runs = nlohmann::json::array(), vs_ceiling_runs = nlohmann::json::array(),
                   vs_one_runs = nlohmann::json::array(), vs_bare_runs = nlohmann::json::array();
    for (std::size_t r = 0; r < runs; ++r) {
      const auto rc = ratio(cell.rate[r], ceiling.rate[r]);
      const auto rs = base != nullptr ? ratio(cell.rate[r], base->rate[r]) : std::nullopt;
      const auto r1 = one != nullptr ? ratio(cell.rate[r], one->rate[r]) : std::nullopt;
      std::string text = "-";
      if (cell.rate[r]) {
        text = fmt::format("{} / {} / {}", thousands(*cell.rate[r]), fmt_opt(rc, "{:.2f}"),
                           fmt_opt(rs, "{:.2f}x"));
        if (one != nullptr) text += " / " + fmt_opt(r1, "{:.2f}");
      }
      row.push_back(std::move(text));
      rate_runs.push_back(json_opt(cell.rate[r]));
      seconds_runs.push_back(json_opt(cell.seconds[r]));
      vs_s1_runs.push_back(json_opt(rs));
      vs_ceiling_runs.push_back(json_opt(rc));
      vs_one_runs.push_back(json_opt(r1));
      vs_bare_runs.push_back(json_opt(bare != nullptr && !is_reference(cell.mode)
                                          ? ratio(cell.rate[r], bare->rate[r])
                                          : std::nullopt));
    }
    per_run.add_row(std::move(row));

    nlohmann::json entry{{"mode", mode_name(cell.mode)},
                         {"jobs_per_s", cell.mean_rate()},
                         {"median_jobs_per_s", cell.median_rate()},
                         {"vs_ceiling", json_opt(vs_ceiling)},
                         {"runs_jobs_per_s", rate_runs},
                         {"runs_seconds", seconds_runs},
                         {"runs_vs_ceiling", vs_ceiling_runs}};
    if (cell.mode == Mode::kCeilingNotify) out.ceiling_notify = std::move(entry);
    if (cell.mode == Mode::kBareReady) {
      entry["shards"] = cell.shards;
      out.bare_ready = std::move(entry);
    }
    if (is_reference(cell.mode)) continue;
    if (bare != nullptr) {
      entry["vs_bare_ready"] = json_opt(vs_bare);
      entry["runs_vs_bare_ready"] = vs_bare_runs;
    }
    if (one != nullptr) {
      entry["vs_single_row_commit"] = json_opt(vs_one);
      entry["runs_vs_single_row_commit"] = vs_one_runs;
    }
    entry["shards"] = cell.shards;
    entry["vs_s1"] = json_opt(vs_s1);
    entry["runs_vs_s1"] = vs_s1_runs;
    entry["lane_creations_timed"] = cell.lane_creations_timed;
    out.results.push_back(std::move(entry));
  }

  fmt::print("\nThroughput ({} runs; mean and median across runs; ratios of the means)\n\n{}", runs,
             summary.render());
  fmt::print("\nPer run (ratios within the run)\n\n{}", per_run.render());
  return out;
}

struct Target {
  std::string name;
  double threshold;
  std::vector<std::optional<double>> per_run;
  std::optional<double> of_means;
};

Target make_target(std::string name, double threshold, const Cell& a, const Cell& b) {
  Target t{std::move(name), threshold, {}, ratio(a.mean_rate(), b.mean_rate())};
  for (std::size_t r = 0; r < a.rate.size(); ++r) t.per_run.push_back(ratio(a.rate[r], b.rate[r]));
  return t;
}

// Issue 11's targets, judged on ratios within each run. Batched (--batch > 1): insert at
// S=8 (the largest S when 8 is not swept) against the plain-table ceiling (>= 0.80).
// Single-job (--batch 1): insert at S=16 (or the largest S) against raw single-row
// commits (>= 0.70). Both: copy against insert at each S (>= 1). When the bare ready
// table was measured, the same threshold is applied to it as a bound: where the bare table
// misses it, no enqueue logic on that table can meet it.
nlohmann::json print_targets(const Report& report, const Options& o) {
  std::vector<Target> targets;
  const int target_s = target_shards(o);
  const Cell* bare = report.bare_ready();
  const auto add = [&](std::string_view yardstick, double threshold, const Cell& against) {
    if (const Cell* c = report.find(Mode::kInsert, target_s); c != nullptr && c->measured()) {
      targets.push_back(
          make_target(fmt::format("insert S={} >= {:.2f} x {}", target_s, threshold, yardstick),
                      threshold, *c, against));
    }
    if (bare != nullptr) {
      targets.push_back(make_target(
          fmt::format("(bound) bare ready S={} >= {:.2f} x {}", bare->shards, threshold, yardstick),
          threshold, *bare, against));
    }
  };
  if (o.batch > 1) {
    add("plain-table ceiling", 0.80, report.ceiling());
  } else if (const Cell* one = report.single_row(); one != nullptr) {
    add("raw single-row commits", 0.70, *one);
  }
  for (const int s : o.shards) {
    const Cell* ins = report.find(Mode::kInsert, s);
    const Cell* cp = report.find(Mode::kCopy, s);
    if (ins == nullptr || cp == nullptr || !ins->measured() || !cp->measured()) continue;
    targets.push_back(make_target(fmt::format("copy S={} >= insert S={}", s, s), 1.0, *cp, *ins));
  }

  nlohmann::json out = nlohmann::json::array();
  if (targets.empty()) return out;
  TablePrinter table({{"target"},
                      {"per run", TablePrinter::Align::kRight},
                      {"of the means", TablePrinter::Align::kRight},
                      {"met in runs", TablePrinter::Align::kRight}});
  for (const auto& t : targets) {
    std::string per;
    int met = 0;
    int measured = 0;
    nlohmann::json per_json = nlohmann::json::array();
    for (const auto& v : t.per_run) {
      if (!per.empty()) per += ' ';
      per += fmt_opt(v, "{:.2f}");
      per_json.push_back(json_opt(v));
      if (!v) continue;
      ++measured;
      if (*v >= t.threshold) ++met;
    }
    table.add_row(
        {t.name, per, fmt_opt(t.of_means, "{:.2f}"), fmt::format("{}/{}", met, measured)});
    out.push_back({{"target", t.name},
                   {"threshold", t.threshold},
                   {"runs", per_json},
                   {"of_means", json_opt(t.of_means)},
                   {"met_runs", met},
                   {"measured_runs", measured}});
  }
  fmt::print("\nTargets (ratio within each run)\n\n{}", table.render());
  return out;
}

nlohmann::json print_waits(const Report& report, const Options& o) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& cell : report.cells) {
    if (!cell.waits) continue;
    auto j = cell.waits->to_json(kTopWaits);
    j["mode"] = mode_name(cell.mode);
    if (!is_ceiling(cell.mode)) j["shards"] = cell.shards;
    out.push_back(std::move(j));
    if (!is_end(o, cell)) continue;
    fmt::print(
        "\nWait events, {} (producer backends; {} samples in {} polls every {} ms over {} "
        "runs)\n\n{}",
        cell.label(), thousands(static_cast<double>(cell.waits->samples)),
        thousands(static_cast<double>(cell.waits->polls)), o.sample_ms, o.runs,
        cell.waits->render(kTopWaits));
  }
  return out;
}

int run(const Options& o) {
  pg::Connection admin = connect("awa_bench", std::chrono::seconds(o.statement_timeout_s));
  const MachineInfo machine = machine_info(admin);
  const Workload workload = make_workload(o);

  nlohmann::json modes = nlohmann::json::array();
  for (const auto m : o.modes) modes.push_back(mode_name(m));
  fmt::print(
      "enqueue-contention: {} producers x {} jobs (batch {}), queue '{}' priority {}, "
      "modes {}, shards {} (from {}), {} runs\n",
      o.producers, o.jobs_per_producer, o.batch, kQueue, kPriority, fmt::join(modes, ","),
      fmt::join(o.shards, ","), o.shards_source, o.runs);
  fmt::print("machine: {}\n\n", machine.describe());
  std::fflush(stdout);

  const Report report = run_sweep(admin, o, workload);
  ThroughputJson throughput = print_throughput(report, o);
  nlohmann::json targets = print_targets(report, o);
  nlohmann::json waits = print_waits(report, o);

  const std::string load_end = loadavg();
  fmt::print("\nload average at the end: {}; sweep took {:.0f} s\n", load_end,
             report.total_seconds);
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& [mode, error] : report.errors) {
    fmt::print(stderr, "ERROR ({}): {}\n", mode_name(mode), error);
    errors.push_back(error);
  }

  if (!o.json_path.empty()) {
    nlohmann::json ceiling_runs = nlohmann::json::array();
    for (const auto& v : report.ceiling().rate) ceiling_runs.push_back(json_opt(v));
    nlohmann::json single_row = nullptr;
    if (const Cell* one = report.single_row(); one != nullptr) {
      nlohmann::json runs_json = nlohmann::json::array();
      for (const auto& v : one->rate) runs_json.push_back(json_opt(v));
      single_row = {{"jobs_per_s", one->mean_rate()},
                    {"median_jobs_per_s", one->median_rate()},
                    {"runs_jobs_per_s", runs_json}};
    }
    const nlohmann::json doc{{"benchmark", "enqueue-contention"},
                             {"ceiling_jobs_per_s", report.ceiling().mean_rate()},
                             {"ceiling_median_jobs_per_s", report.ceiling().median_rate()},
                             {"ceiling_runs_jobs_per_s", ceiling_runs},
                             {"results", throughput.results},
                             {"ceiling_notify", throughput.ceiling_notify},
                             {"bare_ready", throughput.bare_ready},
                             {"single_row_commit", single_row},
                             {"targets", targets},
                             {"wait_events", waits},
                             {"runs", o.runs},
                             {"producers", o.producers},
                             {"jobs_per_producer", o.jobs_per_producer},
                             {"batch", o.batch},
                             {"warmup_jobs_per_producer", workload.warmup_batches * kWarmupJobs},
                             {"shards", o.shards},
                             {"shards_source", o.shards_source},
                             {"modes", modes},
                             {"queue", kQueue},
                             {"priority", kPriority},
                             {"wait_sample_ms", o.sample_ms},
                             {"checkpoint_before_each_cell", o.checkpoint},
                             {"machine", machine.to_json()},
                             {"loadavg_at_end", load_end},
                             {"total_seconds", report.total_seconds},
                             {"errors", errors}};
    write_json(o.json_path, doc);
    fmt::print("JSON written to {}\n", o.json_path);
  }
  return report.errors.empty() ? 0 : 1;
}

}  // namespace
}  // namespace awa::bench

int main(int argc, char** argv) {
  using awa::bench::Mode;
  using awa::bench::WaitCells;
  awa::bench::Options o;
  std::string shards_text = "1,2,4,8";
  std::string mode_text = "both";
  std::string wait_cells_text = "all";
  CLI::App app{
      "ADR-025 enqueue contention: P producers enqueue to one queue at each enqueue_shards "
      "value, against a plain-table ceiling measured in the same run. Needs DATABASE_URL."};
  app.name("scripts/bench enqueue-contention");
  app.add_option("--shards", shards_text,
                 "comma-separated enqueue_shards values (1..64); AWA_QS_CONTENTION_SHARDS "
                 "overrides")
      ->capture_default_str();
  app.add_option("--producers", o.producers, "producer threads, one connection each")
      ->check(CLI::Range(1, 128))
      ->capture_default_str();
  app.add_option("--jobs-per-producer", o.jobs_per_producer, "timed jobs per producer")
      ->check(CLI::Range(1, 10'000'000))
      ->capture_default_str();
  app.add_option("--batch", o.batch, "jobs per insert call")
      ->check(CLI::Range(1, 100'000))
      ->capture_default_str();
  app.add_option("--mode", mode_text,
                 "write path: insert (insert_many), copy (insert_many_copy) or both")
      ->check(CLI::IsMember({"insert", "copy", "both"}))
      ->capture_default_str();
  app.add_option("--runs", o.runs, "runs; cells are interleaved across runs")
      ->check(CLI::Range(1, 50))
      ->capture_default_str();
  app.add_option("--json", o.json_path, "also write the results as JSON to this file");
  app.add_option("--wait-cells", wait_cells_text,
                 "cells whose waits are sampled: all (so every cell pays the sampling alike), "
                 "ends (the ceilings and the smallest and largest S of each mode; tables are "
                 "printed for these), none")
      ->check(CLI::IsMember({"ends", "all", "none"}))
      ->capture_default_str();
  app.add_option("--sample-ms", o.sample_ms, "wait-event sampling interval")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--statement-timeout", o.statement_timeout_s,
                 "seconds; bounds any one statement (and so any lock wait)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_flag("!--no-checkpoint", o.checkpoint, "skip the CHECKPOINT before each cell");
  app.add_flag("!--no-notify-ceiling", o.notify_ceiling,
               "skip the diagnostic cell: plain-table INSERT + the enqueue path's pg_notify");
  app.add_flag("!--no-bare-ready-cell", o.bare_ready_cell,
               "skip the bound: the same rows into the queue's ready_entries with no lane "
               "(no reservation, no lane lock)");
  app.add_flag("!--no-single-row-cell", o.single_row_cell,
               "with --batch 1, skip the raw single-row commit reference (one plain INSERT per "
               "transaction)");
  CLI11_PARSE(app, argc, argv);

  try {
    if (const char* env = std::getenv("AWA_QS_CONTENTION_SHARDS"); env != nullptr && *env != '\0') {
      shards_text = env;
      o.shards_source = "AWA_QS_CONTENTION_SHARDS";
    }
    o.shards = awa::bench::parse_int_list(shards_text, o.shards_source);
    for (const int s : o.shards) {
      if (s < 1 || s > 64) {
        throw std::invalid_argument(fmt::format("{}: {} is outside 1..64", o.shards_source, s));
      }
    }
    std::sort(o.shards.begin(), o.shards.end());
    o.shards.erase(std::unique(o.shards.begin(), o.shards.end()), o.shards.end());
    if (mode_text == "insert") o.modes = {Mode::kInsert};
    if (mode_text == "copy") o.modes = {Mode::kCopy};
    if (wait_cells_text == "all") o.wait_cells = WaitCells::kAll;
    if (wait_cells_text == "none") o.wait_cells = WaitCells::kNone;
    return awa::bench::run(o);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "enqueue-contention: {}\n", e.what());
    return 2;
  }
}
