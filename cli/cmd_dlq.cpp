// awa dlq list|depth|retry|purge: dead-letter triage through awa::Admin. Bulk retry and
// purge refuse to run without a filter or --all (Admin checks it, and so does the SQL).
#include <charconv>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

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

// "7d", "12h", "30m", "90s": a whole number and one unit.
std::chrono::seconds parse_age(const std::string& text) {
  const auto fail = [&] {
    return InvalidArgument(fmt::format(
        "--older-than \"{}\": expected a whole number and a unit, like 7d, 12h, 30m or 90s", text));
  };
  if (text.size() < 2) throw fail();
  std::int64_t n = 0;
  const char* end = text.data() + text.size() - 1;
  const auto [ptr, ec] = std::from_chars(text.data(), end, n);
  if (ec != std::errc() || ptr != end || n < 0) throw fail();
  std::int64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    default:
      throw fail();
  }
  // 100 years is more than any retention; beyond it the interval arithmetic would overflow.
  if (n > 3'155'760'000 / unit) throw fail();
  return std::chrono::seconds(n * unit);
}

int list(const Context& ctx, const DlqFilter& filter, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  const auto entries = admin.list_dlq(conn, filter);
  if (json) {
    auto out = nlohmann::json::array();
    for (const auto& e : entries) out.push_back(awa::json::of(e));
    fmt::print("{}\n", json_text(out));
    return 0;
  }
  if (entries.empty()) {
    fmt::print("no dead letters\n");
    return 0;
  }
  fmt::print("{:>12} {:<20} {:<24} {:>9} {:<24} {}\n", "id", "queue", "kind", "attempt", "dlq_at",
             "reason");
  for (const auto& e : entries) {
    fmt::print("{:>12} {:<20} {:<24} {:>9} {:<24} {}\n", e.id, e.queue, e.kind,
               fmt::format("{}/{}", e.attempt, e.max_attempts), e.dlq_at, e.reason);
  }
  return 0;
}

int depth(const Context& ctx, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  const auto queues = admin.dlq_depth(conn);
  std::int64_t total = 0;
  for (const auto& [queue, n] : queues) total += n;
  if (json) {
    auto out = nlohmann::json::array();
    for (const auto& [queue, n] : queues) out.push_back({{"queue", queue}, {"depth", n}});
    fmt::print("{}\n", json_text({{"total", total}, {"queues", out}}));
    return 0;
  }
  for (const auto& [queue, n] : queues) fmt::print("{:<30} {:>10}\n", queue, n);
  fmt::print("{:<30} {:>10}\n", "total", total);
  return 0;
}

int retry(const Context& ctx, const DlqFilter& filter, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  const auto ids = admin.retry_dlq(conn, filter);
  if (json) {
    fmt::print("{}\n", json_text({{"retried", ids}}));
  } else {
    fmt::print("retried {} dead letter{}{}{}\n", ids.size(), ids.size() == 1 ? "" : "s",
               ids.empty() ? "" : ": ", fmt::join(ids, " "));
  }
  // Retrying one named dead letter that is not there is an error, as for `awa job retry`.
  if (filter.id && ids.empty()) {
    if (!json) fmt::print(stderr, "awa: error: job {} is not in the dlq\n", *filter.id);
    return 1;
  }
  return 0;
}

int purge(const Context& ctx, const DlqFilter& filter, bool json) {
  const Admin admin(ctx.schema);
  auto conn = ctx.connect();
  const auto n = admin.purge_dlq(conn, filter);
  if (json) {
    fmt::print("{}\n", json_text({{"purged", n}}));
  } else {
    fmt::print("purged {} dead letter{}\n", n, n == 1 ? "" : "s");
  }
  if (filter.id && n == 0) {
    if (!json) fmt::print(stderr, "awa: error: job {} is not in the dlq\n", *filter.id);
    return 1;
  }
  return 0;
}

struct DlqArgs {
  DlqFilter filter;
  JobId id = 0;
  std::string queue, kind, older_than;
  bool json = false;
};

// The selection options shared by retry and purge; the filter is filled at parse time.
void add_selection(CLI::App* sub, const std::shared_ptr<DlqArgs>& a) {
  sub->add_option("id", a->id, "one dead letter (job id)");
  sub->add_option("--queue", a->queue, "dead letters of this queue");
  sub->add_option("--kind", a->kind, "dead letters of this kind");
  sub->add_option("--older-than", a->older_than,
                  "dead-lettered longer ago than this: 7d, 12h, 30m, 90s");
  sub->add_flag("--all", a->filter.all, "every dead letter (required when no filter is given)");
  sub->add_flag("--json", a->json, "print JSON");
}

void fill(CLI::App* sub, DlqArgs& a) {
  const auto given = [sub](const char* name) {
    const auto* o = sub->get_option_no_throw(name);
    return o != nullptr && o->count() > 0;
  };
  if (given("id")) a.filter.id = a.id;
  if (given("--queue")) a.filter.queue = a.queue;
  if (given("--kind")) a.filter.kind = a.kind;
}

}  // namespace

void add_dlq(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("dlq", "dead letters: list, depth, retry, purge");
  cmd->require_subcommand(1);
  auto a = std::make_shared<DlqArgs>();

  auto* ls = cmd->add_subcommand("list", "dead letters, oldest first");
  ls->add_option("--queue", a->queue, "only this queue");
  ls->add_option("--kind", a->kind, "only this kind");
  ls->add_option("--limit", a->filter.limit, "at most this many, 1..10000")->capture_default_str();
  ls->add_flag("--json", a->json, "print JSON");
  ls->callback([&ctx, a, ls] {
    fill(ls, *a);
    ctx.action = [&ctx, a] { return list(ctx, a->filter, a->json); };
  });

  auto* dp = cmd->add_subcommand("depth", "dead letters per queue");
  dp->add_flag("--json", a->json, "print JSON");
  dp->callback([&ctx, a] { ctx.action = [&ctx, a] { return depth(ctx, a->json); }; });

  auto* rt = cmd->add_subcommand("retry", "move dead letters back to ready (attempts reset)");
  add_selection(rt, a);
  rt->callback([&ctx, a, rt] {
    fill(rt, *a);
    ctx.action = [&ctx, a, rt] {
      if (rt->count("--older-than") > 0) a->filter.older_than = parse_age(a->older_than);
      return retry(ctx, a->filter, a->json);
    };
  });

  auto* pg = cmd->add_subcommand("purge", "delete dead letters for good");
  add_selection(pg, a);
  pg->callback([&ctx, a, pg] {
    fill(pg, *a);
    ctx.action = [&ctx, a, pg] {
      if (pg->count("--older-than") > 0) a->filter.older_than = parse_age(a->older_than);
      return purge(ctx, a->filter, a->json);
    };
  });
}

}  // namespace awa::cli
