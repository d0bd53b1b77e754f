// GET /api/dlq, POST /api/dlq/retry, POST /api/dlq/purge. Bulk retry and purge need a
// filter or all=true: Admin refuses an empty selection (400).
#include <chrono>

#include <fmt/format.h>

#include "api.hpp"
#include "awa/admin_json.hpp"

namespace awa::serve::detail {
namespace {

// 100 years: beyond it the interval arithmetic would overflow (as `awa dlq --older-than`).
constexpr std::int64_t kMaxAgeS = 3'155'760'000;

DlqFilter selection(const Params& p) {
  DlqFilter f;
  if (const auto id = p.text("id")) f.id = parse_job_id(*id);
  f.queue = p.text("queue");
  f.kind = p.text("kind");
  if (const auto s = p.integer("older_than_s", 0, kMaxAgeS))
    f.older_than = std::chrono::seconds(*s);
  return f;
}

}  // namespace

void add_dlq_routes(Router& r) {
  r.get("/api/dlq", [](const httplib::Request& req, httplib::Response& res, Connection& conn,
                       const Admin& admin) {
    const Params p(req, {"id", "queue", "kind", "older_than_s", "limit"});
    DlqFilter f = selection(p);
    f.limit = static_cast<int>(p.integer("limit", 1, 10000).value_or(100));
    auto out = nlohmann::json::array();
    for (const auto& e : admin.list_dlq(conn, f)) out.push_back(awa::json::of(e));
    send_json(res, 200, out);
  });
  r.post("/api/dlq/retry", [](const httplib::Request& req, httplib::Response& res, Connection& conn,
                              const Admin& admin) {
    const Params p(req, {"id", "queue", "kind", "older_than_s", "all"});
    DlqFilter f = selection(p);
    f.all = p.flag("all");
    const auto ids = admin.retry_dlq(conn, f);
    // One named dead letter that is not there is an error, as for `awa dlq retry ID`.
    if (f.id && ids.empty()) throw HttpError(404, fmt::format("job {} is not in the dlq", *f.id));
    send_json(res, 200, {{"retried", ids}});
  });
  r.post("/api/dlq/purge", [](const httplib::Request& req, httplib::Response& res, Connection& conn,
                              const Admin& admin) {
    const Params p(req, {"id", "queue", "kind", "older_than_s", "all"});
    DlqFilter f = selection(p);
    f.all = p.flag("all");
    const auto n = admin.purge_dlq(conn, f);
    if (f.id && n == 0) throw HttpError(404, fmt::format("job {} is not in the dlq", *f.id));
    send_json(res, 200, {{"purged", n}});
  });
}

}  // namespace awa::serve::detail
