// The per-lane queue gauges (awa_queue_available, awa_queue_lag) behind
// metrics::refresh_queue_gauges, for the runtime: the maintenance leader refreshes every
// queue of its schema at a bounded interval and cost (runtime/maintenance_leader.hpp).
// Here, not in src/metrics/, because reading them is a storage query: the metrics module
// only holds and exposes values.
//
// Thread safety: as the connection (one thread at a time); the gauges themselves are
// atomic.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "awa/metrics.hpp"
#include "pg/connection.hpp"

namespace awa::metrics {

// The label values of one lane's series: queue, priority, awa_enqueue_shard (the last
// two empty for a queue that has waiting jobs and no lane: its awa_queue_waiting only).
using LaneLabels = std::array<std::string, 3>;

// Sets both gauges for every lane of `queues` (every queue of the schema when unset), in
// one statement (sql/functions/0058_queue_gauges.sql). `cap` bounds the available rows
// counted per lane; a lane at the cap reports its lag instead (an upper bound). Unset:
// exact counts. Returns the series written (in `m`'s registry).
std::vector<LaneLabels> refresh_lane_gauges(EngineMetrics& m, pg::Connection& conn,
                                            const std::string& schema,
                                            const std::optional<std::vector<std::string>>& queues,
                                            std::optional<std::int64_t> cap);

// Sets both gauges of these lanes to 0: a process that stops refreshing them (it lost
// the maintenance leadership, or stopped) must not keep exposing its last values, or a
// sum over processes would count a queue twice.
void zero_lane_gauges(EngineMetrics& m, const std::vector<LaneLabels>& lanes);

}  // namespace awa::metrics
