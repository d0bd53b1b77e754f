// The producer side of the engine (docs/design/engine.md): routing, lane reservation, INSERT
// and COPY.
//
// One call = one transaction (the caller's, or one of its own):
//   1. validate everything (nothing is sent for a bad batch);
//   2. split scheduled rows (run_at in the future) off to deferred_jobs;
//   3. route: keyed rows by hash, unkeyed rows by one rotor pick per (queue, priority),
//      stepped past the lanes other calls of this store are writing (storage/busy_lanes.hpp);
//   4. per lane, in ascending (queue, priority, enqueue_shard) order — the global lock
//      order — reserve one contiguous lane_seq range and write the rows;
//   5. notify each queue once (after commit when the call commits itself; see Impl::notify).
// INSERT mode sends all of it as one pipeline: without an explicit BEGIN the statements
// up to the pipeline's first Sync form one implicit transaction, so a self-committing
// insert is atomic; its NOTIFY follows in a second segment (its own transaction, after the
// commit; see `notify`), still in the same single round trip. The COPY path is in
// enqueue_copy.cpp, the one-job path in enqueue_one.cpp (their shared state:
// enqueue_impl.hpp).
#include <algorithm>
#include <atomic>
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
#include "pg/native.hpp"
#include "pg/pipeline.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/consume.hpp"
#include "storage/enqueue_after.hpp"
#include "storage/enqueue_batch.hpp"
#include "storage/enqueue_impl.hpp"
#include "storage/enqueue_unique.hpp"
#include "storage/pg_array.hpp"
#include "storage/store_access.hpp"
#include "storage/validate.hpp"
#include "storage/wake_coalescer.hpp"

namespace awa {

using storage::LaneBatch;
using storage::LaneKey;
using storage::Plan;

void QueueStorage::Impl::load_shard_counts(pg::Connection& conn,
                                           const std::set<std::string>& queues,
                                           std::unordered_map<std::string, int>& out) {
  std::vector<std::string> missing;
  const auto now = std::chrono::steady_clock::now();
  {
    std::shared_lock lock(mu);
    for (const auto& q : queues) {
      const auto it = shard_cache.find(q);
      if (it == shard_cache.end() || now - it->second.read_at >= options.shard_count_ttl) {
        missing.push_back(q);
      } else {
        out[q] = it->second.shards;
      }
    }
  }
  if (missing.empty()) return;
  storage::ArrayLiteral arr;
  for (const auto& q : missing) arr.add(q);
  const auto res = conn.exec_cached(shard_counts, pg::make_params(std::move(arr).finish()));
  std::unique_lock lock(mu);
  for (int i = 0; i < res.rows(); ++i) {
    const auto q = res.get<std::string>(i, 0);
    const int s = res.get<int>(i, 1);
    shard_cache[q] = CachedShards{s, res.get_opt<int>(i, 2).value_or(0), now};
    out[q] = s;
  }
}

int QueueStorage::Impl::cached_queue_id(const std::string& queue) const {
  std::shared_lock lock(mu);
  const auto it = shard_cache.find(queue);
  return it == shard_cache.end() ? 0 : it->second.queue_id;
}

namespace {

bool counted(const storage::BusyLanes::Hold& hold, const LaneKey& key) {
  const auto& held = hold.lanes();
  return std::any_of(held.begin(), held.end(), [&](const storage::BusyLanes::Lane& l) {
    return l.queue == key.queue && l.priority == key.priority && l.shard == key.shard;
  });
}

}  // namespace

Plan QueueStorage::Impl::plan(pg::Connection& conn, std::span<const NewJob> jobs) {
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
        if (fresh) {
          const int start = static_cast<int>(rotor.fetch_add(1, std::memory_order_relaxed) % s);
          it->second = busy.pick(o.queue, o.priority, s, start, p.writing);
        }
        shard = it->second;
      }
    }
    if (o.ordering_key) p.keyed_shards[o.queue] = s;
    lanes[LaneKey{o.queue, o.priority, shard}].push_back(i);
  }
  for (const auto& [key, rows] : lanes) {  // the keyed lanes: counted, not moved
    if (counted(p.writing, key)) continue;
    busy.add(key.queue, key.priority, key.shard, p.writing);
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

std::pair<std::string, std::string> QueueStorage::Impl::check_arrays(const Plan& p) {
  storage::ArrayLiteral queues, counts;
  for (const auto& [queue, shards] : p.keyed_shards) {
    queues.add(queue);
    counts.add(static_cast<std::int64_t>(shards));
  }
  return {std::move(queues).finish(), std::move(counts).finish()};
}

pg::Params QueueStorage::Impl::check_params(const Plan& p) {
  auto [queues, counts] = check_arrays(p);
  return pg::make_params(std::move(queues), std::move(counts));
}

void QueueStorage::Impl::forget_shard_counts(const Plan& p) {
  std::unique_lock lock(mu);
  for (const auto& [queue, shards] : p.keyed_shards) shard_cache.erase(queue);
}

void QueueStorage::Impl::remember_lanes(const Plan& p, std::span<const int> queue_ids) {
  std::unique_lock lock(mu);
  for (std::size_t l = 0; l < p.lanes.size(); ++l) {
    lane_cache.insert(p.lanes[l].key);
    // An id never changes, so it is kept without touching when the shard count was read.
    if (l < queue_ids.size() && queue_ids[l] != 0) {
      const auto it = shard_cache.find(p.lanes[l].key.queue);
      if (it != shard_cache.end()) it->second.queue_id = queue_ids[l];
    }
  }
}

pg::Params QueueStorage::Impl::insert_params(const LaneBatch& lane,
                                             std::span<const NewJob> jobs) const {
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
    storage::add_optional_columns(j, keys, meta, tags);
  }
  return pg::make_params(
      lane.key.queue, lane.key.priority, lane.key.shard, std::move(kinds).finish(),
      std::move(args).finish(), std::move(attempts).finish(), std::move(run_at).finish(),
      std::move(keys).finish(), std::move(meta).finish(), std::move(tags).finish());
}

pg::Params QueueStorage::Impl::deferred_params(const Plan& p, std::span<const NewJob> jobs) {
  storage::ArrayLiteral queues, prios, kinds, args, attempts, run_at, keys, meta, tags;
  for (const auto i : p.deferred) {
    const auto& j = jobs[i];
    queues.add(j.opts.queue);
    prios.add(static_cast<std::int64_t>(j.opts.priority));
    kinds.add(j.kind);
    args.add(j.args_json);
    attempts.add(static_cast<std::int64_t>(j.opts.max_attempts));
    run_at.add(storage::timestamp_literal(*j.opts.run_at));
    storage::add_optional_columns(j, keys, meta, tags);
  }
  return pg::make_params(
      std::move(queues).finish(), std::move(prios).finish(), std::move(kinds).finish(),
      std::move(args).finish(), std::move(attempts).finish(), std::move(run_at).finish(),
      std::move(keys).finish(), std::move(meta).finish(), std::move(tags).finish());
}

std::string QueueStorage::Impl::notify_channels(const std::vector<std::string>& queues) {
  storage::ArrayLiteral channels;
  for (const auto& name : queues) channels.add(notify_channel(name));
  return std::move(channels).finish();
}

pg::Params QueueStorage::Impl::notify_params(const std::vector<std::string>& queues) {
  return pg::make_params(notify_channels(queues));
}

std::vector<std::string> QueueStorage::Impl::wake_with_commit(const Plan& p) {
  return wakes.carry(p.notify_queues, storage::WakeCoalescer::Clock::now());
}

std::vector<std::string> QueueStorage::Impl::add_wake(pg::Pipeline& pipe, const Plan& p) {
  auto carried = wake_with_commit(p);
  if (!carried.empty()) {
    pipe.sync();
    pipe.add_cached_best_effort(notify, notify_params(carried));
  }
  return carried;
}

void QueueStorage::Impl::wake_after_commit(pg::Connection& conn, const Plan& p,
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

void QueueStorage::Impl::count_enqueued(const Plan& p, std::span<const NewJob> jobs) {
  std::map<std::string_view, std::uint64_t> per_queue;
  for (const auto& lane : p.lanes) per_queue[lane.key.queue] += lane.rows.size();
  for (const auto i : p.deferred) ++per_queue[jobs[i].opts.queue];
  auto& family = metrics.job_enqueued;
  for (const auto& [queue, n] : per_queue) family.with({queue}).inc(n);
}

void QueueStorage::Impl::count_created(const LaneBatch& lane, bool created) {
  if (!created) return;
  (lane.uncached ? creations : repairs).fetch_add(1, std::memory_order_relaxed);
}

std::vector<JobId> QueueStorage::Impl::insert_staged(pg::Connection& conn,
                                                     std::span<const NewJob> jobs) {
  for (std::size_t i = 0; i < jobs.size(); ++i) storage::validate_job(jobs[i], i);
  Plan p;  // only `deferred` is used
  std::vector<std::size_t> due;
  const auto now = std::chrono::system_clock::now();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& run_at = jobs[i].opts.run_at;
    (run_at && *run_at > now ? p.deferred : due).push_back(i);
  }
  pg::Pipeline pipe = conn.pipeline();
  if (!due.empty()) {
    storage::ArrayLiteral queues, prios, kinds, args, attempts, run_at, keys, meta, tags;
    for (const auto i : due) {
      const auto& j = jobs[i];
      queues.add(j.opts.queue);
      prios.add(static_cast<std::int64_t>(j.opts.priority));
      kinds.add(j.kind);
      args.add(j.args_json);
      attempts.add(static_cast<std::int64_t>(j.opts.max_attempts));
      if (j.opts.run_at) {
        run_at.add(storage::timestamp_literal(*j.opts.run_at));
      } else {
        run_at.add_null();
      }
      storage::add_optional_columns(j, keys, meta, tags);
    }
    pipe.add_cached(stage, pg::make_params(std::move(queues).finish(), std::move(prios).finish(),
                                           std::move(kinds).finish(), std::move(args).finish(),
                                           std::move(attempts).finish(), std::move(run_at).finish(),
                                           std::move(keys).finish(), std::move(meta).finish(),
                                           std::move(tags).finish()));
  }
  if (!p.deferred.empty()) pipe.add_cached(insert_deferred, deferred_params(p, jobs));
  const auto results = pipe.run();

  std::vector<JobId> ids(jobs.size(), 0);
  std::size_t next = 0;
  if (!due.empty()) {
    const auto& res = results[next++];
    if (static_cast<std::size_t>(res.rows()) != due.size()) {
      throw Error(
          fmt::format("enqueue: staging returned {} rows for {} jobs", res.rows(), due.size()));
    }
    for (std::size_t r = 0; r < due.size(); ++r) {
      ids[due[r]] = res.get<std::int64_t>(static_cast<int>(r), 0);
    }
  }
  if (!p.deferred.empty()) {
    const auto& res = results[next];
    for (int r = 0; r < res.rows(); ++r) {
      ids[p.deferred[static_cast<std::size_t>(r)]] = res.get<std::int64_t>(r, 0);
    }
  }
  std::map<std::string_view, std::uint64_t> per_queue;
  for (const auto& j : jobs) ++per_queue[j.opts.queue];
  auto& family = metrics.job_enqueued;
  for (const auto& [queue, n] : per_queue) family.with({queue}).inc(n);
  return ids;
}

std::vector<JobId> QueueStorage::Impl::insert_many(pg::Connection& conn,
                                                   std::span<const NewJob> jobs) {
  std::vector<JobId> ids(jobs.size(), 0);
  if (jobs.empty()) return ids;
  if (conn.in_transaction()) return insert_staged(conn, jobs);
  return keyed_insert(conn, jobs, [&](const Plan& p) { return insert_planned(conn, p, jobs); });
}

std::vector<JobId> QueueStorage::Impl::insert_planned(pg::Connection& conn, const Plan& p,
                                                      std::span<const NewJob> jobs) {
  std::vector<JobId> ids(jobs.size(), 0);
  if (const auto id = insert_one(conn, p, jobs)) return {*id};
  pg::Pipeline pipe = conn.pipeline();
  const std::size_t first = p.keyed_shards.empty() ? 0 : 1;  // results[first] is lane 0
  if (first != 0) pipe.add_cached(check_shards, check_params(p));
  for (const auto& lane : p.lanes) pipe.add_cached(insert_lane, insert_params(lane, jobs));
  if (!p.deferred.empty()) pipe.add_cached(insert_deferred, deferred_params(p, jobs));
  const std::vector<std::string> carried = add_wake(pipe, p);
  std::vector<pg::Result> results;
  try {
    results = pipe.run();
  } catch (...) {
    // Its NOTIFY segment may not have run (a broken connection): count it as not sent.
    wakes.forget(carried);
    throw;
  }
  wake_after_commit(conn, p, carried, pipe.best_effort_errors());

  std::vector<int> queue_ids(p.lanes.size(), 0);
  for (std::size_t l = 0; l < p.lanes.size(); ++l) {
    const auto& lane = p.lanes[l];
    const auto& res = results[first + l];
    if (static_cast<std::size_t>(res.rows()) != lane.rows.size()) {
      throw Error(fmt::format("enqueue: lane insert returned {} rows for {} jobs", res.rows(),
                              lane.rows.size()));
    }
    for (int r = 0; r < res.rows(); ++r) {
      const auto offset = res.get<std::int64_t>(r, 0) - res.get<std::int64_t>(r, 3);
      ids[lane.rows.at(static_cast<std::size_t>(offset))] = res.get<std::int64_t>(r, 1);
    }
    if (res.rows() > 0) {
      count_created(lane, res.get<bool>(0, 2));
      queue_ids[l] = res.get<int>(0, 4);
    }
  }
  reservations.fetch_add(p.lanes.size(), std::memory_order_relaxed);
  if (!p.deferred.empty()) {
    const auto& res = results[first + p.lanes.size()];
    for (int r = 0; r < res.rows(); ++r) {
      ids[p.deferred[static_cast<std::size_t>(r)]] = res.get<std::int64_t>(r, 0);
    }
  }
  remember_lanes(p, queue_ids);
  count_enqueued(p, jobs);
  return ids;
}

std::vector<InsertResult> QueueStorage::Impl::insert_results(pg::Connection& conn,
                                                             std::span<const NewJob> jobs,
                                                             bool copy) {
  if (storage::any_batch(jobs)) {
    return storage::insert_with_batches(
        conn, jobs, add_batch_members,
        [&](std::span<const NewJob> rest) { return insert_results(conn, rest, copy); });
  }
  if (storage::any_parents(jobs)) {
    return storage::insert_with_parents(conn, jobs, after, [&](std::span<const NewJob> rest) {
      return insert_results(conn, rest, copy);
    });
  }
  const auto bulk = [&](std::span<const NewJob> plain) {
    return copy ? insert_many_copy(conn, plain) : insert_many(conn, plain);
  };
  if (storage::any_unique(jobs)) return storage::insert_with_unique(conn, jobs, unique, bulk);
  std::vector<InsertResult> out;
  out.reserve(jobs.size());
  for (const auto id : bulk(jobs)) out.push_back(InsertResult{id, false});
  return out;
}

std::vector<JobId> QueueStorage::Impl::insert_ids(pg::Connection& conn,
                                                  std::span<const NewJob> jobs, bool copy) {
  if (!storage::any_unique(jobs) && !storage::any_parents(jobs) && !storage::any_batch(jobs))
    return copy ? insert_many_copy(conn, jobs) : insert_many(conn, jobs);
  std::vector<JobId> ids;
  ids.reserve(jobs.size());
  for (const auto& r : insert_results(conn, jobs, copy)) ids.push_back(r.id);
  return ids;
}

}  // namespace awa
