// The COPY path of QueueStorage::insert_many_copy (storage/enqueue_impl.hpp).
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/copy.hpp"
#include "storage/copy_rows.hpp"
#include "storage/enqueue_impl.hpp"
#include "storage/pg_array.hpp"

namespace awa {
namespace {

// "{1,2,3}" -> ids
std::vector<JobId> parse_int_array(std::string_view text) {
  std::vector<JobId> out;
  if (text.size() < 2) return out;
  text = text.substr(1, text.size() - 2);
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto item = text.substr(0, comma);
    JobId v = 0;
    std::from_chars(item.data(), item.data() + item.size(), v);
    out.push_back(v);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

std::vector<JobId> QueueStorage::Impl::insert_many_copy(pg::Connection& conn,
                                                        std::span<const NewJob> jobs) {
  std::vector<JobId> ids(jobs.size(), 0);
  if (jobs.empty()) return ids;
  if (conn.in_transaction()) return insert_staged(conn, jobs);
  return keyed_insert(conn, jobs,
                      [&](const Plan& p) { return insert_planned_copy(conn, p, jobs); });
}

std::vector<JobId> QueueStorage::Impl::insert_planned_copy(pg::Connection& conn, const Plan& p,
                                                           std::span<const NewJob> jobs) {
  std::vector<JobId> ids(jobs.size(), 0);
  if (const auto id = insert_one(conn, p, jobs)) return {*id};
  std::vector<storage::CopyPayload> payloads;
  payloads.reserve(p.lanes.size());
  for (const auto& lane : p.lanes)
    payloads.push_back(
        storage::encode_copy_rows(lane.key.priority, lane.key.shard, lane.rows, jobs));

  std::optional<std::string> late_error;
  std::vector<std::string> carried;
  std::vector<int> queue_ids(p.lanes.size(), 0);  // from the reservations, kept at commit
  try {
    std::size_t first = 0;  // index of the first lane's reservation in the script
    std::string script;
    if (!p.deferred.empty()) conn.exec("BEGIN");
    if (!p.deferred.empty()) {
      // No lane lock involved: before the script, so outside the lane-lock window.
      const auto res = conn.exec_cached(insert_deferred, deferred_params(p, jobs));
      for (int r = 0; r < res.rows(); ++r) {
        ids[p.deferred[static_cast<std::size_t>(r)]] = res.get<std::int64_t>(r, 0);
      }
    } else {
      script += "BEGIN;\n";
      first = 1;
    }
    if (!p.keyed_shards.empty()) {  // before any lane lock: see keyed_insert
      const auto [queues, counts] = check_arrays(p);
      const std::string lits[] = {conn.quote_literal(queues), conn.quote_literal(counts)};
      script += storage::bind_literals(check_shards, lits);
      script += ";\n";
      ++first;
    }
    for (const auto& lane : p.lanes) {
      const std::string lits[] = {conn.quote_literal(lane.key.queue),
                                  std::to_string(lane.key.priority), std::to_string(lane.key.shard),
                                  std::to_string(lane.rows.size())};
      script += storage::bind_literals(reserve_lane, lits);
      script += ";\n";
      script += copy_ready;
      script += ";\n";
    }
    std::size_t strict = first + 2 * p.lanes.size();
    script += "COMMIT;\n";
    ++strict;  // a NOTIFY failure after the COMMIT is only a warning (see notify)
    carried = wake_with_commit(p);
    if (!carried.empty()) {
      const std::string lits[] = {conn.quote_literal(notify_channels(carried))};
      script += storage::bind_literals(notify, lits);
    }

    std::vector<pg::Result> reserved(p.lanes.size());
    const auto lane_of = [&](std::size_t statement) { return (statement - first) / 2; };
    late_error = pg::run_script(
        conn, script, strict,
        [&](std::size_t statement) {
          const std::size_t l = lane_of(statement);
          if (statement < first || (statement - first) % 2 != 1 || l >= p.lanes.size()) {
            throw Error("enqueue: unexpected COPY in the enqueue script");
          }
          const auto& lane = p.lanes[l];
          const auto& res = reserved[l];
          const auto first_seq = res.get<std::int64_t>(0, 0);
          count_created(lane, res.get<bool>(0, 1));
          const auto slot = res.get<int>(0, 2);
          const auto lane_ids = parse_int_array(res.text(0, 3));
          const auto tx_micros = res.get<std::int64_t>(0, 4);
          const auto queue_id = res.get<std::int32_t>(0, 5);
          queue_ids[l] = queue_id;
          if (lane_ids.size() != lane.rows.size()) throw Error("enqueue: job id reservation short");
          auto& payload = payloads[l];
          for (std::size_t r = 0; r < lane.rows.size(); ++r) {
            payload.patch(r, slot, queue_id, first_seq + static_cast<std::int64_t>(r), lane_ids[r],
                          tx_micros);
            ids[lane.rows[r]] = lane_ids[r];
          }
          return std::move(payload.data);
        },
        [&](std::size_t statement, pg::Result&& res) {
          if (statement >= first && (statement - first) % 2 == 0 &&
              lane_of(statement) < p.lanes.size()) {
            reserved[lane_of(statement)] = std::move(res);
          }
        });
  } catch (...) {
    // The script stops at its error: the NOTIFY counted as sent was not.
    wakes.forget(carried);
    if (conn.ok() && conn.in_transaction()) {
      try {
        conn.exec("ROLLBACK");
      } catch (const Error&) {  // the original error is the one worth reporting
      }
    }
    throw;
  }
  std::vector<std::string> errors;
  if (late_error) errors.push_back(std::move(*late_error));
  wake_after_commit(conn, p, carried, errors);
  reservations.fetch_add(p.lanes.size(), std::memory_order_relaxed);
  remember_lanes(p, queue_ids);
  count_enqueued(p, jobs);
  return ids;
}

}  // namespace awa
