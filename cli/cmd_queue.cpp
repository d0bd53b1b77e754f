#include <iostream>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

int set_shards(const Context& ctx, const std::string& queue, int shards) {
  const Admin admin(ctx.schema);  // checks the schema name before connecting
  auto conn = Connection::connect(ctx.require_database_url());
  try {
    admin.set_enqueue_shards(conn, queue, shards);
  } catch (const ConstraintViolation& e) {
    if (e.sqlstate() != "23514") throw;
    // The CHECK constraint is the authority; say what it means in the operator's terms.
    throw ConstraintViolation(
        fmt::format("enqueue_shards must be between 1 and 64 (got {}); queue {} unchanged", shards,
                    queue),
        e.retry(), e.sqlstate(), e.detail(), e.hint());
  }
  fmt::print("queue {}: enqueue_shards = {}\n", queue, shards);
  fmt::print(
      "note: running producers keep their cached shard count until they call reset() or "
      "restart; rows already on other shards keep draining.\n");
  return 0;
}

int show_shards(const Context& ctx, const std::string& queue, bool json) {
  const Admin admin(ctx.schema);
  auto conn = Connection::connect(ctx.require_database_url());
  const std::vector<ShardLag> lanes = admin.queue_shards(conn, queue);
  if (json) {
    auto out = nlohmann::json::array();
    for (const auto& l : lanes) {
      out.push_back({{"priority", l.priority},
                     {"enqueue_shard", l.enqueue_shard},
                     {"enqueue_cursor", l.enqueue_cursor},
                     {"claim_cursor", l.claim_cursor},
                     {"lag", l.lag},
                     {"available", l.available}});
    }
    fmt::print("{}\n", out.dump());
    return 0;
  }
  if (lanes.empty()) {
    fmt::print("queue {} has no lanes yet\n", queue);
    return 0;
  }
  fmt::print("{:>8} {:>13} {:>15} {:>13} {:>10} {:>10}\n", "priority", "enqueue_shard",
             "enqueue_cursor", "claim_cursor", "lag", "available");
  for (const auto& l : lanes) {
    fmt::print("{:>8} {:>13} {:>15} {:>13} {:>10} {:>10}\n", l.priority, l.enqueue_shard,
               l.enqueue_cursor, l.claim_cursor, l.lag, l.available);
  }
  return 0;
}

}  // namespace

void add_queue(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("queue", "queue settings and inspection");
  cmd->require_subcommand(1);

  auto queue = std::make_shared<std::string>();
  auto shards = std::make_shared<int>(1);
  auto* set = cmd->add_subcommand("set-shards", "set a queue's enqueue_shards (1..64)");
  set->add_option("queue", *queue, "queue")->required();
  set->add_option("shards", *shards, "shard count, 1..64")->required();
  set->callback([&ctx, queue, shards] {
    ctx.action = [&ctx, queue, shards] { return set_shards(ctx, *queue, *shards); };
  });

  auto json = std::make_shared<bool>(false);
  auto* show = cmd->add_subcommand(
      "shards", "per (priority, enqueue_shard): enqueue cursor, claim cursor, lag (exact)");
  show->add_option("queue", *queue, "queue")->required();
  show->add_flag("--json", *json, "print JSON");
  show->callback([&ctx, queue, json] {
    ctx.action = [&ctx, queue, json] { return show_shards(ctx, *queue, *json); };
  });
}

}  // namespace awa::cli
