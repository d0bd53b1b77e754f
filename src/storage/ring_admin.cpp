// Admin: exact counts and the storage rings (rotate, prune, status). SQL in
// sql/queries/rings/ and sql/functions/0080_rings.sql.
#include <algorithm>
#include <string_view>

#include "awa/admin.hpp"
#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/validate.hpp"

namespace awa {
namespace {

void validate_ring(const std::string& ring) {
  if (std::find(std::begin(kRings), std::end(kRings), std::string_view(ring)) == std::end(kRings)) {
    throw InvalidArgument("unknown ring '" + ring + "' (expected queue, claim or lease)");
  }
}

}  // namespace

QueueCounts Admin::queue_counts(Connection& conn, const std::string& queue) const {
  storage::validate_queue_name(queue);
  const auto res = pg::native(conn).exec(
      sql::render(sql::file("queries/admin/queue_counts.sql"), quoted_), pg::make_params(queue));
  QueueCounts c;
  c.available = res.get<std::int64_t>(0, 0);
  c.running = res.get<std::int64_t>(0, 1);
  c.scheduled = res.get<std::int64_t>(0, 2);
  c.retryable = res.get<std::int64_t>(0, 3);
  c.completed = res.get<std::int64_t>(0, 4);
  c.failed = res.get<std::int64_t>(0, 5);
  c.cancelled = res.get<std::int64_t>(0, 6);
  c.dlq = res.get<std::int64_t>(0, 7);
  c.waiting = res.get<std::int64_t>(0, 8);
  return c;
}

RingAction Admin::rotate(Connection& conn, const std::string& ring) const {
  validate_ring(ring);
  const auto res = pg::native(conn).exec(
      sql::render(sql::file("queries/rings/rotate.sql"), quoted_), pg::make_params(ring));
  RingAction a;
  a.ring = ring;
  a.done = res.get<bool>(0, 0);
  a.generation = res.get<std::int64_t>(0, 1);
  a.slot = res.get<int>(0, 2);
  a.reason = res.get<std::string>(0, 3);
  return a;
}

RingAction Admin::prune(Connection& conn, const std::string& ring, bool carry,
                        std::chrono::seconds failed_retention) const {
  validate_ring(ring);
  if (failed_retention.count() < 0) throw InvalidArgument("failed retention must not be negative");
  const auto res = pg::native(conn).exec(
      sql::render(sql::file("queries/rings/prune.sql"), quoted_),
      pg::make_params(ring, carry, std::to_string(failed_retention.count()) + " seconds"));
  RingAction a;
  a.ring = ring;
  a.done = res.get<bool>(0, 0);
  a.generation = res.get<std::int64_t>(0, 1);
  a.slot = res.get<int>(0, 2);
  a.rows_removed = res.get<std::int64_t>(0, 3);
  a.rows_carried = res.get<std::int64_t>(0, 4);
  a.reason = res.get<std::string>(0, 5);
  return a;
}

std::int64_t Admin::sweep_kept(Connection& conn, std::chrono::seconds failed_retention,
                               int limit) const {
  if (failed_retention.count() < 0) throw InvalidArgument("failed retention must not be negative");
  if (limit < 1) throw InvalidArgument("sweep limit must be at least 1");
  const auto res = pg::native(conn).exec(
      sql::render(sql::file("queries/rings/sweep_keep.sql"), quoted_),
      pg::make_params(std::to_string(failed_retention.count()) + " seconds", limit));
  return res.get<std::int64_t>(0, 0);
}

std::vector<RingStatus> Admin::storage_status(Connection& conn) const {
  // One snapshot for the slots and the events, so they agree with each other.
  Transaction tx(conn);
  pg::native(conn).exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
  const auto slots =
      pg::native(conn).exec(sql::render(sql::file("queries/rings/status.sql"), quoted_));
  const auto events =
      pg::native(conn).exec(sql::render(sql::file("queries/rings/events.sql"), quoted_));
  tx.commit();

  std::vector<RingStatus> out;
  for (const char* name : kRings) {
    RingStatus r;
    r.ring = name;
    for (int i = 0; i < slots.rows(); ++i) {
      if (slots.get<std::string>(i, 0) != name) continue;
      r.current_slot = slots.get<int>(i, 5);
      r.generation = slots.get<std::int64_t>(i, 6);
      if (slots.get<std::string>(i, 2) == "keep") {
        r.kept_rows = slots.get<std::int64_t>(i, 4);
        continue;
      }
      r.slots.push_back({slots.get<int>(i, 1), slots.get<std::string>(i, 2),
                         slots.get<std::int64_t>(i, 3), slots.get<std::int64_t>(i, 4)});
    }
    for (int i = 0; i < events.rows(); ++i) {
      if (events.get<std::string>(i, 1) != name) continue;
      RingEvent e{events.get<std::string>(i, 4),  events.get<std::int64_t>(i, 2),
                  events.get<int>(i, 3),          events.get<std::int64_t>(i, 5),
                  events.get<std::int64_t>(i, 6), events.get<std::string>(i, 7)};
      const auto kind = events.get<std::string>(i, 0);
      if (kind == "rotate") {
        r.last_rotation = std::move(e);
      } else if (kind == "prune") {
        r.last_prune = std::move(e);
      } else if (kind == "skip:rotate") {
        r.last_rotate_skip = std::move(e);
      } else {
        r.last_prune_skip = std::move(e);
      }
    }
    // A skip reason is kept until a later skip says something else; once the action has
    // succeeded since, it is history, not the ring's state.
    if (r.last_rotate_skip && r.last_rotation && r.last_rotation->at >= r.last_rotate_skip->at) {
      r.last_rotate_skip.reset();
    }
    if (r.last_prune_skip && r.last_prune && r.last_prune->at >= r.last_prune_skip->at) {
      r.last_prune_skip.reset();
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace awa
