// The producer side of ADR-025: routing, lane reservation, INSERT and COPY.
//
// One call = one transaction (the caller's, or one of its own):
//   1. validate everything (nothing is sent for a bad batch);
//   2. split scheduled rows (run_at in the future) off to deferred_jobs;
//   3. route: keyed rows by hash, unkeyed rows by one rotor pick per (queue, priority);
//   4. per lane, in ascending (queue, priority, enqueue_shard) order — the global lock
//      order — reserve one contiguous lane_seq range and write the rows;
//   5. notify each queue once (after commit when the call commits itself; see Impl::notify).
// INSERT mode sends all of it as one pipeline: without an explicit BEGIN the statements
// up to the pipeline's first Sync form one implicit transaction, so a self-committing
// insert is atomic; its NOTIFY follows in a second segment (its own transaction, after the
// commit; see `notify`), still in the same single round trip.
#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "pg/copy.hpp"
#include "pg/native.hpp"
#include "pg/pipeline.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/consume.hpp"
#include "storage/copy_rows.hpp"
#include "storage/enqueue_one.hpp"
#include "storage/enqueue_unique.hpp"
#include "storage/pg_array.hpp"
#include "storage/store_access.hpp"
#include "storage/validate.hpp"
#include "storage/wake_coalescer.hpp"

namespace awa {
namespace {

struct LaneKey {
  std::string queue;
  int priority;
  int shard;
  // std::string compares bytewise, which is PostgreSQL's "C" collation: the SQL batch
  // producer (insert_jobs_compat) sorts lanes the same way.
  auto operator<=>(const LaneKey&) const = default;
};

struct LaneBatch {
  LaneKey key;
  std::vector<std::size_t> rows;  // indexes into the input, in input order
  bool uncached = false;          // lane not known to exist (reserve_lane_range creates it)
};

struct Plan {
  std::vector<LaneBatch> lanes;  // ascending LaneKey
  std::vector<std::size_t> deferred;
  std::vector<std::string> notify_queues;
};

std::string tags_literal(const std::vector<std::string>& tags) {
  storage::ArrayLiteral a;
  for (const auto& t : tags) a.add(t);
  return std::move(a).finish();
}

// The ordering key, metadata and tags of one job as elements of their batch arrays
// (NULL when absent), shared by the ready and the scheduled insert.
void add_optional_columns(const NewJob& j, storage::ArrayLiteral& keys, storage::ArrayLiteral& meta,
                          storage::ArrayLiteral& tags) {
  if (j.opts.ordering_key) {
    keys.add_bytea(*j.opts.ordering_key);
  } else {
    keys.add_null();
  }
  if (j.opts.metadata.is_null()) {
    meta.add_null();
  } else {
    meta.add(j.opts.metadata.dump());
  }
  if (j.opts.tags.empty()) {
    tags.add_null();
  } else {
    tags.add(tags_literal(j.opts.tags));
  }
}

// "{1,2,3}" -> ids
std::vector<JobId> parse_int_array(std::string_view text) {
  std::vector<JobId> out;
  if (text.size() < 2) return out;
  text = text.substr(1, text.size() - 2);
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto item = text.substr(0, comma);
    JobId v = 0;
    std::from_chars(item.data(), item.data() + item.size(), v);
    out.push_back(v);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

struct QueueStorage::Impl {
  explicit Impl(StorageOptions o)
      : options(std::move(o)),
        quoted(sql::quote_schema(options.schema)),
        consumer(quoted),
        unique(quoted),
        one(quoted) {
    const auto r = [this](std::string_view name) { return sql::render(sql::file(name), quoted); };
    insert_lane = r("queries/enqueue/insert_lane.sql");
    reserve_lane = r("queries/enqueue/reserve_lane.sql");
    copy_ready = r("queries/enqueue/copy_ready.sql");
    insert_deferred = r("queries/enqueue/insert_deferred.sql");
    notify = r("queries/enqueue/notify.sql");
    shard_counts = r("queries/enqueue/shard_counts.sql");
  }

  // Fills `out` with the shard count of every queue in `queues`, reading the uncached ones
  // in one query.
  void load_shard_counts(pg::Connection& conn, const std::set<std::string>& queues,
                         std::unordered_map<std::string, int>& out) {
    std::vector<std::string> missing;
    {
      std::shared_lock lock(mu);
      for (const auto& q : queues) {
        const auto it = shard_cache.find(q);
        if (it == shard_cache.end()) {
          missing.push_back(q);
        } else {
          out[q] = it->second;
        }
      }
    }
    if (missing.empty()) return;
    storage::ArrayLiteral arr;
    for (const auto& q : missing) arr.add(q);
    const auto res = conn.exec_cached(shard_counts, pg::make_params(std::move(arr).finish()));
    std::unordered_map<std::string, int> found;
    for (const auto& q : missing) found[q] = 1;  // no queue_meta row: one shard
    for (int i = 0; i < res.rows(); ++i) {
      found[res.get<std::string>(i, 0)] = res.get<int>(i, 1);
    }
    std::unique_lock lock(mu);
    for (const auto& [q, s] : found) {
      shard_cache[q] = s;
      out[q] = s;
    }
  }

  Plan plan(pg::Connection& conn, std::span<const NewJob> jobs) {
    for (std::size_t i = 0; i < jobs.size(); ++i) storage::validate_job(jobs[i], i);

    Plan p;
    const auto now = std::chrono::system_clock::now();
    std::set<std::string> ready_queues;
    std::vector<std::size_t> ready;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const auto& o = jobs[i].opts;
      if (o.run_at && *o.run_at > now) {
        p.deferred.push_back(i);
      } else {
        ready.push_back(i);
        ready_queues.insert(o.queue);
      }
    }
    if (ready.empty()) return p;

    std::unordered_map<std::string, int> shards;
    load_shard_counts(conn, ready_queues, shards);

    std::map<std::pair<std::string, int>, int> rotor_pick;  // (queue, priority) -> shard
    std::map<LaneKey, std::vector<std::size_t>> lanes;
    for (const auto i : ready) {
      const auto& o = jobs[i].opts;
      const int s = shards.at(o.queue);
      int shard = 0;
      if (s > 1) {
        if (o.ordering_key) {
          shard = shard_for_ordering_key(*o.ordering_key, s);
        } else {
          const auto [it, fresh] = rotor_pick.try_emplace({o.queue, o.priority}, 0);
          if (fresh)
            it->second = static_cast<int>(rotor.fetch_add(1, std::memory_order_relaxed) % s);
          shard = it->second;
        }
      }
      lanes[LaneKey{o.queue, o.priority, shard}].push_back(i);
    }
    {
      std::shared_lock lock(mu);
      for (auto& [key, rows] : lanes) {
        const bool known = lane_cache.count(key) != 0;
        p.lanes.push_back(LaneBatch{key, std::move(rows), !known});
      }
    }
    p.notify_queues.assign(ready_queues.begin(), ready_queues.end());
    return p;
  }

  void remember_lanes(const Plan& p) {
    std::unique_lock lock(mu);
    for (const auto& l : p.lanes) lane_cache.insert(l.key);
  }

  pg::Params insert_params(const LaneBatch& lane, std::span<const NewJob> jobs) const {
    storage::ArrayLiteral kinds, args, attempts, run_at, keys, meta, tags;
    for (const auto i : lane.rows) {
      const auto& j = jobs[i];
      kinds.add(j.kind);
      args.add(j.args_json);
      attempts.add(static_cast<std::int64_t>(j.opts.max_attempts));
      if (j.opts.run_at) {
        run_at.add(storage::timestamp_literal(*j.opts.run_at));
      } else {
        run_at.add_null();
      }
      add_optional_columns(j, keys, meta, tags);
    }
    return pg::make_params(
        lane.key.queue, lane.key.priority, lane.key.shard, std::move(kinds).finish(),
        std::move(args).finish(), std::move(attempts).finish(), std::move(run_at).finish(),
        std::move(keys).finish(), std::move(meta).finish(), std::move(tags).finish());
  }

  static pg::Params deferred_params(const Plan& p, std::span<const NewJob> jobs) {
    storage::ArrayLiteral queues, prios, kinds, args, attempts, run_at, keys, meta, tags;
    for (const auto i : p.deferred) {
      const auto& j = jobs[i];
      queues.add(j.opts.queue);
      prios.add(static_cast<std::int64_t>(j.opts.priority));
      kinds.add(j.kind);
      args.add(j.args_json);
      attempts.add(static_cast<std::int64_t>(j.opts.max_attempts));
      run_at.add(storage::timestamp_literal(*j.opts.run_at));
      add_optional_columns(j, keys, meta, tags);
    }
    return pg::make_params(
        std::move(queues).finish(), std::move(prios).finish(), std::move(kinds).finish(),
        std::move(args).finish(), std::move(attempts).finish(), std::move(run_at).finish(),
        std::move(keys).finish(), std::move(meta).finish(), std::move(tags).finish());
  }

  static pg::Params notify_params(const std::vector<std::string>& queues) {
    storage::ArrayLiteral q;
    for (const auto& name : queues) q.add(name);
    return pg::make_params(std::move(q).finish());
  }

  // A self-committing call's wake-ups (storage/wake_coalescer.hpp): the queues whose
  // NOTIFY is sent with the call, after its commit.
  std::vector<std::string> wake_with_commit(const Plan& p) {
    return wakes.carry(p.notify_queues, storage::WakeCoalescer::Clock::now());
  }

  // Once the call's commit is acknowledged: logs a NOTIFY sent with it that failed, and
  // sends those of its queues that it did not carry and that still need one.
  void wake_after_commit(pg::Connection& conn, const Plan& p,
                         const std::vector<std::string>& carried,
                         const std::vector<std::string>& errors) {
    if (!errors.empty()) wakes.forget(carried);
    for (const auto& e : errors) {
      spdlog::warn("enqueue committed but NOTIFY failed (workers will poll): {}", e);
    }
    std::vector<std::string> rest;
    for (const auto& q : p.notify_queues) {
      if (std::find(carried.begin(), carried.end(), q) == carried.end()) rest.push_back(q);
    }
    if (rest.empty()) return;
    const auto due = wakes.after_commit(rest, storage::WakeCoalescer::Clock::now());
    if (due.empty()) return;
    try {
      conn.exec_cached(notify, notify_params(due));
    } catch (const std::exception& e) {
      wakes.forget(due);
      spdlog::warn("enqueue committed but NOTIFY failed (workers will poll): {}", e.what());
    }
  }

  // The one-job path (storage/enqueue_one.hpp): a self-committing call of one job, due
  // now, to a lane the cache knows. nullopt when nothing was written (the lane row is
  // missing, or the ring moved under two tries): the caller takes the general path.
  // A COPY of one row has nothing to win over it either.
  // Roles set up before this path existed lack its grants (42501) until `awa roles setup`
  // runs again: the store then keeps to the general path, which needs none of them.
  std::optional<JobId> insert_one(pg::Connection& conn, const Plan& p,
                                  std::span<const NewJob> jobs) {
    if (jobs.size() != 1 || !p.deferred.empty() || p.lanes.front().uncached ||
        one_denied.load(std::memory_order_relaxed))
      return std::nullopt;
    const auto& job = jobs.front();
    const auto& lane = p.lanes.front();
    for (int attempt = 0; attempt < 2; ++attempt) {
      const int slot = one.slot();
      pg::Pipeline pipe = conn.pipeline();
      pipe.add_cached(one.sql(slot), storage::OneJobInserter::params(
                                         lane.key.queue, lane.key.priority, lane.key.shard, job));
      const auto carried = wake_with_commit(p);
      if (!carried.empty()) {
        pipe.sync();
        pipe.add_cached_best_effort(notify, notify_params(carried));
      }
      std::vector<pg::Result> results;
      try {
        results = pipe.run();
      } catch (const Error& e) {
        wakes.forget(carried);  // as in insert_many
        if (e.sqlstate() != "42501") throw;
        if (!one_denied.exchange(true)) {
          spdlog::warn(
              "enqueue: the one-job path is denied ({}); single jobs take the general "
              "path until the roles are set up again (awa roles setup)",
              e.what());
        }
        return std::nullopt;
      }
      const auto out = one.read(results.front(), slot);
      if (out.id) {
        wake_after_commit(conn, p, carried, pipe.best_effort_errors());
        reservations.fetch_add(1, std::memory_order_relaxed);
        one_job_writes.fetch_add(1, std::memory_order_relaxed);
        count_enqueued(p, jobs);
        return out.id;
      }
      // A NOTIFY sent for nothing wakes a claim that finds nothing: harmless.
      if (!out.slot_moved) return std::nullopt;
    }
    return std::nullopt;
  }

  // awa_job_enqueued_total, once the rows are written: one series lookup per queue in the
  // call, not per row. Scheduled rows count as enqueued too.
  static void count_enqueued(const Plan& p, std::span<const NewJob> jobs) {
    std::map<std::string_view, std::uint64_t> per_queue;
    for (const auto& lane : p.lanes) per_queue[lane.key.queue] += lane.rows.size();
    for (const auto i : p.deferred) ++per_queue[jobs[i].opts.queue];
    auto& family = metrics::engine().job_enqueued;
    for (const auto& [queue, n] : per_queue) family.with({queue}).inc(n);
  }

  // reserve_lane_range created the lane: a first enqueue to it, or (for a lane the cache
  // knew) one whose creation had rolled back. Lanes are never created ahead of their
  // reservation: a creation lock taken before an earlier lane's lane lock would invert the
  // order that reserve_lane_range (insert_jobs_compat, promotion) takes them in, and two
  // producers could deadlock (issue 10, defect 2).
  void count_created(const LaneBatch& lane, bool created) {
    if (!created) return;
    (lane.uncached ? creations : repairs).fetch_add(1, std::memory_order_relaxed);
  }

  std::vector<JobId> insert_many(pg::Connection& conn, std::span<const NewJob> jobs) {
    std::vector<JobId> ids(jobs.size(), 0);
    if (jobs.empty()) return ids;
    const Plan p = plan(conn, jobs);

    const bool own = !conn.in_transaction();
    if (own) {
      if (const auto id = insert_one(conn, p, jobs)) return {*id};
    }
    pg::Pipeline pipe = conn.pipeline();
    for (const auto& lane : p.lanes) pipe.add_cached(insert_lane, insert_params(lane, jobs));
    if (!p.deferred.empty()) pipe.add_cached(insert_deferred, deferred_params(p, jobs));
    std::vector<std::string> carried;
    if (own) {
      // After the commit (the Sync), in the same round trip: see `notify` below for why
      // after, and why a failure is only a warning.
      carried = wake_with_commit(p);
      if (!carried.empty()) {
        pipe.sync();
        pipe.add_cached_best_effort(notify, notify_params(carried));
      }
    } else if (!p.notify_queues.empty()) {
      pipe.add_cached(notify, notify_params(p.notify_queues));
    }
    std::vector<pg::Result> results;
    try {
      results = pipe.run();
    } catch (...) {
      // Its NOTIFY segment may not have run (a broken connection): count it as not sent.
      if (own) wakes.forget(carried);
      throw;
    }
    if (own) wake_after_commit(conn, p, carried, pipe.best_effort_errors());

    for (std::size_t l = 0; l < p.lanes.size(); ++l) {
      const auto& lane = p.lanes[l];
      const auto& res = results[l];
      if (static_cast<std::size_t>(res.rows()) != lane.rows.size()) {
        throw Error(fmt::format("enqueue: lane insert returned {} rows for {} jobs", res.rows(),
                                lane.rows.size()));
      }
      for (int r = 0; r < res.rows(); ++r) {
        const auto offset = res.get<std::int64_t>(r, 0) - res.get<std::int64_t>(r, 3);
        ids[lane.rows.at(static_cast<std::size_t>(offset))] = res.get<std::int64_t>(r, 1);
      }
      if (res.rows() > 0) count_created(lane, res.get<bool>(0, 2));
    }
    reservations.fetch_add(p.lanes.size(), std::memory_order_relaxed);
    if (!p.deferred.empty()) {
      const auto& res = results[p.lanes.size()];
      for (int r = 0; r < res.rows(); ++r) {
        ids[p.deferred[static_cast<std::size_t>(r)]] = res.get<std::int64_t>(r, 0);
      }
    }
    remember_lanes(p);
    count_enqueued(p, jobs);
    return ids;
  }

  // The COPY path. The rows of every lane are encoded (binary COPY) before anything is
  // sent; then one script (pg::run_script, simple query protocol) reserves each lane in
  // ascending order and COPYs its rows, and, for a self-committing call, commits and
  // notifies. The lane lock is taken by the reservation and held to the commit, as in
  // INSERT mode; in between the client only patches the reserved values (ready slot,
  // lane_seq, job id, transaction time) into the encoded rows. Round trips with the lane
  // locked: one per lane (the reservation's result is needed for its rows), where the
  // text-COPY path this replaces had three (reserve, COPY start, COPY end) plus the commit.
  std::vector<JobId> insert_many_copy(pg::Connection& conn, std::span<const NewJob> jobs) {
    std::vector<JobId> ids(jobs.size(), 0);
    if (jobs.empty()) return ids;
    const bool own = !conn.in_transaction();
    const Plan p = plan(conn, jobs);
    if (own) {
      if (const auto id = insert_one(conn, p, jobs)) return {*id};
    }
    std::vector<storage::CopyPayload> payloads;
    payloads.reserve(p.lanes.size());
    for (const auto& lane : p.lanes)
      payloads.push_back(storage::encode_copy_rows(lane.key.queue, lane.key.priority,
                                                   lane.key.shard, lane.rows, jobs));

    std::optional<std::string> late_error;
    std::vector<std::string> carried;
    try {
      std::size_t first = 0;  // index of the first lane's reservation in the script
      std::string script;
      if (own && !p.deferred.empty()) conn.exec("BEGIN");
      if (!p.deferred.empty()) {
        // No lane lock involved: before the script, so outside the lane-lock window.
        const auto res = conn.exec_cached(insert_deferred, deferred_params(p, jobs));
        for (int r = 0; r < res.rows(); ++r) {
          ids[p.deferred[static_cast<std::size_t>(r)]] = res.get<std::int64_t>(r, 0);
        }
      } else if (own) {
        script += "BEGIN;\n";
        first = 1;
      }
      for (const auto& lane : p.lanes) {
        const std::string lits[] = {
            conn.quote_literal(lane.key.queue), std::to_string(lane.key.priority),
            std::to_string(lane.key.shard), std::to_string(lane.rows.size())};
        script += storage::bind_literals(reserve_lane, lits);
        script += ";\n";
        script += copy_ready;
        script += ";\n";
      }
      std::size_t strict = first + 2 * p.lanes.size();
      if (own) carried = wake_with_commit(p);
      const auto& wake = own ? carried : p.notify_queues;
      std::string notify_sql;
      if (!wake.empty()) {
        storage::ArrayLiteral q;
        for (const auto& name : wake) q.add(name);
        const std::string lits[] = {conn.quote_literal(std::move(q).finish())};
        notify_sql = storage::bind_literals(notify, lits);
      }
      if (own) {
        script += "COMMIT;\n";
        ++strict;  // a NOTIFY failure after the COMMIT is only a warning (see notify)
        script += notify_sql;
      } else if (!notify_sql.empty()) {
        script += notify_sql;
        ++strict;
      }

      std::vector<pg::Result> reserved(p.lanes.size());
      const auto lane_of = [&](std::size_t statement) { return (statement - first) / 2; };
      late_error = pg::run_script(
          conn, script, strict,
          [&](std::size_t statement) {
            const std::size_t l = lane_of(statement);
            if (statement < first || (statement - first) % 2 != 1 || l >= p.lanes.size()) {
              throw Error("enqueue: unexpected COPY in the enqueue script");
            }
            const auto& lane = p.lanes[l];
            const auto& res = reserved[l];
            const auto first_seq = res.get<std::int64_t>(0, 0);
            count_created(lane, res.get<bool>(0, 1));
            const auto slot = res.get<int>(0, 2);
            const auto lane_ids = parse_int_array(res.text(0, 3));
            const auto tx_micros = res.get<std::int64_t>(0, 4);
            if (lane_ids.size() != lane.rows.size())
              throw Error("enqueue: job id reservation short");
            auto& payload = payloads[l];
            for (std::size_t r = 0; r < lane.rows.size(); ++r) {
              payload.patch(r, slot, first_seq + static_cast<std::int64_t>(r), lane_ids[r],
                            tx_micros);
              ids[lane.rows[r]] = lane_ids[r];
            }
            return std::move(payload.data);
          },
          [&](std::size_t statement, pg::Result&& res) {
            if (statement >= first && (statement - first) % 2 == 0 &&
                lane_of(statement) < p.lanes.size()) {
              reserved[lane_of(statement)] = std::move(res);
            }
          });
    } catch (...) {
      // The script stops at its error: the NOTIFY counted as sent was not.
      if (own) wakes.forget(carried);
      if (own && conn.ok() && conn.in_transaction()) {
        try {
          conn.exec("ROLLBACK");
        } catch (const Error&) {  // the original error is the one worth reporting
        }
      }
      throw;
    }
    if (own) {
      std::vector<std::string> errors;
      if (late_error) errors.push_back(std::move(*late_error));
      wake_after_commit(conn, p, carried, errors);
    } else if (late_error) {
      spdlog::warn("enqueue committed but NOTIFY failed (workers will poll): {}", *late_error);
    }
    reservations.fetch_add(p.lanes.size(), std::memory_order_relaxed);
    remember_lanes(p);
    count_enqueued(p, jobs);
    return ids;
  }

  // Every entry point: calls with unique jobs split off (storage/enqueue_unique.hpp); the
  // others go straight to the bulk path, unchanged.
  std::vector<InsertResult> insert_results(pg::Connection& conn, std::span<const NewJob> jobs,
                                           bool copy) {
    const auto bulk = [&](std::span<const NewJob> plain) {
      return copy ? insert_many_copy(conn, plain) : insert_many(conn, plain);
    };
    if (storage::any_unique(jobs)) return storage::insert_with_unique(conn, jobs, unique, bulk);
    std::vector<InsertResult> out;
    out.reserve(jobs.size());
    for (const auto id : bulk(jobs)) out.push_back(InsertResult{id, false});
    return out;
  }
  std::vector<JobId> insert_ids(pg::Connection& conn, std::span<const NewJob> jobs, bool copy) {
    if (!storage::any_unique(jobs))
      return copy ? insert_many_copy(conn, jobs) : insert_many(conn, jobs);
    std::vector<JobId> ids;
    ids.reserve(jobs.size());
    for (const auto& r : insert_results(conn, jobs, copy)) ids.push_back(r.id);
    return ids;
  }

  StorageOptions options;
  std::string quoted;
  storage::Consumer consumer;
  storage::UniqueInserter unique;
  storage::OneJobInserter one;
  storage::WakeCoalescer wakes;
  // Why a self-committed enqueue notifies after its commit (INSERT: a second pipeline
  // segment; COPY: after the script's COMMIT), in the same round trip: NOTIFY inside the
  // enqueue transaction would serialise every enqueue commit in the cluster: PostgreSQL
  // takes one global lock on the notification queue from pre-commit to the end of commit
  // (its WAL flush included), and our producer would wait for it while holding its lane
  // locks. Sent after commit it costs one short statement with no WAL flush. A caller-owned
  // transaction still gets the NOTIFY inside it, since only its commit makes the rows
  // visible. A failure there loses only a wake-up (workers also poll); reporting it as a
  // failed enqueue would invite a duplicate, so it is logged.
  std::string insert_lane, reserve_lane, copy_ready, insert_deferred, notify, shard_counts;

  std::atomic<std::uint16_t> rotor{0};
  std::atomic<std::uint64_t> reservations{0}, creations{0}, repairs{0}, one_job_writes{0};
  std::atomic<bool> one_denied{false};  // see insert_one
  mutable std::shared_mutex mu;
  std::unordered_map<std::string, int> shard_cache;  // guarded by mu
  std::set<LaneKey> lane_cache;                      // guarded by mu
};

QueueStorage::QueueStorage(StorageOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
QueueStorage::~QueueStorage() = default;

JobId QueueStorage::insert(Connection& conn, const NewJob& job) {
  return impl_->insert_ids(pg::native(conn), std::span<const NewJob>(&job, 1), false).front();
}
InsertResult QueueStorage::insert_result(Connection& conn, const NewJob& job) {
  return impl_->insert_results(pg::native(conn), std::span<const NewJob>(&job, 1), false).front();
}
std::vector<JobId> QueueStorage::insert_many(Connection& conn, std::span<const NewJob> jobs) {
  return impl_->insert_ids(pg::native(conn), jobs, false);
}
std::vector<JobId> QueueStorage::insert_many_copy(Connection& conn, std::span<const NewJob> jobs) {
  return impl_->insert_ids(pg::native(conn), jobs, true);
}
int QueueStorage::enqueue_shards(Connection& conn, const std::string& queue) {
  return storage::enqueue_shards(*this, pg::native(conn), queue);
}
std::vector<ClaimedEntry> QueueStorage::claim(Connection& conn, const std::string& queue,
                                              const ClaimOptions& options) {
  return impl_->consumer.claim(pg::native(conn), queue, options);
}
std::vector<CompletionResult> QueueStorage::complete(Connection& conn,
                                                     std::span<const Completion> completions) {
  return impl_->consumer.complete(pg::native(conn), completions);
}
int QueueStorage::promote_due(Connection& conn, int limit) {
  return impl_->consumer.promote_due(pg::native(conn), limit);
}
int QueueStorage::release(Connection& conn, std::span<const ClaimedEntry> entries,
                          std::string_view reason) {
  return impl_->consumer.release(pg::native(conn), entries, reason);
}
std::vector<std::pair<JobId, std::int64_t>> QueueStorage::heartbeat(
    Connection& conn, std::span<const Heartbeat> beats) {
  return impl_->consumer.heartbeat(pg::native(conn), beats);
}
std::vector<QueueStorage::Rescued> QueueStorage::rescue(Connection& conn,
                                                        std::chrono::milliseconds stale,
                                                        int limit) {
  return impl_->consumer.rescue(pg::native(conn), stale, limit);
}

namespace detail {
struct StorageAccess {
  static QueueStorage::Impl& impl(QueueStorage& store) { return *store.impl_; }
};
}  // namespace detail

namespace storage {

std::vector<JobId> insert_many(QueueStorage& store, pg::Connection& conn,
                               std::span<const NewJob> jobs) {
  return detail::StorageAccess::impl(store).insert_ids(conn, jobs, false);
}
std::vector<JobId> insert_many_copy(QueueStorage& store, pg::Connection& conn,
                                    std::span<const NewJob> jobs) {
  return detail::StorageAccess::impl(store).insert_ids(conn, jobs, true);
}
std::vector<InsertResult> insert_results(QueueStorage& store, pg::Connection& conn,
                                         std::span<const NewJob> jobs) {
  return detail::StorageAccess::impl(store).insert_results(conn, jobs, false);
}
int enqueue_shards(QueueStorage& store, pg::Connection& conn, const std::string& queue) {
  validate_queue_name(queue);
  std::unordered_map<std::string, int> out;
  detail::StorageAccess::impl(store).load_shard_counts(conn, {queue}, out);
  return out.at(queue);
}
Consumer& consumer(QueueStorage& store) { return detail::StorageAccess::impl(store).consumer; }

}  // namespace storage

void QueueStorage::reset() {
  std::unique_lock lock(impl_->mu);
  impl_->shard_cache.clear();
  impl_->lane_cache.clear();
}

QueueStorage::Stats QueueStorage::stats() const {
  return Stats{impl_->reservations.load(), impl_->creations.load(), impl_->repairs.load(),
               impl_->one_job_writes.load()};
}

const std::string& QueueStorage::schema() const noexcept { return impl_->options.schema; }

}  // namespace awa
