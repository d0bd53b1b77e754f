// Admin: jobs (awa job ...). Each call is one statement of one SQL function
// (sql/functions/0055_job_admin.sql, 0056_job_moves.sql), so it is atomic and reads one
// snapshot whether or not the caller opened a transaction.
#include <algorithm>
#include <iterator>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/validate.hpp"

namespace awa {
namespace {

void validate_limit(int limit) {
  if (limit < 1 || limit > 10000) {
    throw InvalidArgument(fmt::format("limit {} is outside 1..10000", limit));
  }
}

void validate_priority(int priority) {
  if (priority < 1 || priority > 4) {
    throw InvalidArgument(fmt::format("priority {} is outside 1..4", priority));
  }
}

void validate_state(const std::string& state) {
  if (std::find(std::begin(kJobStates), std::end(kJobStates), std::string_view(state)) ==
      std::end(kJobStates)) {
    throw InvalidArgument(
        fmt::format("unknown job state \"{}\" (expected one of: {})", storage::printable(state),
                    fmt::join(std::begin(kJobStates), std::end(kJobStates), ", ")));
  }
}

// A kind filter goes to the server as text: a NUL would end it early.
void validate_kind_filter(const std::string& kind) {
  if (kind.empty() || kind.size() > kMaxNameBytes || kind.find('\0') != std::string::npos) {
    throw InvalidArgument(fmt::format("kind filter \"{}\" must be 1..200 bytes without NUL",
                                      storage::printable(kind)));
  }
}

JobAction action(JobId id, const pg::Result& res) {
  JobAction a;
  a.id = id;
  a.state = res.get<std::string>(0, 0);
  a.outcome = res.get<std::string>(0, 1);
  return a;
}

std::vector<JobError> parse_errors(std::string_view json) {
  std::vector<JobError> out;
  for (const auto& e : nlohmann::json::parse(json)) {
    out.push_back(JobError{e.at("attempt").get<int>(), e.at("at").get<std::string>(),
                           e.at("error").get<std::string>()});
  }
  return out;
}

}  // namespace

std::vector<JobSummary> Admin::list_jobs(Connection& conn, const JobFilter& filter) const {
  validate_limit(filter.limit);
  if (filter.state) validate_state(*filter.state);
  if (filter.queue) storage::validate_queue_name(*filter.queue);
  if (filter.kind) validate_kind_filter(*filter.kind);
  const auto res = pg::native(conn).exec(
      sql::query("queries/admin/list_jobs.sql", quoted_),
      pg::make_params(filter.queue, filter.state, filter.kind, filter.after, filter.limit));
  std::vector<JobSummary> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    JobSummary s;
    s.id = res.get<std::int64_t>(r, 0);
    s.state = res.get<std::string>(r, 1);
    s.queue = res.get<std::string>(r, 2);
    s.kind = res.get<std::string>(r, 3);
    s.priority = res.get<int>(r, 4);
    s.attempt = res.get<int>(r, 5);
    s.max_attempts = res.get<int>(r, 6);
    s.enqueue_shard = res.get_opt<int>(r, 7);
    s.created_at = res.get<std::string>(r, 8);
    s.run_at = res.get<std::string>(r, 9);
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<JobDetail> Admin::job(Connection& conn, JobId id) const {
  const auto res = pg::native(conn).exec(sql::query("queries/admin/job_detail.sql", quoted_),
                                         pg::make_params(id));
  if (res.rows() == 0) return std::nullopt;
  JobDetail d;
  JobSummary& s = d.summary;
  s.id = res.get<std::int64_t>(0, 0);
  s.state = res.get<std::string>(0, 1);
  s.queue = res.get<std::string>(0, 2);
  s.kind = res.get<std::string>(0, 3);
  s.priority = res.get<int>(0, 4);
  s.attempt = res.get<int>(0, 5);
  s.max_attempts = res.get<int>(0, 6);
  s.enqueue_shard = res.get_opt<int>(0, 7);
  s.created_at = res.get<std::string>(0, 8);
  s.run_at = res.get<std::string>(0, 9);
  d.args_json = res.get<std::string>(0, 10);
  d.metadata_json = res.get<std::string>(0, 11);
  if (const auto tags = res.get_opt<std::string>(0, 12)) {
    const auto parsed = nlohmann::json::parse(*tags);
    if (parsed.is_array()) d.tags = parsed.get<std::vector<std::string>>();
  }
  if (const auto key = res.get_opt<pg::Bytea>(0, 13)) d.ordering_key = key->bytes;
  d.lane_seq = res.get_opt<std::int64_t>(0, 14);
  d.run_lease = res.get<std::int64_t>(0, 15);
  d.errors = parse_errors(res.text(0, 16));
  d.progress_json = res.get_opt<std::string>(0, 17);
  d.callback_id = res.get_opt<std::string>(0, 19);
  d.result_json = res.get_opt<std::string>(0, 20);
  if (const auto deps = res.get_opt<std::string>(0, 21)) {
    const auto j = nlohmann::json::parse(*deps);
    const auto links = [](const nlohmann::json& a) {
      std::vector<JobLink> out;
      for (const auto& l : a) {
        out.push_back(JobLink{l.at("id").get<JobId>(), l.value("state", std::string())});
      }
      return out;
    };
    d.parents = links(j.at("parents"));
    d.children = links(j.at("children"));
    if (j.contains("on_parent_failure"))
      d.on_parent_failure = j.at("on_parent_failure").get<std::string>();
    if (j.contains("pending_parents")) d.pending_parents = j.at("pending_parents").get<int>();
  }
  for (const auto& e : nlohmann::json::parse(res.text(0, 18))) {
    JobEvent ev;
    ev.at = e.at("at").is_null() ? std::string() : e.at("at").get<std::string>();
    ev.event = e.at("event").get<std::string>();
    ev.attempt = e.at("attempt").get<int>();
    if (!e.at("enqueue_shard").is_null()) ev.enqueue_shard = e.at("enqueue_shard").get<int>();
    ev.detail = e.at("detail").get<std::string>();
    d.timeline.push_back(std::move(ev));
  }
  return d;
}

JobAction Admin::retry_job(Connection& conn, JobId id) const {
  return action(id, pg::native(conn).exec(sql::query("queries/admin/retry_job.sql", quoted_),
                                          pg::make_params(id)));
}

std::vector<JobId> Admin::retry_failed(Connection& conn, const std::optional<std::string>& queue,
                                       const std::optional<std::string>& kind) const {
  if (!queue && !kind) {
    throw InvalidArgument("retry of failed jobs needs a queue or a kind (or both)");
  }
  if (queue) storage::validate_queue_name(*queue);
  if (kind) validate_kind_filter(*kind);
  const auto res = pg::native(conn).exec(sql::query("queries/admin/retry_failed.sql", quoted_),
                                         pg::make_params(queue, kind));
  std::vector<JobId> ids;
  ids.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) ids.push_back(res.get<std::int64_t>(r, 0));
  return ids;
}

JobAction Admin::set_job_priority(Connection& conn, JobId id, int priority) const {
  validate_priority(priority);
  return action(id, pg::native(conn).exec(sql::query("queries/admin/set_job_priority.sql", quoted_),
                                          pg::make_params(id, priority)));
}

JobAction Admin::move_job(Connection& conn, JobId id, const std::string& destination) const {
  storage::validate_queue_name(destination);
  return action(id, pg::native(conn).exec(sql::query("queries/admin/move_job.sql", quoted_),
                                          pg::make_params(id, destination)));
}

int Admin::age_waiting_priorities(Connection& conn, const std::string& queue,
                                  std::chrono::milliseconds aging) const {
  storage::validate_queue_name(queue);
  if (aging.count() <= 0) throw InvalidArgument("the aging interval must be positive");
  return pg::native(conn)
      .exec(sql::query("queries/admin/age_priorities.sql", quoted_),
            pg::make_params(queue, std::to_string(aging.count()) + " milliseconds"))
      .get<int>(0, 0);
}

}  // namespace awa
