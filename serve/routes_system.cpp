// GET /api/storage (the rings, as `awa storage status --json`) and GET /api/health (as
// `awa health --json`; 503 when unhealthy, so probes can use it).
#include "api.hpp"

namespace awa::serve::detail {
namespace {

nlohmann::json event_json(const std::optional<RingEvent>& e, bool with_rows, bool with_reason) {
  if (!e) return nullptr;
  nlohmann::json j{{"at", e->at}};
  if (!with_reason) {
    j["generation"] = e->generation;
    j["slot"] = e->slot;
  }
  if (with_rows) {
    j["rows_removed"] = e->rows_removed;
    j["rows_carried"] = e->rows_carried;
  }
  if (with_reason) j["reason"] = e->reason;
  return j;
}

nlohmann::json storage_json(const std::vector<RingStatus>& rings) {
  auto out = nlohmann::json{{"rings", nlohmann::json::array()}};
  for (const auto& r : rings) {
    auto slots = nlohmann::json::array();
    for (const auto& s : r.slots) {
      slots.push_back(
          {{"slot", s.slot}, {"state", s.state}, {"generation", s.generation}, {"rows", s.rows}});
    }
    out["rings"].push_back({{"ring", r.ring},
                            {"current_slot", r.current_slot},
                            {"generation", r.generation},
                            {"slots", std::move(slots)},
                            {"last_rotation", event_json(r.last_rotation, false, false)},
                            {"last_prune", event_json(r.last_prune, true, false)},
                            {"rotate_skipped", event_json(r.last_rotate_skip, false, true)},
                            {"prune_skipped", event_json(r.last_prune_skip, false, true)}});
  }
  return out;
}

nlohmann::json opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json health_json(const Health& h) {
  auto workers = nlohmann::json::array();
  for (const auto& w : h.workers) {
    workers.push_back({{"instance_id", w.instance_id},
                       {"hostname", w.hostname},
                       {"pid", w.pid},
                       {"queues", w.queues},
                       {"started_at", w.started_at},
                       {"last_seen_at", w.last_seen_at},
                       {"is_leader", w.is_leader}});
  }
  auto queues = nlohmann::json::array();
  for (const auto& q : h.queues) {
    queues.push_back(
        {{"queue", q.queue}, {"oldest_available_age_s", opt(q.oldest_available_age_s)}});
  }
  return {{"healthy", h.healthy},
          {"schema_version", h.schema_version},
          {"expected_schema_version", h.expected_schema_version},
          {"leader_present", h.leader_present},
          {"leader_tick_age_s", opt(h.leader_tick_age_s)},
          {"workers", std::move(workers)},
          {"queues", std::move(queues)},
          {"problems", h.problems}};
}

}  // namespace

void add_system_routes(Router& r) {
  r.get("/api/storage", [](const httplib::Request& req, httplib::Response& res, Connection& conn,
                           const Admin& admin) {
    const Params p(req, {});
    send_json(res, 200, storage_json(admin.storage_status(conn)));
  });
  r.get("/api/health", [](const httplib::Request& req, httplib::Response& res, Connection& conn,
                          const Admin& admin) {
    const Params p(req, {"recent_s"});
    const auto recent = p.integer("recent_s", 1, 86400).value_or(30);
    const Health h = admin.health(conn, std::chrono::seconds(recent));
    auto body = health_json(h);
    body["recent_s"] = recent;
    send_json(res, h.healthy ? 200 : 503, body);
  });
}

}  // namespace awa::serve::detail
