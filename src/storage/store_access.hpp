// A QueueStorage's operations on an internal connection, for the runtime, benchmarks
// and tests, which hold pg::Connection objects (pools, pipelines). Users call the public
// members, which take awa::Connection.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "awa/metrics.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "storage/consume.hpp"

namespace awa::storage {

std::vector<JobId> insert_many(QueueStorage& store, pg::Connection& conn,
                               std::span<const NewJob> jobs);
std::vector<JobId> insert_many_copy(QueueStorage& store, pg::Connection& conn,
                                    std::span<const NewJob> jobs);
// insert_many, also saying which unique jobs were duplicates.
std::vector<InsertResult> insert_results(QueueStorage& store, pg::Connection& conn,
                                         std::span<const NewJob> jobs);
// The queue's enqueue_shards as the store sees it (cached after the first read).
int enqueue_shards(QueueStorage& store, pg::Connection& conn, const std::string& queue);
// claim, complete, heartbeat, release, rescue, promote_due on an internal connection.
Consumer& consumer(QueueStorage& store);
// The engine's metric families the store counts into (StorageOptions::metrics): the
// runtime built on the store counts into the same registry.
metrics::EngineMetrics& engine_metrics(QueueStorage& store);
// That registry (the runtime's own gauges go there too).
metrics::Registry& metrics_registry(QueueStorage& store);

}  // namespace awa::storage
