// GET /api/info (how this server runs: what the pages ask first), GET /api/storage (the
// rings, as `awa storage status --json`) and GET /api/health (as `awa health --json`;
// 503 when unhealthy, so probes can use it).
#include "api.hpp"
#include "awa/admin_json.hpp"

namespace awa::serve::detail {
namespace {

nlohmann::json storage_json(const std::vector<RingStatus>& rings) {
  auto out = nlohmann::json{{"rings", nlohmann::json::array()}};
  for (const auto& r : rings) out["rings"].push_back(awa::json::of(r));
  return out;
}

}  // namespace

void add_system_routes(Router& r) {
  r.get("/api/info",
        [&r](const httplib::Request& req, httplib::Response& res, Connection&, const Admin&) {
          const Params p(req, {});
          const ServerOptions& o = r.server_options();
          send_json(res, 200,
                    {{"read_only", o.read_only},
                     {"token_required", o.token.has_value()},
                     {"schema", o.schema},
                     {"version", AWA_VERSION}});
        });
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
    auto body = awa::json::of(h);
    body["recent_s"] = recent;
    send_json(res, h.healthy ? 200 : 503, body);
  });
}

}  // namespace awa::serve::detail
