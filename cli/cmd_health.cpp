// awa health [--json] [--recent SECONDS]: is this schema's queue being served? Exit 0
// when healthy, 1 when not (the problems are printed) or when the database cannot be
// reached, so the command works as a Kubernetes liveness or readiness probe.
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/admin_json.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

nlohmann::json health_json(const Context& ctx, const Health& h, std::int64_t recent) {
  auto j = awa::json::of(h);
  j["can_connect"] = true;
  j["schema"] = ctx.schema;
  j["recent_s"] = recent;
  return j;
}

void print_text(const Context& ctx, const Health& h, std::int64_t recent) {
  fmt::print("{}\n", h.healthy ? "healthy" : "UNHEALTHY");
  fmt::print("schema:  {} at version {} (this build: {})\n", ctx.schema, h.schema_version,
             h.expected_schema_version);
  const WorkerInstance* leader = nullptr;
  for (const auto& w : h.workers) {
    if (w.is_leader) leader = &w;
  }
  if (!h.leader_present) {
    fmt::print("leader:  none\n");
  } else {
    fmt::print("leader:  {}last round {}\n",
               leader ? fmt::format("{} pid {}, ", leader->hostname, leader->pid) : "",
               h.leader_tick_age_s ? fmt::format("{:.1f} s ago", *h.leader_tick_age_s) : "never");
  }
  fmt::print("workers: {} seen in the last {} s\n", h.workers.size(), recent);
  for (const auto& w : h.workers) {
    std::string queues;
    for (const auto& q : w.queues) queues += (queues.empty() ? "" : ", ") + q;
    fmt::print("  {} pid {}{}  queues [{}]  since {}  last seen {}\n", w.hostname, w.pid,
               w.is_leader ? " (leader)" : "", queues, w.started_at, w.last_seen_at);
  }
  if (!h.queues.empty()) {
    fmt::print("oldest available job per queue:\n");
    for (const auto& q : h.queues) {
      fmt::print("  {}  {}\n", q.queue,
                 q.oldest_available_age_s ? fmt::format("{:.1f} s", *q.oldest_available_age_s)
                                          : std::string("none available"));
    }
  }
  for (const auto& p : h.problems) fmt::print("problem: {}\n", p);
}

int health(const Context& ctx, bool json, std::int64_t recent) {
  const Admin admin(ctx.schema);  // checks the schema name before connecting
  std::optional<Connection> conn;
  try {
    conn.emplace(ctx.connect());
  } catch (const ConnectionError& e) {
    // A probe's answer, not a usage error: unhealthy, exit 1. connect() leaves any
    // password out of its message.
    if (!json) throw;
    fmt::print("{}\n", nlohmann::json{{"healthy", false},
                                      {"can_connect", false},
                                      {"schema", ctx.schema},
                                      {"problems", {fmt::format("cannot connect: {}", e.what())}}}
                           .dump());
    return 1;
  }
  const Health h = admin.health(*conn, std::chrono::seconds(recent));
  if (json) {
    fmt::print("{}\n", health_json(ctx, h, recent).dump());
  } else {
    print_text(ctx, h, recent);
  }
  return h.healthy ? 0 : 1;
}

}  // namespace

void add_health(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "health",
      "schema version, maintenance leader, live workers, oldest available job per queue; "
      "exit 0 healthy, 1 unhealthy or unreachable (fit for a probe)");
  auto json = std::make_shared<bool>(false);
  auto recent = std::make_shared<std::int64_t>(30);
  cmd->add_flag("--json", *json, "print JSON");
  cmd->add_option("--recent", *recent,
                  "seconds within which a worker must have been seen and the leader must have "
                  "finished a maintenance round")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{86400}))
      ->capture_default_str();
  cmd->callback([&ctx, json, recent] {
    ctx.action = [&ctx, json, recent] { return health(ctx, *json, *recent); };
  });
}

}  // namespace awa::cli
