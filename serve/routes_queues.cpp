// GET /api/queues, GET /api/queues/{queue}, GET /api/queues/{queue}/shards (lanes, with
// their claims per minute), POST /api/queues/{queue}/pause|resume.
#include <map>
#include <utility>

#include <fmt/format.h>

#include "api.hpp"

namespace awa::serve::detail {
namespace {

template <typename T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The counts at the top level (a table row per queue); the settings nested.
nlohmann::json queue_json(const QueueSummary& q) {
  const QueueSettings& s = q.settings;
  const QueueCounts& c = q.counts;
  return {{"queue", s.queue},
          {"paused", s.paused},
          {"waiting", c.waiting},
          {"available", c.available},
          {"running", c.running},
          {"scheduled", c.scheduled},
          {"retryable", c.retryable},
          {"completed", c.completed},
          {"failed", c.failed},
          {"cancelled", c.cancelled},
          {"dlq", c.dlq},
          {"oldest_available_age_s", opt(q.oldest_available_age_s)},
          {"settings",
           {{"configured", s.configured},
            {"enqueue_shards", s.enqueue_shards},
            {"dlq_enabled", s.dlq_enabled},
            {"priority_aging_ms", opt(s.priority_aging_ms)},
            {"deadline_ms", opt(s.deadline_ms)},
            {"max_workers_hint", opt(s.max_workers_hint)},
            {"max_rate", opt(s.max_rate)},
            {"burst", opt(s.burst)},
            {"global_max_workers", opt(s.global_max_workers)}}}};
}

// The summary of a queue the schema knows; 404 otherwise (400 for an invalid name, from
// Admin's validation).
QueueSummary known_queue(Connection& conn, const Admin& admin, const std::string& queue) {
  auto q = admin.queue_summary(conn, queue);
  if (!q.known) {
    throw HttpError(404, fmt::format("queue {} not found: it has no settings, lanes, deferred "
                                     "jobs or dead letters",
                                     queue));
  }
  return q;
}

// Queue names are A-Z a-z 0-9 _ . : - ; anything else in the segment reaches Admin's
// validation and is a 400.
constexpr const char* kQueue = "/api/queues/([^/]+)";

}  // namespace

void add_queue_routes(Router& r) {
  r.get("/api/queues", [](const httplib::Request& req, httplib::Response& res, Connection& conn,
                          const Admin& admin) {
    const Params p(req, {});
    auto out = nlohmann::json::array();
    for (const auto& q : admin.list_queues(conn)) out.push_back(queue_json(q));
    send_json(res, 200, out);
  });
  r.get(kQueue, [](const httplib::Request& req, httplib::Response& res, Connection& conn,
                   const Admin& admin) {
    const Params p(req, {});
    send_json(res, 200, queue_json(known_queue(conn, admin, req.matches[1])));
  });
  r.get(std::string(kQueue) + "/shards", [](const httplib::Request& req, httplib::Response& res,
                                            Connection& conn, const Admin& admin) {
    const Params p(req, {"minutes"});
    const auto window = rate_window(p, 15);
    const auto q = known_queue(conn, admin, req.matches[1]);
    const ShardClaims claims = admin.shard_claims(conn, q.settings.queue, window);
    const std::vector<std::int64_t> none(static_cast<std::size_t>(claims.minutes), 0);
    // Per shard, summed over priorities: every shard of the current count, and any other
    // that has lanes (left over from a larger count) or claims.
    std::map<int, std::vector<std::int64_t>> by_shard;
    for (int s = 0; s < q.settings.enqueue_shards; ++s) by_shard.emplace(s, none);
    std::map<std::pair<int, int>, const std::vector<std::int64_t>*> by_lane;
    for (const auto& l : claims.lanes) {
      by_lane.emplace(std::pair(l.priority, l.enqueue_shard), &l.claims);
      auto& sum = by_shard.try_emplace(l.enqueue_shard, none).first->second;
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += l.claims[i];
    }
    auto lanes = nlohmann::json::array();
    for (const auto& l : admin.queue_shards(conn, q.settings.queue)) {
      by_shard.try_emplace(l.enqueue_shard, none);
      const auto c = by_lane.find(std::pair(l.priority, l.enqueue_shard));
      lanes.push_back({{"priority", l.priority},
                       {"enqueue_shard", l.enqueue_shard},
                       {"enqueue_cursor", l.enqueue_cursor},
                       {"claim_cursor", l.claim_cursor},
                       {"lag", l.lag},
                       {"available", l.available},
                       {"claims", c == by_lane.end() ? none : *c->second}});
    }
    auto shard_claims = nlohmann::json::array();
    for (const auto& [shard, sum] : by_shard) {
      shard_claims.push_back({{"enqueue_shard", shard}, {"claims", sum}});
    }
    send_json(res, 200,
              {{"queue", q.settings.queue},
               {"enqueue_shards", q.settings.enqueue_shards},
               {"minutes", claims.minutes},
               {"start", claims.start},
               {"lanes", std::move(lanes)},
               {"shard_claims", std::move(shard_claims)}});
  });
  for (const bool pause : {true, false}) {
    r.post(std::string(kQueue) + (pause ? "/pause" : "/resume"),
           [pause](const httplib::Request& req, httplib::Response& res, Connection& conn,
                   const Admin& admin) {
             const Params p(req, {});
             const std::string queue = req.matches[1];
             // Only queues the schema knows: a typo must not create a paused queue.
             // `awa queue pause` can pause a queue before its first job.
             known_queue(conn, admin, queue);
             if (pause) {
               admin.pause_queue(conn, queue);
             } else {
               admin.resume_queue(conn, queue);
             }
             send_json(res, 200, queue_json(admin.queue_summary(conn, queue)));
           });
  }
}

}  // namespace awa::serve::detail
