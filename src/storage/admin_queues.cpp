// Admin: queue listing, pause / resume and settings (`awa queue ...`). SQL in
// sql/functions/0052_queue_admin.sql and sql/queries/admin/.
#include <optional>

#include "awa/admin.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/validate.hpp"

namespace awa {
namespace {

// Columns 0..6 of queue_overview.sql and configure_queue.sql:
// queue, [configured,] enqueue_shards, paused, dlq_enabled, priority_aging_ms,
// deadline_ms, max_workers_hint. `first` is the column of enqueue_shards.
void read_settings(const pg::Result& res, int row, int first, QueueSettings& s) {
  s.queue = res.get<std::string>(row, 0);
  s.enqueue_shards = res.get<std::int16_t>(row, first);
  s.paused = res.get<bool>(row, first + 1);
  s.dlq_enabled = res.get<bool>(row, first + 2);
  s.priority_aging_ms = res.get_opt<std::int64_t>(row, first + 3);
  s.deadline_ms = res.get_opt<std::int64_t>(row, first + 4);
  s.max_workers_hint = res.get_opt<std::int32_t>(row, first + 5);
}

QueueSummary read_summary(const pg::Result& res, int row) {
  QueueSummary q;
  q.known = true;
  read_settings(res, row, 2, q.settings);
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
  const auto res =
      pg::native(conn).exec(sql::render(sql::file("queries/admin/configure_queue.sql"), quoted_),
                            pg::make_params(queue, change.dlq_enabled, change.priority_aging_ms,
                                            change.deadline_ms, change.max_workers_hint));
  QueueSettings s;
  read_settings(res, 0, 1, s);
  s.configured = true;
  return s;
}

}  // namespace awa
