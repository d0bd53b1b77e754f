#include "storage/enqueue_one.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "awa/error.hpp"
#include "pg/pipeline.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/enqueue_impl.hpp"
#include "storage/pg_array.hpp"

namespace awa::storage {

OneJobInserter::OneJobInserter(const std::string& quoted_schema)
    : template_(sql::render(sql::file("queries/enqueue/insert_one.sql"), quoted_schema)) {}

const std::string& OneJobInserter::sql(int slot) {
  std::lock_guard lock(mu_);
  const auto [it, fresh] = by_slot_.try_emplace(slot);
  if (fresh) {
    static constexpr std::string_view kToken = "{slot}";
    const std::string value = std::to_string(slot);
    auto& text = it->second;
    text = template_;
    for (auto pos = text.find(kToken); pos != std::string::npos; pos = text.find(kToken, pos)) {
      text.replace(pos, kToken.size(), value);
      pos += value.size();
    }
  }
  return it->second;
}

pg::Params OneJobInserter::params(int queue_id, int priority, int shard, const NewJob& job) {
  pg::Params p;
  p.add(queue_id)
      .add(priority)
      .add(shard)
      .add(job.kind)
      .add(job.args_json)
      .add(job.opts.max_attempts);
  if (job.opts.run_at) {
    p.add(*job.opts.run_at);
  } else {
    p.null();
  }
  add_optional_columns(job, p, p, p);  // $8 ordering key, $9 metadata, $10 tags
  return p;
}

OneJobInserter::Outcome OneJobInserter::read(const pg::Result& res, int slot) {
  if (res.rows() != 1)
    throw Error(fmt::format("enqueue: one-job insert returned {} rows", res.rows()));
  Outcome out;
  out.id = res.get_opt<std::int64_t>(0, 1);
  if (out.id) return out;
  const auto current = res.get_opt<int>(0, 0);
  if (!current) throw Error("enqueue: the queue ring has no current slot (schema not migrated?)");
  if (*current != slot) {
    slot_.store(*current, std::memory_order_relaxed);
    out.slot_moved = true;
  }
  return out;
}

}  // namespace awa::storage

namespace awa {

std::optional<JobId> QueueStorage::Impl::insert_one(pg::Connection& conn, const Plan& p,
                                                    std::span<const NewJob> jobs) {
  if (jobs.size() != 1 || !p.deferred.empty() || p.lanes.front().uncached ||
      one_denied.load(std::memory_order_relaxed))
    return std::nullopt;
  const auto& job = jobs.front();
  const auto& lane = p.lanes.front();
  const int queue_id = cached_queue_id(lane.key.queue);
  if (queue_id == 0) return std::nullopt;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int slot = one.slot();
    pg::Pipeline pipe = conn.pipeline();
    const std::size_t at = p.keyed_shards.empty() ? 0 : 1;  // see keyed_insert
    if (at != 0) pipe.add_cached(check_shards, check_params(p));
    pipe.add_cached(one.sql(slot), storage::OneJobInserter::params(queue_id, lane.key.priority,
                                                                   lane.key.shard, job));
    const auto carried = add_wake(pipe, p);
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
    const auto out = one.read(results.at(at), slot);
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

}  // namespace awa
