// GET /api/jobs, GET /api/jobs/{id}, POST /api/jobs/{id}/cancel|retry.
#include <fmt/format.h>

#include "api.hpp"
#include "awa/admin_json.hpp"

namespace awa::serve::detail {
namespace {

HttpError not_found(JobId id) {
  return HttpError(404, fmt::format("job {} not found (never existed, or pruned)", id));
}

}  // namespace

void add_job_routes(Router& r) {
  r.get("/api/jobs", [](const httplib::Request& req, httplib::Response& res, Connection& conn,
                        const Admin& admin) {
    const Params p(req, {"queue", "state", "kind", "limit", "after"});
    JobFilter f;
    f.queue = p.text("queue");
    f.state = p.text("state");
    f.kind = p.text("kind");
    f.limit = static_cast<int>(p.integer("limit", 1, 10000).value_or(100));
    f.after = p.integer("after", 0, INT64_MAX);
    const auto jobs = admin.list_jobs(conn, f);
    auto out = nlohmann::json::array();
    for (const auto& s : jobs) out.push_back(awa::json::of(s));
    // A full page may have a next one: its `after` is the last id shown.
    const bool full = jobs.size() == static_cast<std::size_t>(f.limit);
    send_json(res, 200,
              {{"jobs", std::move(out)},
               {"next_after", full ? nlohmann::json(jobs.back().id) : nlohmann::json(nullptr)}});
  });
  r.get("/api/jobs/([^/]+)", [](const httplib::Request& req, httplib::Response& res,
                                Connection& conn, const Admin& admin) {
    const Params p(req, {});
    const JobId id = parse_job_id(req.matches[1]);
    const auto d = admin.job(conn, id);
    if (!d) throw not_found(id);
    send_json(res, 200, awa::json::of(*d));
  });
  r.post("/api/jobs/([^/]+)/cancel", [](const httplib::Request& req, httplib::Response& res,
                                        Connection& conn, const Admin& admin) {
    const Params p(req, {});
    const JobId id = parse_job_id(req.matches[1]);
    const std::string found = admin.cancel_job(conn, id);
    if (found == "missing") throw not_found(id);
    if (found == "finished") {
      throw HttpError(409, fmt::format("job {} has already finished", id),
                      {{"id", id}, {"state", found}});
    }
    send_json(res, 200, {{"id", id}, {"state", found}, {"outcome", "cancelled"}});
  });
  r.post("/api/jobs/([^/]+)/retry", [](const httplib::Request& req, httplib::Response& res,
                                       Connection& conn, const Admin& admin) {
    const Params p(req, {});
    const JobId id = parse_job_id(req.matches[1]);
    const JobAction a = admin.retry_job(conn, id);
    const nlohmann::json body{{"id", a.id}, {"state", a.state}, {"outcome", a.outcome}};
    if (a.outcome == "not_found") throw not_found(id);
    if (a.outcome != "retried") {
      throw HttpError(409,
                      fmt::format("job {} is {}: only failed, cancelled or dead-lettered jobs can "
                                  "be retried",
                                  id, a.state),
                      body);
    }
    send_json(res, 200, body);
  });
}

}  // namespace awa::serve::detail
