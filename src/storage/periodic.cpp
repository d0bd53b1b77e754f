// Periodic jobs (docs/scheduling.md): validation, the schedule upsert, the admin calls
// behind `awa cron`, and the leader's fire call. SQL in sql/functions/0100_cron.sql,
// 0110_periodic.sql and sql/queries/periodic/.
#include "storage/periodic.hpp"

#include <fmt/format.h>

#include "awa/error.hpp"
#include "pg/error_map.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/cron.hpp"
#include "storage/pg_array.hpp"
#include "storage/validate.hpp"

namespace awa {
namespace {

std::string text_array(const std::vector<std::string>& values) {
  storage::ArrayLiteral a;
  for (const auto& v : values) a.add(v);
  return std::move(a).finish();
}

void validate_name(const std::string& name) {
  try {
    storage::validate_queue_name(name);  // the same character set and length
  } catch (const InvalidArgument&) {
    throw InvalidArgument(fmt::format(
        "invalid periodic job name \"{}\": use 1..{} characters from A-Z a-z 0-9 _ . : -",
        storage::printable(name), kMaxNameBytes));
  }
}

NewJob as_new_job(const PeriodicJob& job) {
  InsertOpts o;
  o.queue = job.options.queue;
  o.priority = job.options.priority;
  o.max_attempts = job.options.max_attempts;
  o.tags = job.options.tags;
  o.metadata = job.options.metadata;
  return NewJob(job.kind, job.args, std::move(o));
}

// The schedule's zone or its timing may be refused by the server (22023): that is bad
// input like any other, so InvalidArgument — with the SQLSTATE in the message, since the
// CLI does not print it for InvalidArgument.
PeriodicUpsert upsert(pg::Connection& conn, const std::string& quoted, const PeriodicJob& job,
                      const storage::CronSpec& spec, const char* source) {
  const std::string sql = sql::query("queries/periodic/upsert.sql", quoted);
  try {
    const auto res = conn.exec(
        sql,
        pg::make_params(
            job.name, job.schedule, job.options.timezone, storage::int_array_literal(spec.seconds),
            storage::int_array_literal(spec.minutes), storage::int_array_literal(spec.hours),
            storage::int_array_literal(spec.doms), storage::int_array_literal(spec.months),
            storage::int_array_literal(spec.dows), spec.dom_restricted, spec.dow_restricted,
            spec.every_seconds, job.kind, job.options.queue, job.args.dump(), job.options.priority,
            job.options.max_attempts,
            job.options.tags.empty() ? std::optional<std::string>() : text_array(job.options.tags),
            job.options.metadata.is_null()
                ? std::optional<std::string>()
                : std::optional<std::string>(job.options.metadata.dump()),
            job.options.catch_up, std::string(source)));
    return PeriodicUpsert{job.name, res.get<bool>(0, 0), res.get_opt<std::string>(0, 1)};
  } catch (const DatabaseError& e) {
    if (e.sqlstate() != "22023") throw;
    // The server's message names the schedule and the problem; the statement's first
    // line in front of it would only be noise here.
    std::string message = e.what();
    const std::string context = pg::statement_context(sql) + ": ";
    if (message.starts_with(context)) message.erase(0, context.size());
    if (!e.hint().empty()) message += fmt::format(" ({})", e.hint());
    throw InvalidArgument(fmt::format("{} [SQLSTATE 22023]", message));
  }
}

}  // namespace

void validate_periodic(const PeriodicJob& job) {
  validate_name(job.name);
  try {
    storage::parse_cron(job.schedule);
    storage::validate_job(as_new_job(job), 0);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("periodic job {}: {}", job.name, e.what()));
  }
  const auto& tz = job.options.timezone;
  if (tz.empty() || tz.size() > 100 || tz.find('\0') != std::string::npos) {
    throw InvalidArgument(fmt::format("periodic job {}: time zone \"{}\" must be 1..100 bytes",
                                      job.name, storage::printable(tz)));
  }
}

PeriodicAdmin::PeriodicAdmin(std::string schema)
    : schema_(std::move(schema)), quoted_(sql::quote_schema(schema_)) {}

PeriodicUpsert PeriodicAdmin::add(Connection& conn, const PeriodicJob& job) const {
  validate_periodic(job);
  return upsert(pg::native(conn), quoted_, job, storage::parse_cron(job.schedule), "cli");
}

std::vector<PeriodicUpsert> PeriodicAdmin::declare(Connection& conn,
                                                   std::span<const PeriodicJob> jobs) const {
  return storage::declare_periodic(pg::native(conn), schema_, jobs);
}

std::vector<PeriodicSchedule> PeriodicAdmin::list(Connection& conn, bool stale_only) const {
  const auto res = pg::native(conn).exec(sql::query("queries/periodic/list.sql", quoted_),
                                         pg::make_params(stale_only));
  std::vector<PeriodicSchedule> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    PeriodicSchedule s;
    s.name = res.get<std::string>(r, 0);
    s.schedule = res.get<std::string>(r, 1);
    s.timezone = res.get<std::string>(r, 2);
    s.kind = res.get<std::string>(r, 3);
    s.queue = res.get<std::string>(r, 4);
    s.args_json = res.get<std::string>(r, 5);
    s.priority = res.get<std::int16_t>(r, 6);
    s.max_attempts = res.get<std::int16_t>(r, 7);
    s.tags = nlohmann::json::parse(res.get<std::string>(r, 8)).get<std::vector<std::string>>();
    s.metadata_json = res.get<std::string>(r, 9);
    s.catch_up = res.get<bool>(r, 10);
    s.paused = res.get<bool>(r, 11);
    s.next_fire_at = res.get_opt<std::string>(r, 12);
    s.last_fired_at = res.get_opt<std::string>(r, 13);
    s.last_job_id = res.get_opt<std::int64_t>(r, 14);
    s.last_error = res.get_opt<std::string>(r, 15);
    s.last_error_at = res.get_opt<std::string>(r, 16);
    s.source = res.get<std::string>(r, 17);
    s.last_declared_at = res.get_opt<std::string>(r, 18);
    s.created_at = res.get<std::string>(r, 19);
    s.updated_at = res.get<std::string>(r, 20);
    s.stale = res.get<bool>(r, 21);
    out.push_back(std::move(s));
  }
  return out;
}

bool PeriodicAdmin::pause(Connection& conn, const std::string& name) const {
  return pg::native(conn)
      .exec(sql::query("queries/periodic/set_paused.sql", quoted_), pg::make_params(name, true))
      .get<bool>(0, 0);
}

bool PeriodicAdmin::resume(Connection& conn, const std::string& name) const {
  return pg::native(conn)
      .exec(sql::query("queries/periodic/set_paused.sql", quoted_), pg::make_params(name, false))
      .get<bool>(0, 0);
}

std::optional<JobId> PeriodicAdmin::trigger(Connection& conn, const std::string& name) const {
  return pg::native(conn)
      .exec(sql::query("queries/periodic/trigger.sql", quoted_), pg::make_params(name))
      .get_opt<std::int64_t>(0, 0);
}

bool PeriodicAdmin::remove(Connection& conn, const std::string& name) const {
  return pg::native(conn)
             .exec(sql::query("queries/periodic/remove.sql", quoted_), pg::make_params(name))
             .rows() > 0;
}

}  // namespace awa

namespace awa::storage {

std::vector<PeriodicFire> fire_due_periodic(pg::Connection& conn, const std::string& schema,
                                            int limit, int catch_up_limit) {
  const auto res = conn.exec(sql::query("queries/periodic/fire_due.sql", sql::quote_schema(schema)),
                             pg::make_params(limit, catch_up_limit));
  std::vector<PeriodicFire> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    out.push_back(PeriodicFire{res.get<std::string>(r, 0), res.get_opt<std::string>(r, 1),
                               res.get_opt<std::int64_t>(r, 2), res.get_opt<std::string>(r, 3)});
  }
  return out;
}

std::vector<PeriodicUpsert> declare_periodic(pg::Connection& conn, const std::string& schema,
                                             std::span<const PeriodicJob> jobs) {
  std::vector<storage::CronSpec> specs;
  specs.reserve(jobs.size());
  for (const auto& job : jobs) {
    validate_periodic(job);
    specs.push_back(parse_cron(job.schedule));
  }
  const std::string quoted = sql::quote_schema(schema);
  std::vector<PeriodicUpsert> out;
  out.reserve(jobs.size());
  // One transaction, so every schedule of this start-up gets the same last_declared_at
  // (now() is the transaction's start): what stale detection compares.
  std::optional<pg::Transaction> tx;
  if (!conn.in_transaction()) tx.emplace(conn);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    out.push_back(upsert(conn, quoted, jobs[i], specs[i], "code"));
  }
  if (tx) tx->commit();
  return out;
}

}  // namespace awa::storage
