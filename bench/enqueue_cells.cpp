#include "enqueue_cells.hpp"

#include <algorithm>
#include <chrono>
#include <span>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/queue_storage.hpp"
#include "pg/pipeline.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/pg_array.hpp"
#include "storage/store_access.hpp"

namespace awa::bench::contention {
namespace {

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
// The bare ready table: $1 slot, $2 queue (its id, read once per statement), $3 priority,
// $4 shard, $5 the shard's sequence.
constexpr std::string_view kBareInsert =
    "INSERT INTO {0}.ready_entries (ready_slot, queue_id, priority, enqueue_shard, lane_seq, "
    "job_id, kind, args, max_attempts, run_at, created_at) "
    "SELECT $1, (SELECT {0}.ensure_queue_id($2)), $3, $4, nextval($5::regclass), "
    "nextval('{0}.job_ids'), t.kind, t.args, "
    "t.max_attempts, coalesce(t.run_at, now()), now() "
    "FROM unnest($6::text[], $7::jsonb[], $8::smallint[], $9::timestamptz[]) "
    "AS t(kind, args, max_attempts, run_at)";
constexpr std::string_view kBareSequence = "CREATE SEQUENCE {0}.bare_lane_{1}";
constexpr std::string_view kCurrentSlot = "SELECT {0}.ring_current_slot('queue')";
// The upsert that sets a queue's shard count (docs/operations.md).
constexpr std::string_view kSeedShards =
    "INSERT INTO {0}.queue_meta (queue, enqueue_shards) VALUES ($1, $2) "
    "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards";
constexpr std::string_view kCountReady =
    "SELECT count(*), count(DISTINCT enqueue_shard) FROM {0}.ready_entries "
    "WHERE queue_id = {0}.queue_id_of($1)";
constexpr std::string_view kCountLanes =
    "SELECT count(*) FROM {0}.queue_enqueue_heads WHERE queue_id = {0}.queue_id_of($1)";

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

// One self-committing statement: the plain-table counterpart of an insert_many batch.
// REQUIRES: every job in `jobs` has the same queue and priority (true of this workload).
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

// The INSERT, then the enqueue path's own notify statement after its commit, in one round
// trip: as insert_many sends a NOTIFY it carries (src/storage/enqueue.cpp, add_wake).
void insert_plain_notify(pg::Connection& conn, const std::string& sql,
                         const std::string& notify_sql, std::span<const NewJob> jobs) {
  pg::Pipeline pipe = conn.pipeline();
  pipe.add_cached(sql, plain_params(jobs));
  pipe.sync();
  storage::ArrayLiteral channels;
  channels.add(notify_channel(jobs.front().opts.queue));
  pipe.add_cached(notify_sql, pg::make_params(std::move(channels).finish()));
  pipe.run();
}

}  // namespace

bool is_ceiling(Mode m) {
  return m == Mode::kCeiling || m == Mode::kCeilingNotify || m == Mode::kSingleRow;
}
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

int target_shards(const Options& o) {
  const int wanted = o.batch > 1 ? 8 : 16;
  return std::find(o.shards.begin(), o.shards.end(), wanted) != o.shards.end() ? wanted
                                                                               : o.shards.back();
}

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
    migrate_schema(admin, schema.name());
    bare_slot = admin.exec(render(kCurrentSlot)).get<int>(0, 0);
    for (int s = 0; s < shards; ++s) {
      admin.exec(fmt::format(fmt::runtime(kBareSequence), schema.quoted(), s));
    }
  } else {
    migrate_schema(admin, schema.name());
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
  // The enqueue path's own notify statement: it names no table of the schema.
  const std::string notify_sql =
      sql::render(sql::file("queries/enqueue/notify.sql"), schema.quoted());
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
  std::int64_t wal_before = 0;
  hooks.on_release = [&] {
    wal_before = wal_position(admin);
    if (sampler) sampler->start();
  };
  const auto elapsed = run_fleet(o.producers, prepare, work, hooks);
  const std::int64_t wal_after = wal_position(admin);

  CellOutcome out;
  if (sampler) out.waits = sampler->stop();
  if (store) out.lane_creations_timed = store->stats().lane_creations - creations_before;
  conns.clear();

  out.jobs = w.timed_jobs;
  out.seconds = std::chrono::duration<double>(elapsed).count();
  out.jobs_per_s = static_cast<double>(out.jobs) / out.seconds;
  out.wal_bytes_per_job =
      static_cast<double>(wal_after - wal_before) / static_cast<double>(out.jobs);

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

}  // namespace awa::bench::contention
