// GET /api/jobs, GET /api/jobs/{id}, POST /api/jobs/{id}/cancel|retry.
#include <fmt/format.h>

#include "api.hpp"

namespace awa::serve::detail {
namespace {

nlohmann::json parse_or_text(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? nlohmann::json(text) : j;
}

nlohmann::json opt(const std::optional<int>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json summary_json(const JobSummary& s) {
  return {{"id", s.id},
          {"state", s.state},
          {"queue", s.queue},
          {"kind", s.kind},
          {"priority", s.priority},
          {"attempt", s.attempt},
          {"max_attempts", s.max_attempts},
          {"enqueue_shard", opt(s.enqueue_shard)},
          {"created_at", s.created_at},
          {"run_at", s.run_at}};
}

nlohmann::json detail_json(const JobDetail& d) {
  auto j = summary_json(d.summary);
  j["args"] = parse_or_text(d.args_json);
  j["metadata"] = parse_or_text(d.metadata_json);
  j["tags"] = d.tags;
  j["ordering_key"] = d.ordering_key ? nlohmann::json(*d.ordering_key) : nlohmann::json(nullptr);
  j["lane_seq"] = d.lane_seq ? nlohmann::json(*d.lane_seq) : nlohmann::json(nullptr);
  j["run_lease"] = d.run_lease;
  j["errors"] = nlohmann::json::array();
  for (const auto& e : d.errors) {
    j["errors"].push_back({{"attempt", e.attempt}, {"at", e.at}, {"error", e.error}});
  }
  j["progress"] = d.progress_json ? parse_or_text(*d.progress_json) : nlohmann::json(nullptr);
  j["timeline"] = nlohmann::json::array();
  for (const auto& e : d.timeline) {
    j["timeline"].push_back({{"at", e.at.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.at)},
                             {"event", e.event},
                             {"attempt", e.attempt},
                             {"enqueue_shard", opt(e.enqueue_shard)},
                             {"detail", e.detail}});
  }
  return j;
}

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
    for (const auto& s : jobs) out.push_back(summary_json(s));
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
    send_json(res, 200, detail_json(*d));
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
