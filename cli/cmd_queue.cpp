// awa queue list|stats|pause|resume|configure|shards|set-shards: queue settings and exact
// inspection (include/awa/admin.hpp; docs/operations.md). follow-up|follow-ups:
// cmd_queue_follow_ups.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
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

// `awa queue configure`'s options; unset ones are left as they are.
struct ConfigureArgs {
  std::string queue;
  std::optional<std::string> dlq;  // "on" / "off"
  std::optional<std::int64_t> priority_aging_ms;
  std::optional<std::int64_t> deadline_ms;
  std::optional<int> max_workers_hint;
  std::optional<double> max_rate;
  std::optional<int> burst;
  std::optional<int> global_max_workers;
};

template <typename T>
nlohmann::json optional_json(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json settings_json(const QueueSettings& s) {
  return {{"queue", s.queue},
          {"configured", s.configured},
          {"enqueue_shards", s.enqueue_shards},
          {"paused", s.paused},
          {"dlq_enabled", s.dlq_enabled},
          {"priority_aging_ms", optional_json(s.priority_aging_ms)},
          {"deadline_ms", optional_json(s.deadline_ms)},
          {"max_workers_hint", optional_json(s.max_workers_hint)},
          {"max_rate", optional_json(s.max_rate)},
          {"burst", optional_json(s.burst)},
          {"global_max_workers", optional_json(s.global_max_workers)}};
}

nlohmann::json lanes_json(const std::vector<ShardLag>& lanes) {
  auto out = nlohmann::json::array();
  for (const auto& l : lanes) {
    out.push_back({{"priority", l.priority},
                   {"enqueue_shard", l.enqueue_shard},
                   {"enqueue_cursor", l.enqueue_cursor},
                   {"claim_cursor", l.claim_cursor},
                   {"lag", l.lag},
                   {"available", l.available}});
  }
  return out;
}

nlohmann::json summary_json(const QueueSummary& q) {
  auto j = settings_json(q.settings);
  const QueueCounts& c = q.counts;
  j["counts"] = {{"waiting", c.waiting},     {"available", c.available}, {"running", c.running},
                 {"scheduled", c.scheduled}, {"retryable", c.retryable}, {"completed", c.completed},
                 {"failed", c.failed},       {"cancelled", c.cancelled}, {"dlq", c.dlq}};
  j["oldest_available_age_s"] =
      q.oldest_available_age_s ? nlohmann::json(*q.oldest_available_age_s) : nullptr;
  return j;
}

// "-" for none, else a compact age: 850ms, 12.3s, 4m05s, 2h03m, 3d04h.
std::string age_text(const std::optional<double>& seconds) {
  if (!seconds) return "-";
  const double s = *seconds;
  if (s < 1) return fmt::format("{}ms", std::lround(s * 1000));
  if (s < 60) return fmt::format("{:.1f}s", s);
  const auto whole = static_cast<std::int64_t>(s);
  if (whole < 3600) return fmt::format("{}m{:02}s", whole / 60, whole % 60);
  if (whole < 86400) return fmt::format("{}h{:02}m", whole / 3600, whole % 3600 / 60);
  return fmt::format("{}d{:02}h", whole / 86400, whole % 86400 / 3600);
}

std::string optional_text(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : std::string("-");
}

// The limits, or nothing when the queue has none: "max_rate 20/s, burst 5, ...".
std::string limits_text(const QueueSettings& s) {
  std::string out;
  const auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (s.max_rate) {
    add(fmt::format("max_rate {}/s", *s.max_rate));
    add(s.burst ? fmt::format("burst {}", *s.burst)
                : fmt::format("burst {} (default)", std::max(1.0, std::ceil(*s.max_rate))));
  } else if (s.burst) {
    add(fmt::format("burst {} (unused: no max_rate)", *s.burst));
  }
  if (s.global_max_workers) add(fmt::format("global_max_workers {}", *s.global_max_workers));
  return out;
}

void print_lanes(const std::vector<ShardLag>& lanes, const std::string& queue) {
  if (lanes.empty()) {
    fmt::print("queue {} has no lanes yet\n", queue);
    return;
  }
  fmt::print("{:>8} {:>13} {:>15} {:>13} {:>10} {:>10}\n", "priority", "enqueue_shard",
             "enqueue_cursor", "claim_cursor", "lag", "available");
  for (const auto& l : lanes) {
    fmt::print("{:>8} {:>13} {:>15} {:>13} {:>10} {:>10}\n", l.priority, l.enqueue_shard,
               l.enqueue_cursor, l.claim_cursor, l.lag, l.available);
  }
}

void print_settings(const QueueSettings& s) {
  fmt::print(
      "  settings: enqueue_shards {}, paused {}, dlq {}, priority_aging_ms {}, deadline_ms {}, "
      "max_workers_hint {}{}\n",
      s.enqueue_shards, s.paused ? "yes" : "no", s.dlq_enabled ? "on" : "off",
      optional_text(s.priority_aging_ms), optional_text(s.deadline_ms),
      optional_text(s.max_workers_hint), s.configured ? "" : " (defaults: no queue_meta row)");
  const std::string limits = limits_text(s);
  fmt::print("  limits:   {}\n", limits.empty() ? "none" : limits);
}

void print_summary(const QueueSummary& q) {
  const QueueCounts& c = q.counts;
  fmt::print("queue {}{}\n", q.settings.queue, q.settings.paused ? " (PAUSED)" : "");
  print_settings(q.settings);
  fmt::print("  live:     waiting {}, available {}, running {}, scheduled {}, retryable {}\n",
             c.waiting, c.available, c.running, c.scheduled, c.retryable);
  fmt::print("  finished: completed {}, failed {}, cancelled {}, dlq {}\n", c.completed, c.failed,
             c.cancelled, c.dlq);
  fmt::print("  oldest available job: {}\n",
             q.oldest_available_age_s ? age_text(q.oldest_available_age_s) + " old" : "none");
}

int list(const Context& ctx, bool json) {
  const Admin admin(ctx.schema);  // checks the schema name before connecting
  auto conn = ctx.connect();
  const auto queues = admin.list_queues(conn);
  if (json) {
    auto out = nlohmann::json::array();
    for (const auto& q : queues) out.push_back(summary_json(q));
    fmt::print("{}\n", out.dump());
    return 0;
  }
  if (queues.empty()) {
    fmt::print("no queues yet\n");
    return 0;
  }
  fmt::print(
      "{:<24} {:>6} {:>6} {:>3} {:>8} {:>10} {:>8} {:>9} {:>9} {:>10} {:>8} {:>9} {:>6} {:>8}  "
      "{}\n",
      "queue", "shards", "paused", "dlq", "waiting", "available", "running", "scheduled",
      "retryable", "completed", "failed", "cancelled", "dlq", "oldest", "limits");
  for (const auto& q : queues) {
    const auto& s = q.settings;
    const auto& c = q.counts;
    const std::string limits = limits_text(s);
    fmt::print(
        "{:<24} {:>6} {:>6} {:>3} {:>8} {:>10} {:>8} {:>9} {:>9} {:>10} {:>8} {:>9} {:>6} {:>8}  "
        "{}\n",
        s.queue, s.enqueue_shards, s.paused ? "yes" : "no", s.dlq_enabled ? "on" : "off", c.waiting,
        c.available, c.running, c.scheduled, c.retryable, c.completed, c.failed, c.cancelled, c.dlq,
        age_text(q.oldest_available_age_s), limits.empty() ? "-" : limits);
  }
  return 0;
}

int stats(const Context& ctx, const std::optional<std::string>& queue, bool shards, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  std::vector<QueueSummary> queues;
  if (queue) {
    auto q = admin.queue_summary(conn, *queue);
    if (!q.known) {
      throw InvalidArgument(fmt::format(
          "queue {} not found: it has no settings, lanes, deferred jobs or dead letters "
          "(awa queue list shows the known queues)",
          *queue));
    }
    queues.push_back(std::move(q));
  } else {
    queues = admin.list_queues(conn);
  }
  std::vector<std::vector<ShardLag>> lanes(queues.size());
  if (shards) {
    for (std::size_t i = 0; i < queues.size(); ++i) {
      lanes[i] = admin.queue_shards(conn, queues[i].settings.queue);
    }
  }
  if (json) {
    auto out = nlohmann::json::array();
    for (std::size_t i = 0; i < queues.size(); ++i) {
      auto j = summary_json(queues[i]);
      if (shards) j["shards"] = lanes_json(lanes[i]);
      out.push_back(std::move(j));
    }
    // One queue asked for: the object itself, not a list of one.
    fmt::print("{}\n", queue ? out.at(0).dump() : out.dump());
    return 0;
  }
  if (queues.empty()) fmt::print("no queues yet\n");
  for (std::size_t i = 0; i < queues.size(); ++i) {
    if (i > 0) fmt::print("\n");
    print_summary(queues[i]);
    if (shards) print_lanes(lanes[i], queues[i].settings.queue);
  }
  return 0;
}

int age_priorities(const Context& ctx, const std::string& queue, std::int64_t aging_ms, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  const int moved = admin.age_waiting_priorities(conn, queue, std::chrono::milliseconds(aging_ms));
  if (json) {
    fmt::print("{}\n", nlohmann::json{{"queue", queue}, {"moved", moved}}.dump());
  } else {
    fmt::print("queue {}: {} available job(s) moved up to the priority they have aged to\n", queue,
               moved);
  }
  return 0;
}

int set_paused(const Context& ctx, const std::string& queue, bool paused) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  if (paused) {
    admin.pause_queue(conn, queue);
    fmt::print(
        "queue {} paused: workers claim nothing from it (running jobs finish) until "
        "`awa queue resume {}`; enqueue still works\n",
        queue, queue);
  } else {
    admin.resume_queue(conn, queue);
    fmt::print("queue {} resumed\n", queue);
  }
  return 0;
}

// The CHECK constraint is the authority on ranges; say what it means in the operator's
// terms, naming the option that broke it (found by the constraint's name: the message
// also quotes the statement, which names every column).
[[noreturn]] void explain_check(const ConstraintViolation& e, const ConfigureArgs& a) {
  const std::string what = e.what();
  const auto broke = [&](const char* constraint) {
    return what.find(fmt::format("\"{}\"", constraint)) != std::string::npos;
  };
  std::string message;
  if (broke("queue_meta_priority_aging_ms_check")) {
    message = fmt::format(
        "--priority-aging-ms must be a positive number of milliseconds, or 0 to clear it (got {})",
        optional_text(a.priority_aging_ms));
  } else if (broke("queue_meta_deadline_ms_check")) {
    message = fmt::format(
        "--deadline-ms must be a positive number of milliseconds, or 0 to clear it (got {})",
        optional_text(a.deadline_ms));
  } else if (broke("queue_meta_max_workers_hint_check")) {
    message =
        fmt::format("--max-workers-hint must be between 1 and 100000, or 0 to clear it (got {})",
                    optional_text(a.max_workers_hint));
  } else if (broke("queue_meta_max_rate_check") || broke("queue_meta_burst_check") ||
             broke("queue_meta_global_max_workers_check")) {
    // Checked before connecting (check_limits); the constraint is the database's guard.
    message = "a limit is out of range (see awa queue configure --help)";
  } else {
    throw e;
  }
  throw ConstraintViolation(fmt::format("{}; queue {} unchanged", message, a.queue), e.retry(),
                            e.sqlstate(), e.detail(), e.hint());
}

// The limits' ranges, in the options' names and before anything is sent (Admin checks
// them too, in the API's field names).
void check_limits(const ConfigureArgs& a) {
  std::string message;
  if (a.max_rate && !(*a.max_rate >= 0 && *a.max_rate <= 1000000)) {
    message = fmt::format(
        "--max-rate must be a number of claims per second in (0, 1000000], or 0 to clear it "
        "(got {})",
        *a.max_rate);
  } else if (a.burst && (*a.burst < 0 || *a.burst > 1000000)) {
    message =
        fmt::format("--burst must be between 1 and 1000000, or 0 to clear it (got {})", *a.burst);
  } else if (a.global_max_workers &&
             (*a.global_max_workers < 0 || *a.global_max_workers > 100000)) {
    message =
        fmt::format("--global-max-workers must be between 1 and 100000, or 0 to clear it (got {})",
                    *a.global_max_workers);
  } else {
    return;
  }
  throw InvalidArgument(fmt::format("{}; queue {} unchanged", message, a.queue));
}

int configure(const Context& ctx, const ConfigureArgs& a, bool json) {
  const Admin admin(ctx.schema);
  check_limits(a);
  QueueConfigChange change;
  if (a.dlq) change.dlq_enabled = *a.dlq == "on";
  change.priority_aging_ms = a.priority_aging_ms;
  change.deadline_ms = a.deadline_ms;
  change.max_workers_hint = a.max_workers_hint;
  change.max_rate = a.max_rate;
  change.burst = a.burst;
  change.global_max_workers = a.global_max_workers;
  auto conn = ctx.connect();
  QueueSettings s;
  try {
    s = admin.configure_queue(conn, a.queue, change);
  } catch (const ConstraintViolation& e) {
    if (e.sqlstate() != "23514") throw;
    explain_check(e, a);
  }
  if (json) {
    fmt::print("{}\n", settings_json(s).dump());
    return 0;
  }
  fmt::print("queue {}\n", s.queue);
  print_settings(s);
  return 0;
}

int set_shards(const Context& ctx, const std::string& queue, int shards) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  try {
    admin.set_enqueue_shards(conn, queue, shards);
  } catch (const ConstraintViolation& e) {
    if (e.sqlstate() != "23514") throw;
    throw ConstraintViolation(
        fmt::format("enqueue_shards must be between 1 and 64 (got {}); queue {} unchanged", shards,
                    queue),
        e.retry(), e.sqlstate(), e.detail(), e.hint());
  }
  fmt::print("queue {}: enqueue_shards = {}\n", queue, shards);
  fmt::print(
      "note: producers route keyed jobs with the new count at once and unkeyed ones within "
      "2 s (StorageOptions::shard_count_ttl); rows already on other shards keep draining.\n");
  return 0;
}

int show_shards(const Context& ctx, const std::string& queue, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  const std::vector<ShardLag> lanes = admin.queue_shards(conn, queue);
  if (json) {
    fmt::print("{}\n", lanes_json(lanes).dump());
    return 0;
  }
  print_lanes(lanes, queue);
  return 0;
}

}  // namespace

void add_queue(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("queue", "queue settings and inspection");
  cmd->require_subcommand(1);

  auto* ls = cmd->add_subcommand("list", "every known queue: settings and exact counts by state");
  auto list_json = std::make_shared<bool>(false);
  ls->add_flag("--json", *list_json, "print JSON");
  ls->callback(
      [&ctx, list_json] { ctx.action = [&ctx, list_json] { return list(ctx, *list_json); }; });

  auto stats_queue = std::make_shared<std::optional<std::string>>();
  auto stats_shards = std::make_shared<bool>(false);
  auto stats_json = std::make_shared<bool>(false);
  auto* st = cmd->add_subcommand(
      "stats", "one queue (or all): settings, exact counts by state, oldest available job");
  st->add_option("queue", *stats_queue, "queue (default: every known queue)");
  st->add_flag("--shards", *stats_shards, "add the per-lane table (as `awa queue shards`)");
  st->add_flag("--json", *stats_json, "print JSON");
  st->callback([&ctx, stats_queue, stats_shards, stats_json] {
    ctx.action = [&ctx, stats_queue, stats_shards, stats_json] {
      return stats(ctx, *stats_queue, *stats_shards, *stats_json);
    };
  });

  for (const bool paused : {true, false}) {
    auto queue = std::make_shared<std::string>();
    auto* sub =
        cmd->add_subcommand(paused ? "pause" : "resume",
                            paused ? "stop claims from a queue (persists across worker restarts)"
                                   : "let workers claim from a paused queue again");
    sub->add_option("queue", *queue, "queue")->required();
    sub->callback([&ctx, queue, paused] {
      ctx.action = [&ctx, queue, paused] { return set_paused(ctx, *queue, paused); };
    });
  }

  auto age_queue = std::make_shared<std::string>();
  auto age_ms = std::make_shared<std::int64_t>(0);
  auto age_json = std::make_shared<bool>(false);
  auto* age = cmd->add_subcommand(
      "age-priorities",
      "apply priority aging to stored rows (age_waiting_priorities): available jobs move up "
      "one priority level per --aging-ms waited, to the tail of that priority's lane");
  age->add_option("queue", *age_queue, "queue")->required();
  age->add_option("--aging-ms", *age_ms, "aging interval in milliseconds (> 0)")
      ->required()
      ->check(CLI::PositiveNumber);
  age->add_flag("--json", *age_json, "print JSON");
  age->callback([&ctx, age_queue, age_ms, age_json] {
    ctx.action = [&ctx, age_queue, age_ms, age_json] {
      return age_priorities(ctx, *age_queue, *age_ms, *age_json);
    };
  });

  auto conf = std::make_shared<ConfigureArgs>();
  auto conf_json = std::make_shared<bool>(false);
  auto* cf = cmd->add_subcommand(
      "configure", "change a queue's settings; options not given are left as they are");
  cf->add_option("queue", conf->queue, "queue")->required();
  cf->add_option("--dlq", conf->dlq, "dead-letter queue for terminal failures: on or off")
      ->check(CLI::IsMember({"on", "off"}));
  cf->add_option("--priority-aging-ms", conf->priority_aging_ms,
                 "claim-time priority aging interval for workers that set none; 0 clears");
  cf->add_option("--deadline-ms", conf->deadline_ms,
                 "deadline of each attempt for workers that set none; 0 clears");
  cf->add_option("--max-workers-hint", conf->max_workers_hint,
                 "informational: workers meant to run for the queue, 1..100000; 0 clears");
  cf->add_option("--max-rate", conf->max_rate,
                 "claims per second, all workers of the database together (a token bucket); "
                 "0 clears");
  cf->add_option("--burst", conf->burst,
                 "claims at once after a quiet spell, 1..1000000 (default: max-rate rounded "
                 "up); 0 clears");
  cf->add_option("--global-max-workers", conf->global_max_workers,
                 "open attempts at once (running, or waiting for a callback), all workers of "
                 "the database together, 1..100000; "
                 "0 clears");
  cf->add_flag("--json", *conf_json, "print the settings afterwards as JSON");
  cf->callback([&ctx, conf, conf_json] {
    if (!conf->dlq && !conf->priority_aging_ms && !conf->deadline_ms && !conf->max_workers_hint &&
        !conf->max_rate && !conf->burst && !conf->global_max_workers) {
      throw CLI::ValidationError(
          "nothing to change: give at least one of --dlq, --priority-aging-ms, --deadline-ms, "
          "--max-workers-hint, --max-rate, --burst, --global-max-workers");
    }
    ctx.action = [&ctx, conf, conf_json] { return configure(ctx, *conf, *conf_json); };
  });

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

  add_queue_follow_ups(*cmd, ctx);
}

}  // namespace awa::cli
