// Periodic (cron) jobs (docs/scheduling.md): named schedules stored in the schema's
// periodic_jobs table and fired by the maintenance leader, exactly once per occurrence.
//
// From code, declared at start-up (upserted by Client::start(), see client.hpp):
//
//   client.add_periodic("nightly-report", "0 3 * * *", "build_report", {{"scope", "all"}},
//                       {.queue = "reports", .timezone = "Europe/Berlin"});
//
// From the command line: awa cron add|list|pause|resume|trigger|remove (PeriodicAdmin).
//
// Schedules: 5-field cron ("min hour dom month dow") or 6 fields with seconds first;
// `*`, lists, ranges, steps, JAN..DEC, SUN..SAT, day of week 0-7 (7 = Sunday); the
// macros @yearly @annually @monthly @weekly @daily @midnight @hourly; `@every 30s`
// (units s, m, h), which fires at the multiples of the interval since the Unix epoch.
// Times are wall-clock times in the schedule's zone (any zone name PostgreSQL knows;
// default UTC); docs/scheduling.md says how DST gaps and overlaps fire.
//
// Thread safety: PeriodicAdmin is immutable; each call uses only the connection passed in
// (one thread at a time).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/connection.hpp"
#include "awa/job.hpp"

namespace awa {

struct PeriodicOptions {
  // Default: "default".
  std::string queue = "default";
  // Zone of the schedule's wall-clock times. Default: "UTC".
  std::string timezone = "UTC";
  // Of each job. Defaults: 2 and 25.
  int priority = 2;
  int max_attempts = 25;
  std::vector<std::string> tags = {};
  // A JSON object or null; each job's metadata is this plus {"periodic": name,
  // "occurrence": "<ISO 8601 UTC>"}. Default: null.
  nlohmann::json metadata = nullptr;
  // After downtime: false (default) enqueues ONE job for the latest missed occurrence
  // (coalesce); true enqueues one per missed occurrence, at most 100 per schedule per
  // maintenance round.
  bool catch_up = false;
};

struct PeriodicJob {
  // 1..200 characters from A-Z a-z 0-9 _ . : -; the schedule's identity.
  std::string name;
  std::string schedule;  // cron expression, macro or @every
  std::string kind;
  nlohmann::json args = nlohmann::json::object();
  PeriodicOptions options;
};

// A stored schedule. Times are ISO 8601 UTC.
struct PeriodicSchedule {
  std::string name;
  std::string schedule;
  std::string timezone;
  std::string kind;
  std::string queue;
  std::string args_json;
  int priority = 2;
  int max_attempts = 25;
  std::vector<std::string> tags = {};
  std::string metadata_json;  // "null" when none
  bool catch_up = false;
  bool paused = false;
  // The next occurrence to fire (in the past while a paused schedule waits or the leader
  // lags); unset when the schedule has no occurrence in the next 8 years.
  std::optional<std::string> next_fire_at;
  std::optional<std::string> last_fired_at;  // the latest occurrence fired
  std::optional<JobId> last_job_id;          // its job
  std::optional<std::string> last_error;     // the latest failed fire, until one succeeds
  std::optional<std::string> last_error_at;
  std::string source;  // "code" (Client::add_periodic) or "cli" (awa cron add)
  std::optional<std::string> last_declared_at;  // code: the start-up that last declared it
  std::string created_at;
  std::string updated_at;
  // Declared by code, but not by the latest start-up that declared schedules (its
  // last_declared_at is older than the newest of all code schedules). With several
  // processes declaring different sets, each start-up makes the others' schedules look
  // stale until they start again: declare the same set everywhere.
  bool stale = false;
};

// What add / declare did to one schedule.
struct PeriodicUpsert {
  std::string name;
  bool created = false;  // false: an existing schedule was updated
  std::optional<std::string> next_fire_at;
};

// Checks a PeriodicJob without a database: name, schedule (its field and text on error),
// kind, queue, args, priority, max_attempts, tags, metadata. Throws InvalidArgument. The
// time zone is checked by the database when the schedule is stored.
void validate_periodic(const PeriodicJob& job);

class PeriodicAdmin {
 public:
  // Default schema: "awa". Throws InvalidArgument for a bad schema name.
  explicit PeriodicAdmin(std::string schema = "awa");

  // Adds the schedule, or updates the one of that name (source "cli"). An update keeps
  // `paused`, and keeps next_fire_at unless the schedule text or zone changed (then the
  // first occurrence after now). Throws InvalidArgument for bad input, including an
  // unknown zone or a schedule with no occurrence in the next 8 years (the message
  // carries PostgreSQL's SQLSTATE 22023).
  PeriodicUpsert add(Connection& conn, const PeriodicJob& job) const;
  // What Client::start() does: upserts every job (source "code", last_declared_at = the
  // transaction's start) in one transaction — the caller's if one is open.
  std::vector<PeriodicUpsert> declare(Connection& conn, std::span<const PeriodicJob> jobs) const;
  // Every schedule by name; `stale_only`: only the stale ones (PeriodicSchedule::stale).
  std::vector<PeriodicSchedule> list(Connection& conn, bool stale_only = false) const;
  // false: no schedule of that name. A paused schedule does not fire; resuming skips
  // the occurrences that passed meanwhile (next_fire_at becomes the first one after now).
  bool pause(Connection& conn, const std::string& name) const;
  bool resume(Connection& conn, const std::string& name) const;
  // Enqueues one job of the schedule now (paused or not) without touching its series;
  // unset: no schedule of that name.
  std::optional<JobId> trigger(Connection& conn, const std::string& name) const;
  // false: no schedule of that name. Jobs it enqueued stay.
  bool remove(Connection& conn, const std::string& name) const;

 private:
  std::string schema_;
  std::string quoted_;
};

}  // namespace awa
