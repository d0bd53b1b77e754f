// awa batch open|seal|show|list: batches of jobs with a completion job, through
// awa::WorkflowAdmin (include/awa/workflows.hpp; docs/workflows.md, "Batches"). Jobs join
// a batch with `awa enqueue ... --batch NAME`. Every command takes --json.
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/workflows.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

struct OpenArgs {
  std::string name;
  std::string on_complete;
  std::string queue = "default";
  std::string args = "{}";
  bool json = false;
};

struct ShowArgs {
  std::string name;
  std::optional<int> members;
  bool json = false;
};

struct ListArgs {
  bool open_only = false;
  int limit = 100;
  bool json = false;
};

// What a batch is now: "open" (members may still join), "sealed" (no member joins, some
// have not ended) or "finished" (sealed and every member ended).
std::string state_text(const Batch& b) {
  if (b.finished) return "finished";
  return b.sealed ? "sealed" : "open";
}

std::string ended_text(const Batch& b) {
  return fmt::format("{}/{}", b.completed + b.failed + b.cancelled, b.members);
}

// "7/10 ended (5 completed, 1 failed, 1 cancelled)".
std::string progress_text(const Batch& b) {
  return fmt::format("{} ended ({} completed, {} failed, {} cancelled)", ended_text(b), b.completed,
                     b.failed, b.cancelled);
}

std::string completion_text(const Batch& b) {
  if (b.completion_job) return fmt::format("job {}", *b.completion_job);
  if (!b.on_complete) return "none (the batch only counts)";
  return b.finished ? "none" : "none yet";
}

int batch_not_found(const std::string& name) {
  std::cerr << fmt::format(
      "awa: error: batch {} not found (never opened, or purged after it finished)\n", name);
  return 1;
}

void print_batch(const Batch& b) {
  fmt::print("batch {}  {}\n", b.name, state_text(b));
  fmt::print("  sealed       {}\n", b.sealed ? "yes" : "no (members may still join)");
  fmt::print("  members      {}{}\n", b.members, b.sealed ? "" : " (so far)");
  fmt::print("  progress     {}\n", progress_text(b));
  fmt::print("  pending      {}\n", b.pending);
  fmt::print("  completion   {}\n", completion_text(b));
  fmt::print("  on_complete  {}\n", b.on_complete.value_or("-"));
  fmt::print("  queue        {}\n", b.queue);
  fmt::print("  created_at   {}\n", b.created_at);
  fmt::print("  sealed_at    {}\n", b.sealed_at.value_or("-"));
  fmt::print("  finished_at  {}\n", b.finished_at.value_or("-"));
}

int open_batch(const Context& ctx, const OpenArgs& a) {
  BatchOptions o;
  o.on_complete = a.on_complete;
  o.queue = a.queue;
  try {
    o.on_complete_args = nlohmann::json::parse(a.args);
  } catch (const nlohmann::json::parse_error& e) {
    throw InvalidArgument(fmt::format("--args is not valid JSON: {}", e.what()));
  }
  if (!o.on_complete_args.is_object()) throw InvalidArgument("--args must be a JSON object");
  const WorkflowAdmin workflows(ctx.schema);
  auto conn = ctx.connect();
  Batch b;
  try {
    b = workflows.open_batch(conn, a.name, o);
  } catch (const ConstraintViolation& e) {
    if (e.sqlstate() != "23505") throw;
    throw ConstraintViolation(e.what(), e.retry(), e.sqlstate(), e.detail(),
                              fmt::format("awa batch show {} shows it; a finished batch keeps its "
                                          "name until it is purged (after the failed-job "
                                          "retention)",
                                          a.name));
  }
  if (a.json) {
    fmt::print("{}\n", json_text(to_json(b)));
    return 0;
  }
  fmt::print("batch {} opened: {}; enqueue with --batch {}, then awa batch seal {}\n", b.name,
             b.on_complete ? fmt::format("completion job {} on queue {}", *b.on_complete, b.queue)
                           : std::string("no completion job (it only counts)"),
             b.name, b.name);
  return 0;
}

int seal(const Context& ctx, const std::string& name, bool json) {
  const WorkflowAdmin workflows(ctx.schema);
  auto conn = ctx.connect();
  const Batch b = workflows.seal_batch(conn, name);
  if (json) {
    fmt::print("{}\n", json_text(to_json(b)));
    return 0;
  }
  fmt::print("batch {} sealed: {} members, {}\n", b.name, b.members, progress_text(b));
  if (b.finished) fmt::print("finished; completion: {}\n", completion_text(b));
  return 0;
}

int show(const Context& ctx, const ShowArgs& a) {
  const WorkflowAdmin workflows(ctx.schema);
  auto conn = ctx.connect();
  const auto b = workflows.batch(conn, a.name);
  if (!b) return batch_not_found(a.name);
  std::vector<JobLink> members;
  if (a.members) members = workflows.batch_members(conn, a.name, *a.members);
  if (a.json) {
    auto out = to_json(*b);
    if (a.members) {
      auto list = nlohmann::json::array();
      for (const auto& m : members) list.push_back({{"id", m.id}, {"state", m.state}});
      out["member_jobs"] = std::move(list);
    }
    fmt::print("{}\n", json_text(out));
    return 0;
  }
  print_batch(*b);
  if (!a.members) return 0;
  if (members.empty()) {
    fmt::print("no members\n");
    return 0;
  }
  const bool full = static_cast<int>(members.size()) == *a.members;
  fmt::print("members (lowest id first{})\n",
             full ? fmt::format(", the first {}", members.size()) : std::string());
  fmt::print("  {:>12} {}\n", "id", "state");
  for (const auto& m : members) fmt::print("  {:>12} {}\n", m.id, m.state.empty() ? "-" : m.state);
  return 0;
}

int list(const Context& ctx, const ListArgs& a) {
  const WorkflowAdmin workflows(ctx.schema);
  auto conn = ctx.connect();
  const auto batches = workflows.list_batches(conn, a.limit, a.open_only);
  if (a.json) {
    auto out = nlohmann::json::array();
    for (const auto& b : batches) out.push_back(to_json(b));
    fmt::print("{}\n", json_text(out));
    return 0;
  }
  if (batches.empty()) {
    fmt::print("{}\n", a.open_only ? "no unfinished batches" : "no batches");
    return 0;
  }
  fmt::print("{:<32} {:<8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>12} {:<24} {}\n", "name", "state",
             "ended", "completed", "failed", "cancelled", "pending", "completion", "on_complete",
             "created_at");
  for (const auto& b : batches) {
    fmt::print("{:<32} {:<8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>12} {:<24} {}\n", b.name,
               state_text(b), ended_text(b), b.completed, b.failed, b.cancelled, b.pending,
               b.completion_job ? std::to_string(*b.completion_job) : "-",
               b.on_complete.value_or("-"), b.created_at);
  }
  if (static_cast<int>(batches.size()) == a.limit) {
    fmt::print("(limit {} reached: the newest first)\n", a.limit);
  }
  return 0;
}

}  // namespace

void add_batch(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "batch", "batches of jobs with a completion job (docs/workflows.md, \"Batches\")");
  cmd->require_subcommand(1);

  auto o = std::make_shared<OpenArgs>();
  auto* op = cmd->add_subcommand(
      "open", "open a batch; jobs join it with awa enqueue --batch NAME until it is sealed");
  op->add_option("name", o->name, "batch name (1..200 characters from A-Z a-z 0-9 _ . : -)")
      ->required();
  op->add_option("--on-complete", o->on_complete,
                 "kind of the job enqueued once the sealed batch's members have all ended "
                 "(default: none, the batch only counts)");
  op->add_option("--queue,-q", o->queue, "the completion job's queue")->capture_default_str();
  op->add_option("--args", o->args,
                 "the completion job's args, a JSON object; the counts are added to them")
      ->capture_default_str();
  op->add_flag("--json", o->json, "print JSON");
  op->callback([&ctx, o] { ctx.action = [&ctx, o] { return open_batch(ctx, *o); }; });

  auto seal_name = std::make_shared<std::string>();
  auto seal_json = std::make_shared<bool>(false);
  auto* sl = cmd->add_subcommand(
      "seal", "seal a batch: no job joins it afterwards; it finishes once its members have ended");
  sl->add_option("name", *seal_name, "batch name")->required();
  sl->add_flag("--json", *seal_json, "print JSON");
  sl->callback([&ctx, seal_name, seal_json] {
    ctx.action = [&ctx, seal_name, seal_json] { return seal(ctx, *seal_name, *seal_json); };
  });

  auto s = std::make_shared<ShowArgs>();
  auto* sh = cmd->add_subcommand(
      "show", "one batch: its counts, its completion job, optionally its members");
  sh->add_option("name", s->name, "batch name")->required();
  sh->add_option("--members", s->members,
                 "also list up to this many members (lowest id first) with their states, "
                 "1..10000")
      ->check(CLI::Range(1, 10000));
  sh->add_flag("--json", s->json, "print JSON");
  sh->callback([&ctx, s] { ctx.action = [&ctx, s] { return show(ctx, *s); }; });

  auto l = std::make_shared<ListArgs>();
  auto* ls = cmd->add_subcommand("list", "batches, the newest first");
  ls->add_flag("--open", l->open_only, "only batches that have not finished");
  ls->add_option("--limit", l->limit, "at most this many, 1..10000")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  ls->add_flag("--json", l->json, "print JSON");
  ls->callback([&ctx, l] { ctx.action = [&ctx, l] { return list(ctx, *l); }; });
}

}  // namespace awa::cli
