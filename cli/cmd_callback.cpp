// awa callback complete|fail|heartbeat ID: an operator (or a script) answers a job that
// waits for an external callback, through awa::Admin — the same path as awa serve's
// signed POST /api/callbacks/... (docs/scheduling.md, "External callbacks").
// Exit status 1 when the callback is stale: no attempt waits on the id.
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

struct CallbackArgs {
  std::string id;
  std::string error = "failed by callback";
  std::optional<std::string> result;
  bool no_retry = false;
  std::int64_t timeout_s = 0;
  bool json = false;
};

int report(const std::string& id, std::optional<JobId> job, const std::string& state, bool json) {
  if (json) {
    nlohmann::json out{{"callback_id", id}, {"stale", !job.has_value()}};
    if (job) out["job_id"] = *job;
    if (!state.empty()) out["state"] = state;
    fmt::print("{}\n", out.dump());
  } else if (job) {
    fmt::print("callback {}: job {}{}{}\n", id, *job, state.empty() ? "" : " ", state);
  } else {
    fmt::print(stderr,
               "awa: callback {} is stale: no attempt waits on it (it ended already, or the id "
               "is unknown); nothing changed\n",
               id);
  }
  return job ? 0 : 1;
}

int run(const Context& ctx, const std::string& action, const CallbackArgs& a) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  if (action == "heartbeat") {
    std::optional<std::chrono::milliseconds> timeout;
    if (a.timeout_s > 0) timeout = std::chrono::seconds(a.timeout_s);
    return report(a.id, admin.heartbeat_external(conn, a.id, timeout), "", a.json);
  }
  const auto r = action == "complete" ? admin.complete_external(conn, a.id, a.result)
                                      : admin.fail_external(conn, a.id, a.error, !a.no_retry);
  return report(a.id, r.job_id, r.state, a.json);
}

}  // namespace

void add_callback(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "callback", "answer a job waiting for an external callback: complete, fail, heartbeat");
  cmd->require_subcommand(1);
  for (const char* action : {"complete", "fail", "heartbeat"}) {
    auto a = std::make_shared<CallbackArgs>();
    auto* sub = cmd->add_subcommand(action, std::string(action) + " the attempt waiting on ID");
    sub->add_option("id", a->id, "the callback id (a UUID)")->required();
    if (std::string(action) == "complete") {
      sub->add_option("--result", a->result,
                      "what the other system answered (JSON), kept on the completed job");
    }
    if (std::string(action) == "fail") {
      sub->add_option("--error", a->error, "the error kept on the job")->capture_default_str();
      sub->add_flag("--no-retry", a->no_retry, "fail for good instead of retrying");
    }
    if (std::string(action) == "heartbeat") {
      sub->add_option("--timeout-s", a->timeout_s, "move the callback timeout to now + this")
          ->check(CLI::Range(std::int64_t{1}, std::int64_t{3'155'760'000}));
    }
    sub->add_flag("--json", a->json, "print JSON");
    sub->callback([&ctx, a, action] {
      ctx.action = [&ctx, a, name = std::string(action)] { return run(ctx, name, *a); };
    });
  }
}

}  // namespace awa::cli
