// awa queue follow-up|follow-ups: the jobs a queue enqueues when one of its jobs ends
// (WorkflowAdmin, include/awa/workflows.hpp; docs/workflows.md, "Follow-up jobs").
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/connection.hpp"
#include "awa/workflows.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

// `awa queue follow-up`'s options: set (kind given) or remove (--clear) one trigger's job.
struct FollowUpArgs {
  std::string queue;
  std::string on;
  std::optional<std::string> kind;
  std::optional<std::string> to_queue;
  bool clear = false;
  bool json = false;
};

void print_follow_ups(const std::vector<QueueFollowUp>& follow_ups,
                      const std::optional<std::string>& queue) {
  if (follow_ups.empty()) {
    fmt::print("{}\n", queue ? fmt::format("queue {} has no follow-up jobs", *queue)
                             : std::string("no queue has follow-up jobs"));
    return;
  }
  fmt::print("{:<24} {:<10} {:<24} {}\n", "queue", "on", "kind", "to queue");
  for (const auto& f : follow_ups) {
    fmt::print("{:<24} {:<10} {:<24} {}\n", f.source_queue, follow_up_on_name(f.on), f.kind,
               f.queue);
  }
}

nlohmann::json follow_ups_json(const std::vector<QueueFollowUp>& follow_ups) {
  auto out = nlohmann::json::array();
  for (const auto& f : follow_ups) out.push_back(to_json(f));
  return out;
}

int set_follow_up(const Context& ctx, const FollowUpArgs& a) {
  const WorkflowAdmin workflows(ctx.schema);
  const FollowUpOn on = a.on == "exhausted" ? FollowUpOn::kExhausted : FollowUpOn::kCompleted;
  auto conn = ctx.connect();
  const auto now = a.clear ? workflows.clear_queue_follow_up(conn, a.queue, on)
                           : workflows.set_queue_follow_up(conn, a.queue, on, *a.kind, a.to_queue);
  if (a.json) {
    fmt::print("{}\n", json_text(follow_ups_json(now)));
    return 0;
  }
  if (a.clear) {
    fmt::print("queue {}: no follow-up job on {} any more\n", a.queue, a.on);
  } else {
    fmt::print("queue {}: each job that ends {} enqueues a job of kind {} on queue {}\n", a.queue,
               a.on, *a.kind, a.to_queue.value_or(a.queue));
  }
  print_follow_ups(now, a.queue);
  return 0;
}

int show_follow_ups(const Context& ctx, const std::optional<std::string>& queue, bool json) {
  const WorkflowAdmin workflows(ctx.schema);
  auto conn = ctx.connect();
  const auto follow_ups = workflows.queue_follow_ups(conn, queue);
  if (json) {
    fmt::print("{}\n", json_text(follow_ups_json(follow_ups)));
    return 0;
  }
  print_follow_ups(follow_ups, queue);
  return 0;
}

}  // namespace

void add_queue_follow_ups(CLI::App& cmd, Context& ctx) {
  auto fu = std::make_shared<FollowUpArgs>();
  auto* follow = cmd.add_subcommand(
      "follow-up",
      "set (--kind) or remove (--clear) the job a queue enqueues when one of its jobs ends: "
      "completed, or exhausted (failed or dead-lettered for good)");
  follow->add_option("queue", fu->queue, "queue whose jobs trigger it")->required();
  follow->add_option("--on", fu->on, "the end that triggers it: completed or exhausted")
      ->required()
      ->check(CLI::IsMember({"completed", "exhausted"}));
  auto* kind = follow->add_option("--kind", fu->kind, "kind of the job to enqueue");
  follow->add_option("--to-queue", fu->to_queue, "queue of the job to enqueue (default: QUEUE)")
      ->needs(kind);
  follow->add_flag("--clear", fu->clear, "remove the queue's follow-up for --on")->excludes(kind);
  follow->add_flag("--json", fu->json, "print the queue's follow-ups afterwards as JSON");
  follow->callback([&ctx, fu] {
    if (!fu->kind && !fu->clear) {
      throw CLI::ValidationError("give --kind KIND to set the follow-up, or --clear to remove it");
    }
    ctx.action = [&ctx, fu] { return set_follow_up(ctx, *fu); };
  });

  auto fus_queue = std::make_shared<std::optional<std::string>>();
  auto fus_json = std::make_shared<bool>(false);
  auto* fus =
      cmd.add_subcommand("follow-ups", "the follow-up jobs of one queue, or of every queue");
  fus->add_option("queue", *fus_queue, "queue (default: every queue)");
  fus->add_flag("--json", *fus_json, "print JSON");
  fus->callback([&ctx, fus_queue, fus_json] {
    ctx.action = [&ctx, fus_queue, fus_json] {
      return show_follow_ups(ctx, *fus_queue, *fus_json);
    };
  });
}

}  // namespace awa::cli
