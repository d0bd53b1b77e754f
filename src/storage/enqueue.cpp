// The producer side of ADR-025: routing, lane reservation, INSERT and COPY.
//
// One call = one transaction (the caller's, or one of its own):
//   1. validate everything (nothing is sent for a bad batch);
//   2. split scheduled rows (run_at in the future) off to deferred_jobs;
//   3. route: keyed rows by hash, unkeyed rows by one rotor pick per (queue, priority);
//   4. per lane, in ascending (queue, priority, enqueue_shard) order — the global lock
//      order — reserve one contiguous lane_seq range and write the rows;
//   5. notify each queue once (after commit when the call commits itself; see send_notify).
// INSERT mode sends all of it as one pipeline: without an explicit BEGIN the statements
// up to the pipeline's Sync form one implicit transaction, so a self-committing insert is
// atomic in a single round trip.
#include <algorithm>
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
#include "pg/pipeline.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/consume.hpp"
#include "storage/pg_array.hpp"
#include "storage/validate.hpp"

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

std::string format_timestamp(std::chrono::system_clock::time_point tp) {
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(tp.time_since_epoch()).count();
  const auto secs =
      std::chrono::sys_seconds(std::chrono::seconds(us / 1000000 - (us % 1000000 < 0)));
  const auto frac = ((us % 1000000) + 1000000) % 1000000;
  return fmt::format("{:%Y-%m-%d %H:%M:%S}.{:06d}+00", secs, frac);
}

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
      : options(std::move(o)), quoted(sql::quote_schema(options.schema)), consumer(quoted) {
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
        run_at.add(format_timestamp(*j.opts.run_at));
      } else {
        run_at.add_null();
      }
      add_optional_columns(j, keys, meta, tags);
    }
    return pg::make_params(lane.key.queue, lane.key.priority, lane.key.shard,
                           static_cast<std::int64_t>(lane.rows.size()), std::move(kinds).finish(),
                           std::move(args).finish(), std::move(attempts).finish(),
                           std::move(run_at).finish(), std::move(keys).finish(),
                           std::move(meta).finish(), std::move(tags).finish());
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
      run_at.add(format_timestamp(*j.opts.run_at));
      add_optional_columns(j, keys, meta, tags);
    }
    return pg::make_params(
        std::move(queues).finish(), std::move(prios).finish(), std::move(kinds).finish(),
        std::move(args).finish(), std::move(attempts).finish(), std::move(run_at).finish(),
        std::move(keys).finish(), std::move(meta).finish(), std::move(tags).finish());
  }

  pg::Params notify_params(const Plan& p) const {
    storage::ArrayLiteral q;
    for (const auto& name : p.notify_queues) q.add(name);
    return pg::make_params(std::move(q).finish());
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
    pg::Pipeline pipe = conn.pipeline();
    for (const auto& lane : p.lanes) pipe.add_cached(insert_lane, insert_params(lane, jobs));
    if (!p.deferred.empty()) pipe.add_cached(insert_deferred, deferred_params(p, jobs));
    if (!own && !p.notify_queues.empty()) pipe.add_cached(notify, notify_params(p));
    const auto results = pipe.run();
    if (own) send_notify(conn, p);

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

  std::vector<JobId> insert_many_copy(pg::Connection& conn, std::span<const NewJob> jobs) {
    std::vector<JobId> ids(jobs.size(), 0);
    if (jobs.empty()) return ids;
    const bool own = !conn.in_transaction();
    const Plan p = plan(conn, jobs);
    try {
      pg::Pipeline pipe = conn.pipeline();
      if (own) pipe.add("BEGIN", {});
      const std::size_t first_reserve = own ? 1 : 0;
      for (const auto& lane : p.lanes) {
        pipe.add_cached(reserve_lane,
                        pg::make_params(lane.key.queue, lane.key.priority, lane.key.shard,
                                        static_cast<std::int64_t>(lane.rows.size())));
      }
      const auto reserved = pipe.run();

      for (std::size_t l = 0; l < p.lanes.size(); ++l) {
        const auto& lane = p.lanes[l];
        const auto& res = reserved[first_reserve + l];
        const auto first = res.get<std::int64_t>(0, 0);
        count_created(lane, res.get<bool>(0, 1));
        const auto slot = std::string(res.text(0, 2));
        const auto lane_ids = parse_int_array(res.text(0, 3));
        const auto tx_time = std::string(res.text(0, 4));
        if (lane_ids.size() != lane.rows.size()) throw Error("enqueue: job id reservation short");

        const std::string priority = std::to_string(lane.key.priority);
        const std::string shard = std::to_string(lane.key.shard);
        auto copy = conn.copy_in(copy_ready);
        for (std::size_t r = 0; r < lane.rows.size(); ++r) {
          const auto& j = jobs[lane.rows[r]];
          const std::string seq = std::to_string(first + static_cast<std::int64_t>(r));
          const std::string id = std::to_string(lane_ids[r]);
          const std::string attempts = std::to_string(j.opts.max_attempts);
          const std::string run_at = j.opts.run_at ? format_timestamp(*j.opts.run_at) : tx_time;
          std::optional<std::string> key, meta, tags;
          if (j.opts.ordering_key) key = storage::bytea_hex(*j.opts.ordering_key);
          if (!j.opts.metadata.is_null()) meta = j.opts.metadata.dump();
          if (!j.opts.tags.empty()) tags = tags_literal(j.opts.tags);
          const std::optional<std::string_view> fields[] = {
              slot,
              lane.key.queue,
              priority,
              shard,
              seq,
              id,
              j.kind,
              j.args_json,
              attempts,
              run_at,
              tx_time,
              key ? std::optional<std::string_view>(*key) : std::nullopt,
              meta ? std::optional<std::string_view>(*meta) : std::nullopt,
              tags ? std::optional<std::string_view>(*tags) : std::nullopt};
          copy.row(fields);
          ids[lane.rows[r]] = lane_ids[r];
        }
        copy.finish();
      }
      reservations.fetch_add(p.lanes.size(), std::memory_order_relaxed);

      pg::Pipeline tail = conn.pipeline();
      if (!p.deferred.empty()) tail.add_cached(insert_deferred, deferred_params(p, jobs));
      if (!own && !p.notify_queues.empty()) tail.add_cached(notify, notify_params(p));
      if (own) tail.add("COMMIT", {});
      const auto done = tail.run();
      if (!p.deferred.empty()) {
        const auto& res = done[0];
        for (int r = 0; r < res.rows(); ++r) {
          ids[p.deferred[static_cast<std::size_t>(r)]] = res.get<std::int64_t>(r, 0);
        }
      }
    } catch (...) {
      if (own && conn.ok()) {
        try {
          conn.exec("ROLLBACK");
        } catch (const Error&) {  // the original error is the one worth reporting
        }
      }
      throw;
    }
    remember_lanes(p);
    count_enqueued(p, jobs);
    if (own) send_notify(conn, p);
    return ids;
  }

  // Wakes the queues' listeners after a self-committed enqueue. NOTIFY inside the enqueue
  // transaction would serialise every enqueue commit in the cluster: PostgreSQL takes one
  // global lock on the notification queue from pre-commit to the end of commit (its WAL
  // flush included), and our producer would wait for it while holding its lane locks.
  // Sent after commit it costs one short statement with no WAL flush. A caller-owned
  // transaction still gets the NOTIFY inside it, since only its commit makes the rows
  // visible. A failure here loses only a wake-up: workers also poll.
  void send_notify(pg::Connection& conn, const Plan& p) {
    if (p.notify_queues.empty()) return;
    try {
      conn.exec_cached(notify, notify_params(p));
    } catch (const Error& e) {
      // The jobs are committed; reporting failure now would invite a duplicate enqueue.
      spdlog::warn("enqueue committed but NOTIFY failed (workers will poll): {}", e.what());
    }
  }

  StorageOptions options;
  std::string quoted;
  storage::Consumer consumer;
  std::string insert_lane, reserve_lane, copy_ready, insert_deferred, notify, shard_counts;

  std::atomic<std::uint16_t> rotor{0};
  std::atomic<std::uint64_t> reservations{0}, creations{0}, repairs{0};
  mutable std::shared_mutex mu;
  std::unordered_map<std::string, int> shard_cache;  // guarded by mu
  std::set<LaneKey> lane_cache;                      // guarded by mu
};

QueueStorage::QueueStorage(StorageOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
QueueStorage::~QueueStorage() = default;

JobId QueueStorage::insert(Connection& conn, const NewJob& job) {
  return impl_->insert_many(conn.native(), std::span<const NewJob>(&job, 1)).front();
}
std::vector<JobId> QueueStorage::insert_many(Connection& conn, std::span<const NewJob> jobs) {
  return impl_->insert_many(conn.native(), jobs);
}
std::vector<JobId> QueueStorage::insert_many_copy(Connection& conn, std::span<const NewJob> jobs) {
  return impl_->insert_many_copy(conn.native(), jobs);
}
std::vector<JobId> QueueStorage::insert_many(pg::Connection& conn, std::span<const NewJob> jobs) {
  return impl_->insert_many(conn, jobs);
}
std::vector<JobId> QueueStorage::insert_many_copy(pg::Connection& conn,
                                                  std::span<const NewJob> jobs) {
  return impl_->insert_many_copy(conn, jobs);
}

int QueueStorage::enqueue_shards(pg::Connection& conn, const std::string& queue) {
  storage::validate_queue_name(queue);
  std::unordered_map<std::string, int> out;
  impl_->load_shard_counts(conn, {queue}, out);
  return out.at(queue);
}

std::vector<ClaimedEntry> QueueStorage::claim(pg::Connection& conn, const std::string& queue,
                                              const ClaimOptions& options) {
  return impl_->consumer.claim(conn, queue, options);
}

std::vector<CompletionResult> QueueStorage::complete(pg::Connection& conn,
                                                     std::span<const Completion> completions) {
  return impl_->consumer.complete(conn, completions);
}

int QueueStorage::promote_due(pg::Connection& conn, int limit) {
  return impl_->consumer.promote_due(conn, limit);
}

int QueueStorage::release(pg::Connection& conn, std::span<const ClaimedEntry> entries,
                          std::string_view reason) {
  return impl_->consumer.release(conn, entries, reason);
}

std::vector<std::pair<JobId, std::int64_t>> QueueStorage::heartbeat(
    pg::Connection& conn, std::span<const Heartbeat> beats) {
  return impl_->consumer.heartbeat(conn, beats);
}

std::vector<QueueStorage::Rescued> QueueStorage::rescue(pg::Connection& conn,
                                                        std::chrono::milliseconds stale,
                                                        int limit) {
  return impl_->consumer.rescue(conn, stale, limit);
}

void QueueStorage::reset() {
  std::unique_lock lock(impl_->mu);
  impl_->shard_cache.clear();
  impl_->lane_cache.clear();
}

QueueStorage::Stats QueueStorage::stats() const {
  return Stats{impl_->reservations.load(), impl_->creations.load(), impl_->repairs.load()};
}

const std::string& QueueStorage::schema() const noexcept { return impl_->options.schema; }

}  // namespace awa
