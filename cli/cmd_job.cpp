// awa job list|show|cancel|retry|retry-failed|set-priority|move: one job, or a listing,
// through awa::Admin. Every command takes --json (one JSON document on stdout).
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

std::string shard_text(const std::optional<int>& shard) {
  return shard ? std::to_string(*shard) : "-";
}

int list(const Context& ctx, const JobFilter& filter, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  const auto jobs = admin.list_jobs(conn, filter);
  if (json) {
    auto out = nlohmann::json::array();
    for (const auto& s : jobs) out.push_back(awa::json::of(s));
    fmt::print("{}\n", json_text(out));
    return 0;
  }
  if (jobs.empty()) {
    fmt::print("no jobs\n");
    return 0;
  }
  fmt::print("{:>12} {:<10} {:<20} {:<24} {:>3} {:>9} {:>5} {}\n", "id", "state", "queue", "kind",
             "pri", "attempt", "shard", "run_at");
  for (const auto& s : jobs) {
    fmt::print("{:>12} {:<10} {:<20} {:<24} {:>3} {:>9} {:>5} {}\n", s.id, s.state, s.queue, s.kind,
               s.priority, fmt::format("{}/{}", s.attempt, s.max_attempts),
               shard_text(s.enqueue_shard), s.run_at);
  }
  if (static_cast<int>(jobs.size()) == filter.limit) {
    fmt::print("(limit {} reached: --after {} shows the next page)\n", filter.limit,
               jobs.back().id);
  }
  return 0;
}

int not_found(JobId id) {
  std::cerr << fmt::format("awa: error: job {} not found\n", id);
  return 1;
}

int show(const Context& ctx, JobId id, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  const auto d = admin.job(conn, id);
  if (!d) return not_found(id);
  if (json) {
    fmt::print("{}\n", json_text(awa::json::of(*d)));
    return 0;
  }
  const auto& s = d->summary;
  fmt::print("job {}  {}\n", s.id, s.state);
  fmt::print("  queue        {} (priority {}, shard {}, lane_seq {})\n", s.queue, s.priority,
             shard_text(s.enqueue_shard), d->lane_seq ? std::to_string(*d->lane_seq) : "-");
  fmt::print("  kind         {}\n", s.kind);
  fmt::print("  attempts     {} of {} (run_lease {})\n", s.attempt, s.max_attempts, d->run_lease);
  fmt::print("  created_at   {}\n", s.created_at);
  fmt::print("  run_at       {}\n", s.run_at);
  fmt::print("  args         {}\n", d->args_json);
  if (d->metadata_json != "null") fmt::print("  metadata     {}\n", d->metadata_json);
  if (!d->tags.empty()) fmt::print("  tags         {}\n", fmt::join(d->tags, ", "));
  if (d->ordering_key)
    fmt::print("  ordering_key {}\n", json_text(nlohmann::json(*d->ordering_key)));
  if (d->progress_json) fmt::print("  progress     {}\n", *d->progress_json);
  if (d->callback_id) fmt::print("  callback_id  {}\n", *d->callback_id);
  if (d->result_json) fmt::print("  result       {}\n", *d->result_json);
  const auto links = [](const std::vector<JobLink>& v) {
    std::vector<std::string> parts;
    for (const auto& l : v) parts.push_back(fmt::format("{} ({})", l.id, l.state));
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  if (!d->parents.empty()) {
    fmt::print("  parents      {}\n", links(d->parents));
    fmt::print("  on failure   {} (of a parent){}\n", d->on_parent_failure.value_or("cancel"),
               d->pending_parents ? fmt::format("; waiting for {}", *d->pending_parents) : "");
  }
  if (!d->children.empty()) fmt::print("  children     {}\n", links(d->children));
  if (!d->errors.empty()) {
    fmt::print("errors\n");
    for (const auto& e : d->errors) {
      fmt::print("  attempt {:<3} {}  {}\n", e.attempt, e.at, e.error);
    }
  }
  fmt::print("timeline\n");
  for (const auto& e : d->timeline) {
    std::string line = fmt::format("  {:<24} {:<20}", e.at.empty() ? "?" : e.at, e.event);
    if (e.attempt > 0) line += fmt::format(" attempt {}", e.attempt);
    if (e.enqueue_shard) line += fmt::format(" shard {}", *e.enqueue_shard);
    if (!e.detail.empty()) line += "  " + e.detail;
    fmt::print("{}\n", line);
  }
  return 0;
}

// Prints what an action did; a refusal (not found, wrong state) is an error: exit 1.
int report_action(const JobAction& a, bool json, std::string_view done_outcome,
                  std::string_view what, std::string_view allowed) {
  const bool ok = a.outcome == done_outcome || a.outcome == "unchanged";
  if (json) {
    fmt::print("{}\n", json_text({{"id", a.id}, {"state", a.state}, {"outcome", a.outcome}}));
    return ok ? 0 : 1;
  }
  if (a.outcome == "not_found") return not_found(a.id);
  if (ok) {
    fmt::print("job {} ({}): {}\n", a.id, a.state, a.outcome);
    return 0;
  }
  std::cerr << fmt::format("awa: error: job {} is {}: {} {}\n", a.id, a.state, what, allowed);
  return 1;
}

int cancel(const Context& ctx, JobId id, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  const auto found = admin.cancel_job(conn, id);
  if (json) fmt::print("{}\n", json_text({{"id", id}, {"state", found}}));
  if (found == "missing") {
    if (!json) return not_found(id);
    return 1;
  }
  if (found == "finished") {
    std::cerr << fmt::format("awa: error: job {} has already finished\n", id);
    return 1;
  }
  if (!json) fmt::print("job {} ({}): cancelled\n", id, found);
  return 0;
}

int retry(const Context& ctx, JobId id, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  return report_action(admin.retry_job(conn, id), json, "retried", "only failed, cancelled or",
                       "dead-lettered jobs can be retried");
}

int retry_failed(const Context& ctx, const std::optional<std::string>& queue,
                 const std::optional<std::string>& kind, bool json) {
  const Admin admin(ctx.schema);
  if (!queue && !kind) throw InvalidArgument("job retry-failed needs --queue Q or --kind K");
  auto conn = ctx.connect();
  const auto ids = admin.retry_failed(conn, queue, kind);
  if (json) {
    fmt::print("{}\n", json_text({{"retried", ids}}));
  } else {
    fmt::print("retried {} failed job{}{}{}\n", ids.size(), ids.size() == 1 ? "" : "s",
               ids.empty() ? "" : ": ", fmt::join(ids, " "));
  }
  return 0;
}

int set_priority(const Context& ctx, JobId id, int priority, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  return report_action(admin.set_job_priority(conn, id, priority), json, "reprioritised",
                       "only available, scheduled or", "retryable jobs can be reprioritised");
}

int move(const Context& ctx, JobId id, const std::string& destination, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  return report_action(admin.move_job(conn, id, destination), json, "moved",
                       "only available, scheduled or", "retryable jobs can be moved");
}

}  // namespace

void add_job(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("job", "find, inspect, retry, move and cancel jobs");
  cmd->require_subcommand(1);

  struct Args {
    JobFilter filter;
    std::string queue, state, kind;
    JobId after = 0;
    JobId id = 0;
    int priority = 0;
    bool json = false;
  };
  auto a = std::make_shared<Args>();

  auto* ls = cmd->add_subcommand("list", "jobs by id, with their state (one snapshot)");
  ls->add_option("--queue", a->queue, "only this queue");
  ls->add_option("--state", a->state,
                 "only this state: waiting, scheduled, retryable, available, running, "
                 "waiting_external, completed, failed, cancelled or dlq");
  ls->add_option("--kind", a->kind, "only this kind");
  ls->add_option("--limit", a->filter.limit, "at most this many, 1..10000")->capture_default_str();
  ls->add_option("--after", a->after, "only ids greater than this (the next page)");
  ls->add_flag("--json", a->json, "print JSON");
  ls->callback([&ctx, a, ls] {
    if (ls->count("--queue") > 0) a->filter.queue = a->queue;
    if (ls->count("--state") > 0) a->filter.state = a->state;
    if (ls->count("--kind") > 0) a->filter.kind = a->kind;
    if (ls->count("--after") > 0) a->filter.after = a->after;
    ctx.action = [&ctx, a] { return list(ctx, a->filter, a->json); };
  });

  auto* sh = cmd->add_subcommand("show", "one job: where it is, its errors and its timeline");
  sh->add_option("id", a->id, "job id")->required();
  sh->add_flag("--json", a->json, "print JSON");
  sh->callback([&ctx, a] { ctx.action = [&ctx, a] { return show(ctx, a->id, a->json); }; });

  auto* cn = cmd->add_subcommand("cancel", "cancel a job wherever it is");
  cn->add_option("id", a->id, "job id")->required();
  cn->add_flag("--json", a->json, "print JSON");
  cn->callback([&ctx, a] { ctx.action = [&ctx, a] { return cancel(ctx, a->id, a->json); }; });

  auto* rt = cmd->add_subcommand(
      "retry", "a failed, cancelled or dead-lettered job runs again (attempts reset)");
  rt->add_option("id", a->id, "job id")->required();
  rt->add_flag("--json", a->json, "print JSON");
  rt->callback([&ctx, a] { ctx.action = [&ctx, a] { return retry(ctx, a->id, a->json); }; });

  auto* rf = cmd->add_subcommand("retry-failed", "retry every failed job of a queue and/or kind");
  rf->add_option("--queue", a->queue, "failed jobs of this queue");
  rf->add_option("--kind", a->kind, "failed jobs of this kind");
  rf->add_flag("--json", a->json, "print JSON");
  rf->callback([&ctx, a, rf] {
    std::optional<std::string> queue;
    std::optional<std::string> kind;
    if (rf->count("--queue") > 0) queue = a->queue;
    if (rf->count("--kind") > 0) kind = a->kind;
    ctx.action = [&ctx, a, queue, kind] { return retry_failed(ctx, queue, kind, a->json); };
  });

  auto* sp = cmd->add_subcommand("set-priority", "change the priority of a waiting job (1..4)");
  sp->add_option("id", a->id, "job id")->required();
  sp->add_option("priority", a->priority, "1 (highest) .. 4")->required();
  sp->add_flag("--json", a->json, "print JSON");
  sp->callback([&ctx, a] {
    ctx.action = [&ctx, a] { return set_priority(ctx, a->id, a->priority, a->json); };
  });

  auto* mv = cmd->add_subcommand("move", "move an available or scheduled job to another queue");
  mv->add_option("id", a->id, "job id")->required();
  mv->add_option("--queue", a->queue, "destination queue")->required();
  mv->add_flag("--json", a->json, "print JSON");
  mv->callback(
      [&ctx, a] { ctx.action = [&ctx, a] { return move(ctx, a->id, a->queue, a->json); }; });
}

}  // namespace awa::cli
