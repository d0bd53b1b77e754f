// The public QueueStorage (include/awa/queue_storage.hpp): its state (QueueStorage::Impl,
// storage/enqueue_impl.hpp) and the calls that forward to the two halves of the engine: the
// producer side (enqueue.cpp, enqueue_copy.cpp, enqueue_one.cpp) and the consumer side
// (claim, completion, promotion, heartbeats, rescue: consume.cpp).
#include <string>
#include <unordered_map>

#include "awa/metrics.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/consume.hpp"
#include "storage/enqueue_impl.hpp"
#include "storage/send_span.hpp"
#include "storage/store_access.hpp"
#include "storage/validate.hpp"

namespace awa {

QueueStorage::Impl::Impl(StorageOptions o)
    : options(std::move(o)),
      quoted(sql::quote_schema(options.schema)),
      registry(options.metrics != nullptr ? *options.metrics : metrics::default_registry()),
      metrics(metrics::engine_metrics(registry)),
      consumer(quoted, metrics),
      unique(quoted, metrics),
      after(quoted, metrics),
      one(quoted) {
  insert_lane = sql::query("queries/enqueue/insert_lane.sql", quoted);
  reserve_lane = sql::query("queries/enqueue/reserve_lane.sql", quoted);
  copy_ready = sql::query("queries/enqueue/copy_ready.sql", quoted);
  insert_deferred = sql::query("queries/enqueue/insert_deferred.sql", quoted);
  notify = sql::query("queries/enqueue/notify.sql", quoted);
  shard_counts = sql::query("queries/enqueue/shard_counts.sql", quoted);
  stage = sql::query("queries/enqueue/stage.sql", quoted);
  check_shards = sql::query("queries/enqueue/check_shard_counts.sql", quoted);
  add_batch_members = sql::query("queries/enqueue/add_batch_members.sql", quoted);
}

QueueStorage::QueueStorage(StorageOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
QueueStorage::~QueueStorage() = default;

JobId QueueStorage::insert(Connection& conn, const NewJob& job) {
  const std::span<const NewJob> jobs(&job, 1);
  return storage::traced_insert(jobs,
                                [&] { return impl_->insert_ids(pg::native(conn), jobs, false); })
      .front();
}
InsertResult QueueStorage::insert_result(Connection& conn, const NewJob& job) {
  const std::span<const NewJob> jobs(&job, 1);
  return storage::traced_insert(
             jobs, [&] { return impl_->insert_results(pg::native(conn), jobs, false); })
      .front();
}
std::vector<JobId> QueueStorage::insert_many(Connection& conn, std::span<const NewJob> jobs) {
  return storage::traced_insert(jobs,
                                [&] { return impl_->insert_ids(pg::native(conn), jobs, false); });
}
std::vector<JobId> QueueStorage::insert_many_copy(Connection& conn, std::span<const NewJob> jobs) {
  return storage::traced_insert(jobs,
                                [&] { return impl_->insert_ids(pg::native(conn), jobs, true); });
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
void QueueStorage::finalize_in(Connection& conn, const ClaimedEntry& entry,
                               const std::optional<std::string>& result_json) {
  impl_->consumer.finalize_in(pg::native(conn), entry, result_json);
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
  return traced_insert(
      jobs, [&] { return detail::StorageAccess::impl(store).insert_ids(conn, jobs, false); });
}
std::vector<JobId> insert_many_copy(QueueStorage& store, pg::Connection& conn,
                                    std::span<const NewJob> jobs) {
  return traced_insert(
      jobs, [&] { return detail::StorageAccess::impl(store).insert_ids(conn, jobs, true); });
}
std::vector<InsertResult> insert_results(QueueStorage& store, pg::Connection& conn,
                                         std::span<const NewJob> jobs) {
  return traced_insert(
      jobs, [&] { return detail::StorageAccess::impl(store).insert_results(conn, jobs, false); });
}
int enqueue_shards(QueueStorage& store, pg::Connection& conn, const std::string& queue) {
  validate_queue_name(queue);
  std::unordered_map<std::string, int> out;
  detail::StorageAccess::impl(store).load_shard_counts(conn, {queue}, out);
  return out.at(queue);
}
Consumer& consumer(QueueStorage& store) { return detail::StorageAccess::impl(store).consumer; }
metrics::EngineMetrics& engine_metrics(QueueStorage& store) {
  return detail::StorageAccess::impl(store).metrics;
}
metrics::Registry& metrics_registry(QueueStorage& store) {
  return detail::StorageAccess::impl(store).registry;
}

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
