// awa storage status|rotate|prune: the storage rings (docs/design/rings.md).
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/admin_json.hpp"
#include "awa/connection.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

nlohmann::json status_json(const std::vector<RingStatus>& rings) {
  auto out = nlohmann::json{{"rings", nlohmann::json::array()}, {"last_prune", nullptr}};
  const RingStatus* newest = nullptr;
  for (const auto& r : rings) {
    out["rings"].push_back(awa::json::of(r));
    // ISO 8601 UTC text of one format: string order is time order.
    if (r.last_prune && (!newest || r.last_prune->at > newest->last_prune->at)) newest = &r;
  }
  if (newest) {
    auto j = awa::json::of(*newest)["last_prune"];
    j["ring"] = newest->ring;
    out["last_prune"] = std::move(j);
  }
  return out;
}

int status(const Context& ctx, bool json) {
  auto conn = ctx.connect();
  const auto rings = Admin(ctx.schema).storage_status(conn);
  if (json) {
    fmt::print("{}\n", status_json(rings).dump());
    return 0;
  }
  for (const auto& r : rings) {
    fmt::print("{} ring: current slot {}, generation {}\n", r.ring, r.current_slot, r.generation);
    for (const auto& s : r.slots) {
      fmt::print("  slot {:>2}  {:<7}  generation {:>6}  rows {}\n", s.slot, s.state,
                 s.generation < 0 ? std::string("-") : std::to_string(s.generation), s.rows);
    }
    if (r.ring == "queue") fmt::print("  keep slot rows {}\n", r.kept_rows);
    if (r.last_rotation) {
      fmt::print("  last rotation: {} (generation {})\n", r.last_rotation->at,
                 r.last_rotation->generation);
    }
    if (r.last_prune) {
      fmt::print("  last prune:    {} (generation {}, slot {}: {} rows removed, {} carried)\n",
                 r.last_prune->at, r.last_prune->generation, r.last_prune->slot,
                 r.last_prune->rows_removed, r.last_prune->rows_carried);
    }
    if (r.last_rotate_skip) {
      fmt::print("  rotation skipped since {}: {}\n", r.last_rotate_skip->at,
                 r.last_rotate_skip->reason);
    }
    if (r.last_prune_skip) {
      fmt::print("  prune skipped since {}: {}\n", r.last_prune_skip->at,
                 r.last_prune_skip->reason);
    }
  }
  return 0;
}

std::vector<std::string> rings_of(const std::string& ring) {
  if (!ring.empty()) return {ring};
  return {std::begin(kRings), std::end(kRings)};
}

// Exit status 0 when the action was done on at least one ring, 3 when every ring skipped
// it (a skip is not an error: the reason says why, and a later try may succeed).
int act(const Context& ctx, const std::string& ring, bool prune, bool carry, long retention_s) {
  auto conn = ctx.connect();
  const Admin admin(ctx.schema);
  bool any = false;
  for (const auto& r : rings_of(ring)) {
    const auto a = prune ? admin.prune(conn, r, carry, std::chrono::seconds(retention_s))
                         : admin.rotate(conn, r);
    any = any || a.done;
    if (!a.done) {
      fmt::print("{} ring: {} skipped: {}\n", r, prune ? "prune" : "rotation", a.reason);
    } else if (prune) {
      fmt::print("{} ring: pruned generation {} (slot {}): {} rows removed, {} carried forward\n",
                 r, a.generation, a.slot, a.rows_removed, a.rows_carried);
    } else {
      fmt::print("{} ring: rotated to generation {} (slot {})\n", r, a.generation, a.slot);
    }
  }
  return any ? 0 : 3;
}

}  // namespace

void add_storage(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("storage", "storage rings: status, rotate, prune");
  cmd->require_subcommand(1);

  auto json = std::make_shared<bool>(false);
  auto* st =
      cmd->add_subcommand("status", "per ring: current slot, generation, slots, last events");
  st->add_flag("--json", *json, "print JSON");
  st->callback([&ctx, json] { ctx.action = [&ctx, json] { return status(ctx, *json); }; });

  auto ring = std::make_shared<std::string>();
  const auto ring_check = CLI::IsMember({"queue", "claim", "lease"});
  auto* rot = cmd->add_subcommand("rotate", "advance ring(s) to the next slot (exit 3: skipped)");
  rot->add_option("--ring", *ring, "queue, claim or lease (default: all)")->check(ring_check);
  rot->callback(
      [&ctx, ring] { ctx.action = [&ctx, ring] { return act(ctx, *ring, false, false, 0); }; });

  auto carry = std::make_shared<bool>(false);
  auto retention = std::make_shared<long>(72 * 3600);
  auto* pr = cmd->add_subcommand("prune", "truncate the oldest sealed slot (exit 3: skipped)");
  pr->add_option("--ring", *ring, "queue, claim or lease (default: all)")->check(ring_check);
  pr->add_flag("--carry", *carry, "copy live work forward instead of refusing the slot");
  pr->add_option("--failed-retention-s", *retention, "keep failed jobs at least this long")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  pr->callback([&ctx, ring, carry, retention] {
    ctx.action = [&ctx, ring, carry, retention] {
      return act(ctx, *ring, true, *carry, *retention);
    };
  });
}

}  // namespace awa::cli
