#include <string>

#include "awa/admin.hpp"
#include "awa/metrics.hpp"

namespace awa::metrics {

void refresh_queue_gauges(awa::Connection& conn, const std::string& schema,
                          const std::vector<std::string>& queues) {
  const Admin admin(schema);
  auto& m = engine();
  for (const auto& queue : queues) {
    // queue_shards reads every lane exactly (ADR-025's lag query), so a lane that drained
    // since the last refresh is set back to 0 rather than left at a stale value.
    for (const auto& lane : admin.queue_shards(conn, queue)) {
      const auto priority = std::to_string(lane.priority);
      const auto shard = std::to_string(lane.enqueue_shard);
      m.queue_available.with({queue, priority, shard}).set(static_cast<double>(lane.available));
      m.queue_lag.with({queue, priority, shard}).set(static_cast<double>(lane.lag));
    }
  }
}

}  // namespace awa::metrics
