// POST /api/callbacks/{id}/complete | fail | heartbeat: another system ends (or extends)
// an attempt that waits for it (docs/api.md, "Callbacks"; docs/scheduling.md). Signed
// with the callback secret (awa/callback.hpp), not the dashboard's token: the signature
// covers the path (the id and the action), the query and the body, which are all these
// handlers read, and each signed request is accepted once (Router::post_signed).
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api.hpp"

namespace awa::serve::detail {
namespace {

// 409: no open attempt waits on the id. The other system should stop retrying: the job
// ended (a duplicate or late callback, a timeout, a cancel) or the id is unknown.
[[noreturn]] void stale(const std::string& id) {
  throw HttpError(409,
                  fmt::format("stale: no attempt waits on callback {} (it ended already: a "
                              "duplicate or late callback, a timeout or a cancel; or the id is "
                              "unknown); nothing changed",
                              id),
                  {{"stale", true}});
}

// The completion's body: empty, or a JSON object whose only member is "result" (any JSON
// value: what the other system answered, kept on the job). Params takes scalars only.
std::optional<std::string> completion_result(const httplib::Request& req) {
  if (!req.params.empty())
    throw HttpError(400, fmt::format("unknown parameter \"{}\"", req.params.begin()->first));
  if (req.body.empty()) return std::nullopt;
  if (req.get_header_value("Content-Type").rfind("application/json", 0) != 0)
    throw HttpError(400, "a completion's body must be JSON (Content-Type: application/json)");
  const auto body = nlohmann::json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    throw HttpError(400, "the body must be a JSON object");
  for (const auto& [name, value] : body.items()) {
    if (name != "result") throw HttpError(400, fmt::format("unknown parameter \"{}\"", name));
  }
  const auto it = body.find("result");
  if (it == body.end()) return std::nullopt;
  return it->dump();
}

void send_result(httplib::Response& res, const std::string& id, const CallbackResult& r) {
  if (r.stale()) stale(id);
  send_json(res, 200, {{"callback_id", id}, {"job_id", *r.job_id}, {"state", r.state}});
}

}  // namespace

void add_callback_routes(Router& r) {
  r.post_signed("/api/callbacks/([^/]+)/complete",
                [](const httplib::Request& req, httplib::Response& res, Connection& conn,
                   const Admin& admin) {
                  const auto result = completion_result(req);
                  const std::string id = req.matches[1];
                  send_result(res, id, admin.complete_external(conn, id, result));
                });
  r.post_signed("/api/callbacks/([^/]+)/fail", [](const httplib::Request& req,
                                                  httplib::Response& res, Connection& conn,
                                                  const Admin& admin) {
    const Params p(req, {"error", "retryable"});
    const std::string id = req.matches[1];
    const bool retryable = !p.text("retryable") || p.flag("retryable");
    send_result(
        res, id,
        admin.fail_external(conn, id, p.text("error").value_or("failed by callback"), retryable));
  });
  r.post_signed("/api/callbacks/([^/]+)/heartbeat",
                [](const httplib::Request& req, httplib::Response& res, Connection& conn,
                   const Admin& admin) {
                  const Params p(req, {"timeout_s"});
                  const std::string id = req.matches[1];
                  std::optional<std::chrono::milliseconds> timeout;
                  if (const auto s = p.integer("timeout_s", 1, 3'155'760'000))
                    timeout = std::chrono::seconds(*s);
                  const auto job = admin.heartbeat_external(conn, id, timeout);
                  if (!job) stale(id);
                  send_json(res, 200, {{"callback_id", id}, {"job_id", *job}});
                });
}

}  // namespace awa::serve::detail
