// Admin: per-minute rates for the dashboard's charts (issue 13). SQL in
// sql/queries/admin/throughput.sql and shard_claims.sql; both answer sparse rows (only the
// minutes with something in them), made dense here.
#include <fmt/format.h>

#include <optional>

#include "awa/admin.hpp"
#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/validate.hpp"

namespace awa {
namespace {

int checked_window(std::chrono::minutes window) {
  if (window.count() < 1 || window.count() > kMaxRateWindowMinutes) {
    throw InvalidArgument(fmt::format("rate window must be 1..{} minutes, got {}",
                                      kMaxRateWindowMinutes, window.count()));
  }
  return static_cast<int>(window.count());
}

// The bucket column of a row. The statement bounds its scans to the window, so anything
// outside it is a bug, not data to clamp.
std::size_t bucket_of(const pg::Result& res, int row, int col, int minutes) {
  const auto b = res.get<std::int32_t>(row, col);
  if (b < 0 || b >= minutes) {
    throw Error(fmt::format("rate query returned minute {} outside the window of {}", b, minutes));
  }
  return static_cast<std::size_t>(b);
}

}  // namespace

Throughput Admin::throughput(Connection& conn, std::chrono::minutes window,
                             const std::optional<std::string>& queue) const {
  const int minutes = checked_window(window);
  if (queue) storage::validate_queue_name(*queue);
  const auto res =
      pg::native(conn).exec(sql::render(sql::file("queries/admin/throughput.sql"), quoted_),
                            pg::make_params(minutes, queue));
  Throughput out;
  out.minutes = minutes;
  const auto n = static_cast<std::size_t>(minutes);
  for (int r = 0; r < res.rows(); ++r) {
    if (r == 0) out.start = res.get<std::string>(r, 0);
    const auto name = res.get_opt<std::string>(r, 1);
    if (!name) continue;  // the window's row when nothing ended in it
    // Rows come ordered by queue: a new name starts a new series.
    if (out.queues.empty() || out.queues.back().queue != *name) {
      out.queues.push_back(
          MinuteSeries{*name, std::vector<std::int64_t>(n, 0), std::vector<std::int64_t>(n, 0)});
    }
    const std::size_t b = bucket_of(res, r, 2, minutes);
    out.queues.back().completed[b] = res.get<std::int64_t>(r, 3);
    out.queues.back().failed[b] = res.get<std::int64_t>(r, 4);
  }
  return out;
}

ShardClaims Admin::shard_claims(Connection& conn, const std::string& queue,
                                std::chrono::minutes window) const {
  const int minutes = checked_window(window);
  storage::validate_queue_name(queue);
  const auto res =
      pg::native(conn).exec(sql::render(sql::file("queries/admin/shard_claims.sql"), quoted_),
                            pg::make_params(queue, minutes));
  ShardClaims out;
  out.minutes = minutes;
  for (int r = 0; r < res.rows(); ++r) {
    if (r == 0) out.start = res.get<std::string>(r, 0);
    const auto priority = res.get_opt<std::int16_t>(r, 1);
    if (!priority) continue;  // the window's row when nothing was claimed
    const int shard = res.get<std::int16_t>(r, 2);
    // Rows come ordered by lane: a new (priority, shard) starts a new series.
    if (out.lanes.empty() || out.lanes.back().priority != *priority ||
        out.lanes.back().enqueue_shard != shard) {
      out.lanes.push_back(LaneClaims{
          *priority, shard, std::vector<std::int64_t>(static_cast<std::size_t>(minutes), 0)});
    }
    out.lanes.back().claims[bucket_of(res, r, 3, minutes)] = res.get<std::int64_t>(r, 4);
  }
  return out;
}

}  // namespace awa
