// GET /api/throughput: completed and failed jobs per queue per minute, for the dashboard's
// overview chart (Admin::throughput; docs/api.md, "HTTP API").
#include <chrono>

#include "api.hpp"

namespace awa::serve::detail {

std::chrono::minutes rate_window(const Params& p, int default_minutes) {
  return std::chrono::minutes(
      p.integer("minutes", 1, kMaxRateWindowMinutes).value_or(default_minutes));
}

void add_rate_routes(Router& r) {
  r.get("/api/throughput", [](const httplib::Request& req, httplib::Response& res, Connection& conn,
                              const Admin& admin) {
    const Params p(req, {"minutes", "queue"});
    const Throughput t = admin.throughput(conn, rate_window(p, 60), p.text("queue"));
    auto queues = nlohmann::json::array();
    for (const auto& q : t.queues) {
      queues.push_back({{"queue", q.queue}, {"completed", q.completed}, {"failed", q.failed}});
    }
    send_json(res, 200,
              {{"minutes", t.minutes}, {"start", t.start}, {"queues", std::move(queues)}});
  });
}

}  // namespace awa::serve::detail
