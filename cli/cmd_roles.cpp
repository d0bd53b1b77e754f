// awa roles setup: the least-privilege roles (Admin::setup_roles).
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

struct RolesArgs {
  std::string prefix = "awa";
  bool json = false;
};

int setup(const Context& ctx, const RolesArgs& a) {
  auto conn = ctx.connect();
  const auto report = Admin(ctx.schema).setup_roles(conn, a.prefix);
  if (a.json) {
    auto roles = nlohmann::json::array();
    for (const auto& r : report.roles) {
      auto grants = nlohmann::json::array();
      for (const auto& g : r.grants) {
        grants.push_back({{"kind", g.kind}, {"privileges", g.privileges}, {"objects", g.objects}});
      }
      roles.push_back({{"role", r.role}, {"created", r.created}, {"grants", std::move(grants)}});
    }
    fmt::print("{}\n", nlohmann::json{{"schema", report.schema}, {"roles", roles}}.dump());
    return 0;
  }
  for (const auto& r : report.roles) {
    fmt::print("{} ({} NOLOGIN role) in schema {}:\n", r.role, r.created ? "created" : "updated",
               report.schema);
    for (const auto& g : r.grants) {
      fmt::print("  {:<10} {:<40} {}\n", g.kind, g.privileges, g.objects);
    }
  }
  fmt::print("grant them to login roles, e.g. GRANT {} TO my_service;\n",
             report.roles.front().role);
  return 0;
}

}  // namespace

void add_roles(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("roles", "least-privilege database roles");
  cmd->require_subcommand(1);
  auto a = std::make_shared<RolesArgs>();
  auto* st = cmd->add_subcommand(
      "setup",
      "create or update the NOLOGIN roles PREFIX_producer (enqueue only), PREFIX_worker "
      "(claim, complete, heartbeat, maintenance) and PREFIX_admin (queue settings too), and "
      "grant them their privileges in --schema; run as the schema owner, again after migrate");
  st->add_option("--prefix", a->prefix, "role name prefix (lower-case letters, digits, _)")
      ->capture_default_str();
  st->add_flag("--json", a->json, "print JSON");
  st->callback([&ctx, a] { ctx.action = [&ctx, a] { return setup(ctx, *a); }; });
}

}  // namespace awa::cli
