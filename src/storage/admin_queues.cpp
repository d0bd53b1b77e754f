// Admin: queue listing, pause / resume and settings (`awa queue ...`). SQL in
// sql/functions/0052_queue_admin.sql and sql/queries/admin/.
#include <optional>

#include <fmt/format.h>

#include "awa/admin.hpp"
#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/validate.hpp"

namespace awa {
namespace {

// Admin::configure_queue's limits: the CHECK constraints of migration 0009 would refuse
// these too, but a message naming the field is worth the duplication. NaN fails every
// comparison below and is refused with the rest.
void validate_limits(const QueueConfigChange& c) {
  if (c.max_rate && !(*c.max_rate >= 0 && *c.max_rate <= 1000000)) {
    throw InvalidArgument(fmt::format(
        "max_rate must be a number of claims per second in (0, 1000000], or 0 to clear it "
        "(got {})",
        *c.max_rate));
  }
  if (c.burst && (*c.burst < 0 || *c.burst > 1000000)) {
    throw InvalidArgument(
        fmt::format("burst must be between 1 and 1000000, or 0 to clear it (got {})", *c.burst));
  }
  if (c.global_max_workers && (*c.global_max_workers < 0 || *c.global_max_workers > 100000)) {
    throw InvalidArgument(
        fmt::format("global_max_workers must be between 1 and 100000, or 0 to clear it (got {})",
                    *c.global_max_workers));
  }
}

// Columns 0..6 of queue_overview.sql and configure_queue.sql:
// queue, [configured,] enqueue_shards, paused, dlq_enabled, priority_aging_ms,
// deadline_ms, max_workers_hint. `first` is the column of enqueue_shards; `limits` the
// column of max_rate, followed by burst and global_max_workers.
void read_settings(const pg::Result& res, int row, int first, int limits, QueueSettings& s) {
  s.queue = res.get<std::string>(row, 0);
  s.enqueue_shards = res.get<std::int16_t>(row, first);
  s.paused = res.get<bool>(row, first + 1);
  s.dlq_enabled = res.get<bool>(row, first + 2);
  s.priority_aging_ms = res.get_opt<std::int64_t>(row, first + 3);
  s.deadline_ms = res.get_opt<std::int64_t>(row, first + 4);
  s.max_workers_hint = res.get_opt<std::int32_t>(row, first + 5);
  s.max_rate = res.get_opt<double>(row, limits);
  s.burst = res.get_opt<std::int32_t>(row, limits + 1);
  s.global_max_workers = res.get_opt<std::int32_t>(row, limits + 2);
}

QueueSummary read_summary(const pg::Result& res, int row) {
  QueueSummary q;
  q.known = true;
  read_settings(res, row, 2, 17, q.settings);
  q.settings.configured = res.get<bool>(row, 1);
  QueueCounts& c = q.counts;
  c.available = res.get<std::int64_t>(row, 8);
  c.running = res.get<std::int64_t>(row, 9);
  c.scheduled = res.get<std::int64_t>(row, 10);
  c.retryable = res.get<std::int64_t>(row, 11);
  c.completed = res.get<std::int64_t>(row, 12);
  c.failed = res.get<std::int64_t>(row, 13);
  c.cancelled = res.get<std::int64_t>(row, 14);
  c.dlq = res.get<std::int64_t>(row, 15);
  q.oldest_available_age_s = res.get_opt<double>(row, 16);
  c.waiting = res.get<std::int64_t>(row, 20);
  return q;
}

}  // namespace

std::vector<QueueSummary> Admin::list_queues(Connection& conn) const {
  const auto res =
      pg::native(conn).exec(sql::render(sql::file("queries/admin/queue_overview.sql"), quoted_),
                            pg::make_params(std::optional<std::string>()));
  std::vector<QueueSummary> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) out.push_back(read_summary(res, r));
  return out;
}

QueueSummary Admin::queue_summary(Connection& conn, const std::string& queue) const {
  storage::validate_queue_name(queue);
  const auto res = pg::native(conn).exec(
      sql::render(sql::file("queries/admin/queue_overview.sql"), quoted_), pg::make_params(queue));
  if (res.rows() > 0) return read_summary(res, 0);
  QueueSummary unknown;  // defaults and zeros, known = false
  unknown.settings.queue = queue;
  return unknown;
}

void Admin::pause_queue(Connection& conn, const std::string& queue) const {
  storage::validate_queue_name(queue);
  pg::native(conn).exec(sql::render(sql::file("queries/admin/set_paused.sql"), quoted_),
                        pg::make_params(queue, true));
}

void Admin::resume_queue(Connection& conn, const std::string& queue) const {
  storage::validate_queue_name(queue);
  pg::native(conn).exec(sql::render(sql::file("queries/admin/set_paused.sql"), quoted_),
                        pg::make_params(queue, false));
}

QueueSettings Admin::configure_queue(Connection& conn, const std::string& queue,
                                     const QueueConfigChange& change) const {
  storage::validate_queue_name(queue);
  validate_limits(change);
  const auto res = pg::native(conn).exec(
      sql::render(sql::file("queries/admin/configure_queue.sql"), quoted_),
      pg::make_params(queue, change.dlq_enabled, change.priority_aging_ms, change.deadline_ms,
                      change.max_workers_hint, change.max_rate, change.burst,
                      change.global_max_workers));
  QueueSettings s;
  read_settings(res, 0, 1, 7, s);
  s.configured = true;
  return s;
}

}  // namespace awa
