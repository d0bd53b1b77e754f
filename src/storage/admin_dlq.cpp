// Admin: the dead-letter queue (awa dlq ...). SQL in sql/queries/admin/ and
// sql/functions/0057_dlq_admin.sql; a retry or purge is one statement, so it is atomic.
#include <string>
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

std::optional<std::string> interval(const std::optional<std::chrono::seconds>& age) {
  if (!age) return std::nullopt;
  return std::to_string(age->count()) + " seconds";
}

void validate_filter(const DlqFilter& f) {
  if (f.queue) storage::validate_queue_name(*f.queue);
  if (f.kind && (f.kind->empty() || f.kind->size() > kMaxNameBytes ||
                 f.kind->find('\0') != std::string::npos)) {
    throw InvalidArgument(fmt::format("kind filter \"{}\" must be 1..200 bytes without NUL",
                                      storage::printable(*f.kind)));
  }
  if (f.older_than && f.older_than->count() < 0) {
    throw InvalidArgument("the age of dead letters to select must not be negative");
  }
}

// Bulk actions must be explicit: the SQL functions refuse too, this says it before
// connecting to anything.
void require_selection(const DlqFilter& f, std::string_view action) {
  if (!f.id && !f.queue && !f.kind && !f.older_than && !f.all) {
    throw InvalidArgument(fmt::format(
        "refusing to {} every dead letter without a filter: name a job id, a queue, a kind or "
        "an age, or set all",
        action));
  }
}

}  // namespace

std::vector<DlqEntry> Admin::list_dlq(Connection& conn, const DlqFilter& filter) const {
  validate_filter(filter);
  if (filter.limit < 1 || filter.limit > 10000) {
    throw InvalidArgument(fmt::format("limit {} is outside 1..10000", filter.limit));
  }
  const auto res =
      pg::native(conn).exec(sql::query("queries/admin/list_dlq.sql", quoted_),
                            pg::make_params(filter.id, filter.queue, filter.kind,
                                            interval(filter.older_than), filter.limit));
  std::vector<DlqEntry> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    DlqEntry e;
    e.id = res.get<std::int64_t>(r, 0);
    e.queue = res.get<std::string>(r, 1);
    e.kind = res.get<std::string>(r, 2);
    e.priority = res.get<int>(r, 3);
    e.attempt = res.get<int>(r, 4);
    e.max_attempts = res.get<int>(r, 5);
    e.reason = res.get<std::string>(r, 6);
    e.dlq_at = res.get<std::string>(r, 7);
    e.args_json = res.get<std::string>(r, 8);
    for (const auto& j : nlohmann::json::parse(res.text(r, 9))) {
      e.errors.push_back(JobError{j.at("attempt").get<int>(), j.at("at").get<std::string>(),
                                  j.at("error").get<std::string>()});
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> Admin::dlq_depth(Connection& conn) const {
  const auto res = pg::native(conn).exec(sql::query("queries/admin/dlq_depth.sql", quoted_));
  std::vector<std::pair<std::string, std::int64_t>> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    out.emplace_back(res.get<std::string>(r, 0), res.get<std::int64_t>(r, 1));
  }
  return out;
}

std::vector<JobId> Admin::retry_dlq(Connection& conn, const DlqFilter& filter) const {
  validate_filter(filter);
  require_selection(filter, "retry");
  const auto res = pg::native(conn).exec(sql::query("queries/admin/retry_dlq.sql", quoted_),
                                         pg::make_params(filter.id, filter.queue, filter.kind,
                                                         interval(filter.older_than), filter.all));
  std::vector<JobId> ids;
  ids.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) ids.push_back(res.get<std::int64_t>(r, 0));
  return ids;
}

std::int64_t Admin::purge_dlq(Connection& conn, const DlqFilter& filter) const {
  validate_filter(filter);
  require_selection(filter, "purge");
  return pg::native(conn)
      .exec(sql::query("queries/admin/purge_dlq_selected.sql", quoted_),
            pg::make_params(filter.id, filter.queue, filter.kind, interval(filter.older_than),
                            filter.all))
      .get<std::int64_t>(0, 0);
}

}  // namespace awa
