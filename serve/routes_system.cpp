// GET /api/info (how this server runs: what the pages ask first), GET /api/storage (the
// rings, as `awa storage status --json`), GET /api/health (as `awa health --json`; 503
// when unhealthy, so probes can use it) and GET /api/runtime (the same, always 200).
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
  // The same body twice: /api/health answers 503 when unhealthy, for probes; the
  // dashboard reads /api/runtime, which answers 200 either way (a browser logs every
  // 5xx as a console error, and an absent leader is something to show, not a failure).
  for (const bool probe : {true, false}) {
    r.get(probe ? "/api/health" : "/api/runtime",
          [probe](const httplib::Request& req, httplib::Response& res, Connection& conn,
                  const Admin& admin) {
            const Params p(req, {"recent_s"});
            const auto recent = p.integer("recent_s", 1, 86400).value_or(30);
            const Health h = admin.health(conn, std::chrono::seconds(recent));
            auto body = awa::json::of(h);
            body["recent_s"] = recent;
            send_json(res, probe && !h.healthy ? 503 : 200, body);
          });
  }
}

}  // namespace awa::serve::detail
