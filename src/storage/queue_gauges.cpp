#include "storage/queue_gauges.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "awa/metrics.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/pg_array.hpp"

namespace awa::metrics {

std::vector<LaneLabels> refresh_lane_gauges(EngineMetrics& m, pg::Connection& conn,
                                            const std::string& schema,
                                            const std::optional<std::vector<std::string>>& queues,
                                            std::optional<std::int64_t> cap) {
  const auto quoted = sql::quote_schema(schema);
  std::optional<std::string> names;
  if (queues) {
    storage::ArrayLiteral arr;
    for (const auto& q : *queues) arr.add(q);
    names = std::move(arr).finish();
  }
  // Every lane is read exactly as it is now, so a lane that drained since the last
  // refresh is set back to 0 rather than left at a stale value.
  const auto rows = conn.exec(sql::render(sql::file("queries/metrics/lane_gauges.sql"), quoted),
                              pg::make_params(names, cap));
  std::vector<LaneLabels> lanes;
  lanes.reserve(static_cast<std::size_t>(rows.rows()));
  for (int r = 0; r < rows.rows(); ++r) {
    LaneLabels l{rows.get<std::string>(r, 0), std::to_string(rows.get<int>(r, 1)),
                 std::to_string(rows.get<int>(r, 2))};
    m.queue_lag.with({l[0], l[1], l[2]}).set(static_cast<double>(rows.get<std::int64_t>(r, 3)));
    m.queue_available.with({l[0], l[1], l[2]})
        .set(static_cast<double>(rows.get<std::int64_t>(r, 4)));
    lanes.push_back(std::move(l));
  }
  // Every queue with a lane or a waiting job: 0 for one that has none waiting any more.
  std::map<std::string, std::int64_t> waiting;
  for (const auto& l : lanes) waiting.emplace(l[0], 0);
  const auto w = conn.exec(sql::render(sql::file("queries/metrics/waiting_gauges.sql"), quoted),
                           pg::make_params(names));
  for (int r = 0; r < w.rows(); ++r) waiting[w.get<std::string>(r, 0)] = w.get<std::int64_t>(r, 1);
  for (const auto& [queue, n] : waiting) {
    m.queue_waiting.with({queue}).set(static_cast<double>(n));
    // a queue with waiting jobs and no lane yet: remembered for zero_lane_gauges
    if (std::none_of(lanes.begin(), lanes.end(),
                     [&](const LaneLabels& l) { return l[0] == queue; }))
      lanes.push_back(LaneLabels{queue, "", ""});
  }
  return lanes;
}

void zero_lane_gauges(EngineMetrics& m, const std::vector<LaneLabels>& lanes) {
  for (const auto& l : lanes) {
    m.queue_waiting.with({l[0]}).set(0.0);
    if (l[1].empty()) continue;  // a queue with waiting jobs only
    m.queue_lag.with({l[0], l[1], l[2]}).set(0.0);
    m.queue_available.with({l[0], l[1], l[2]}).set(0.0);
  }
}

void refresh_queue_gauges(awa::Connection& conn, const std::string& schema,
                          const std::vector<std::string>& queues, Registry& registry) {
  refresh_lane_gauges(engine_metrics(registry), pg::native(conn), schema, queues, std::nullopt);
}

}  // namespace awa::metrics
