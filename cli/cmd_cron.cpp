// awa cron add|list|pause|resume|trigger|remove: periodic (cron) jobs
// (include/awa/periodic.hpp; docs/scheduling.md).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/admin_json.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/periodic.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

struct AddArgs {
  std::string name;
  std::string schedule;
  std::string kind;
  std::string args = "{}";
  std::string queue = "default";
  std::string tz = "UTC";
  int priority = 2;
  int max_attempts = 25;
  bool catch_up = false;
  bool json = false;
};

nlohmann::json optional_json(const std::optional<std::string>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json schedule_json(const PeriodicSchedule& s) {
  return {{"name", s.name},
          {"schedule", s.schedule},
          {"timezone", s.timezone},
          {"kind", s.kind},
          {"queue", s.queue},
          {"args", awa::json::stored(s.args_json)},
          {"priority", s.priority},
          {"max_attempts", s.max_attempts},
          {"tags", s.tags},
          {"metadata", awa::json::stored(s.metadata_json)},
          {"catch_up", s.catch_up},
          {"paused", s.paused},
          {"next_fire_at", optional_json(s.next_fire_at)},
          {"last_fired_at", optional_json(s.last_fired_at)},
          {"last_job_id", s.last_job_id ? nlohmann::json(*s.last_job_id) : nullptr},
          {"last_error", optional_json(s.last_error)},
          {"last_error_at", optional_json(s.last_error_at)},
          {"source", s.source},
          {"last_declared_at", optional_json(s.last_declared_at)},
          {"created_at", s.created_at},
          {"updated_at", s.updated_at},
          {"stale", s.stale}};
}

[[noreturn]] void not_found(const std::string& name) {
  throw InvalidArgument(
      fmt::format("no periodic job named \"{}\" (awa cron list shows them)", name));
}

int add(const Context& ctx, const AddArgs& a) {
  PeriodicJob job;
  job.name = a.name;
  job.schedule = a.schedule;
  job.kind = a.kind;
  try {
    job.args = nlohmann::json::parse(a.args);
  } catch (const nlohmann::json::parse_error& e) {
    throw InvalidArgument(fmt::format("--args is not valid JSON: {}", e.what()));
  }
  job.options.queue = a.queue;
  job.options.timezone = a.tz;
  job.options.priority = a.priority;
  job.options.max_attempts = a.max_attempts;
  job.options.catch_up = a.catch_up;
  const PeriodicAdmin admin(ctx.schema);
  validate_periodic(job);  // before connecting: a typo needs no database
  auto conn = ctx.connect();
  const auto r = admin.add(conn, job);
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"name", r.name},
                                      {"created", r.created},
                                      {"next_fire_at", optional_json(r.next_fire_at)}}
                           .dump());
    return 0;
  }
  fmt::print("periodic job {} {}: {} ({}), next fire at {}\n", r.name,
             r.created ? "added" : "updated", a.schedule, a.tz, r.next_fire_at.value_or("never"));
  return 0;
}

int list(const Context& ctx, bool stale, bool json) {
  const PeriodicAdmin admin(ctx.schema);
  auto conn = ctx.connect();
  const auto schedules = admin.list(conn, stale);
  if (json) {
    auto out = nlohmann::json::array();
    for (const auto& s : schedules) out.push_back(schedule_json(s));
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  }
  if (schedules.empty()) {
    fmt::print("{}\n", stale ? "no stale periodic jobs" : "no periodic jobs");
    return 0;
  }
  fmt::print("{:<24} {:<20} {:<16} {:<20} {:<12} {:<6} {:<24} {:<24} {}\n", "name", "schedule",
             "timezone", "kind", "queue", "state", "next_fire_at", "last_fired_at", "source");
  for (const auto& s : schedules) {
    std::string state = s.paused ? "paused" : "active";
    if (s.stale) state += ",stale";
    fmt::print("{:<24} {:<20} {:<16} {:<20} {:<12} {:<6} {:<24} {:<24} {}{}\n", s.name, s.schedule,
               s.timezone, s.kind, s.queue, state, s.next_fire_at.value_or("never"),
               s.last_fired_at.value_or("-"), s.source, s.catch_up ? " catch-up" : "");
    if (s.last_error) {
      fmt::print("  last error ({}): {}\n", s.last_error_at.value_or("?"), *s.last_error);
    }
  }
  return 0;
}

int set_paused(const Context& ctx, const std::string& name, bool paused, bool json) {
  const PeriodicAdmin admin(ctx.schema);
  auto conn = ctx.connect();
  if (!(paused ? admin.pause(conn, name) : admin.resume(conn, name))) not_found(name);
  if (json) {
    fmt::print("{}\n", nlohmann::json{{"name", name}, {"paused", paused}}.dump());
  } else if (paused) {
    fmt::print("periodic job {} paused: it does not fire until `awa cron resume {}`\n", name, name);
  } else {
    fmt::print("periodic job {} resumed (occurrences while paused are skipped)\n", name);
  }
  return 0;
}

int trigger(const Context& ctx, const std::string& name, bool json) {
  const PeriodicAdmin admin(ctx.schema);
  auto conn = ctx.connect();
  const auto id = admin.trigger(conn, name);
  if (!id) not_found(name);
  if (json) {
    fmt::print("{}\n", nlohmann::json{{"name", name}, {"job_id", *id}}.dump());
  } else {
    fmt::print("periodic job {}: enqueued job {} now (its schedule is unchanged)\n", name, *id);
  }
  return 0;
}

int remove(const Context& ctx, const std::string& name, bool json) {
  const PeriodicAdmin admin(ctx.schema);
  auto conn = ctx.connect();
  if (!admin.remove(conn, name)) not_found(name);
  if (json) {
    fmt::print("{}\n", nlohmann::json{{"name", name}, {"removed", true}}.dump());
    return 0;
  }
  fmt::print(
      "periodic job {} removed (jobs it enqueued stay; a client that declares it adds it again "
      "at its next start)\n",
      name);
  return 0;
}

}  // namespace

void add_cron(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("cron", "periodic (cron) jobs: schedules fired by the leader");
  cmd->require_subcommand(1);

  auto a = std::make_shared<AddArgs>();
  auto* ad = cmd->add_subcommand(
      "add", "add a periodic job, or update the one of that name (its paused state is kept)");
  ad->add_option("name", a->name, "schedule name (A-Z a-z 0-9 _ . : -)")->required();
  ad->add_option("--schedule", a->schedule,
                 "cron expression (5 fields, or 6 with seconds first), @hourly/@daily/@weekly/"
                 "@monthly/@yearly, or @every 30s|90m|2h")
      ->required();
  ad->add_option("--kind", a->kind, "job kind")->required();
  ad->add_option("--args", a->args, "job args as JSON")->capture_default_str();
  ad->add_option("--queue", a->queue, "queue of the jobs")->capture_default_str();
  ad->add_option("--tz", a->tz, "time zone of the schedule (IANA name)")->capture_default_str();
  ad->add_option("--priority", a->priority, "1 (highest) .. 4")->capture_default_str();
  ad->add_option("--max-attempts", a->max_attempts, "attempts per job, 1..1000")
      ->capture_default_str();
  ad->add_flag("--catch-up", a->catch_up,
               "after downtime enqueue every missed occurrence (default: one for the latest)");
  ad->add_flag("--json", a->json, "print the result as JSON");
  ad->callback([&ctx, a] { ctx.action = [&ctx, a] { return add(ctx, *a); }; });

  auto stale = std::make_shared<bool>(false);
  auto list_json = std::make_shared<bool>(false);
  auto* ls = cmd->add_subcommand("list", "every periodic job with its next and last fire");
  ls->add_flag("--stale", *stale,
               "only schedules declared by code but not by the latest declaring start-up");
  ls->add_flag("--json", *list_json, "print JSON");
  ls->callback([&ctx, stale, list_json] {
    ctx.action = [&ctx, stale, list_json] { return list(ctx, *stale, *list_json); };
  });

  for (const bool paused : {true, false}) {
    auto name = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    auto* sub = cmd->add_subcommand(paused ? "pause" : "resume",
                                    paused ? "stop a periodic job from firing"
                                           : "let a paused periodic job fire again (occurrences "
                                             "while paused are skipped)");
    sub->add_option("name", *name, "schedule name")->required();
    sub->add_flag("--json", *json, "print JSON");
    sub->callback([&ctx, name, paused, json] {
      ctx.action = [&ctx, name, paused, json] { return set_paused(ctx, *name, paused, *json); };
    });
  }

  auto trigger_name = std::make_shared<std::string>();
  auto trigger_json = std::make_shared<bool>(false);
  auto* tr = cmd->add_subcommand(
      "trigger", "enqueue one job of a periodic job now, without changing its schedule");
  tr->add_option("name", *trigger_name, "schedule name")->required();
  tr->add_flag("--json", *trigger_json, "print JSON");
  tr->callback([&ctx, trigger_name, trigger_json] {
    ctx.action = [&ctx, trigger_name, trigger_json] {
      return trigger(ctx, *trigger_name, *trigger_json);
    };
  });

  auto remove_name = std::make_shared<std::string>();
  auto remove_json = std::make_shared<bool>(false);
  auto* rm = cmd->add_subcommand("remove", "delete a periodic job (its jobs stay)");
  rm->add_option("name", *remove_name, "schedule name")->required();
  rm->add_flag("--json", *remove_json, "print JSON");
  rm->callback([&ctx, remove_name, remove_json] {
    ctx.action = [&ctx, remove_name, remove_json] {
      return remove(ctx, *remove_name, *remove_json);
    };
  });
}

}  // namespace awa::cli
