// The ledger check. Its SQL is the harness's own (tools/chaos/sql/ledger/); it reads
// the engine's tables as sql/migrations defines them and the view attempt_outcomes
// (sql/functions/0090_views.sql): one row per closed attempt — successes expanded from
// their claim closures, every other end from done_entries.
#include "ledger.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "sql_files.hpp"

namespace chaos {
namespace {

constexpr std::size_t kMaxProblems = 40;

void note(LedgerResult& r, std::string line) {
  if (r.problems.size() < kMaxProblems) r.problems.push_back(std::move(line));
}

std::string array_literal(const std::vector<std::optional<std::string>>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    if (!items[i]) {
      out += "NULL";
      continue;
    }
    out += '"';
    for (const char c : *items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

// Whole number of a cell, 0 when NULL.
std::int64_t num(const awa::pg::Result& res, int row, int col) {
  return res.get_opt<std::int64_t>(row, col).value_or(0);
}

// Text of a cell, `fallback` when NULL.
std::string_view str(const awa::pg::Result& res, int row, int col, std::string_view fallback) {
  return res.is_null(row, col) ? fallback : res.text(row, col);
}

using Lane = std::pair<int, int>;  // (priority, enqueue_shard)

struct Batch {
  std::int64_t id, first, last, n_items, covered = 0;
};

// Lane cursors against the rows: every claim batch inside [1, claim cursor) and disjoint
// from the lane's other batches; every ready row below the cursor (drained) and claimed by
// exactly one batch unless tombstoned; each batch's n_items equals the rows it covers; the
// claim cursor never ahead of the enqueue cursor; nothing available.
void check_lanes(awa::pg::Connection& db, const std::string& url, const std::string& queue,
                 LedgerResult& r) {
  std::map<Lane, std::int64_t> cursor;
  const auto heads = db.query(sql::file("ledger/claim_heads.sql"), queue);
  for (int i = 0; i < heads.rows(); ++i)
    cursor[{static_cast<int>(num(heads, i, 0)), static_cast<int>(num(heads, i, 1))}] =
        num(heads, i, 2);

  auto conn = awa::Connection::connect(url);
  for (const auto& s : awa::Admin().queue_shards(conn, queue)) {
    if (s.lag < 0 || s.available != 0) {
      ++r.lane_violations;
      note(r,
           fmt::format("lane p{} s{}: enqueue cursor {} claim cursor {} available {}", s.priority,
                       s.enqueue_shard, s.enqueue_cursor, s.claim_cursor, s.available));
    }
  }

  std::map<Lane, std::vector<Batch>> batches;
  const auto claims = db.query(sql::file("ledger/claim_batches.sql"), queue);
  for (int i = 0; i < claims.rows(); ++i)
    batches[{static_cast<int>(num(claims, i, 0)), static_cast<int>(num(claims, i, 1))}].push_back(
        {num(claims, i, 2), num(claims, i, 3), num(claims, i, 4), num(claims, i, 5)});
  for (auto& [lane, list] : batches) {
    std::sort(list.begin(), list.end(),
              [](const Batch& a, const Batch& b) { return a.first < b.first; });
    const auto cur = cursor.count(lane) != 0 ? cursor[lane] : 1;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto& b = list[i];
      const bool overlaps = i > 0 && b.first <= list[i - 1].last;
      if (b.first < 1 || b.last >= cur || b.first > b.last || overlaps) {
        ++r.lane_violations;
        note(r, fmt::format("lane p{} s{}: claim batch {} [{}, {}] {} (claim cursor {})",
                            lane.first, lane.second, b.id, b.first, b.last,
                            overlaps ? "overlaps the previous batch" : "outside the cursor", cur));
      }
    }
  }

  const auto ready = db.query(sql::file("ledger/ready_rows.sql"), queue);
  for (int i = 0; i < ready.rows(); ++i) {
    const Lane lane{static_cast<int>(num(ready, i, 0)), static_cast<int>(num(ready, i, 1))};
    const auto seq = num(ready, i, 2);
    const bool tombstoned = ready.get_opt<bool>(i, 3).value_or(false);
    const auto cur = cursor.count(lane) != 0 ? cursor[lane] : 1;
    int covering = 0;
    auto& list = batches[lane];
    // The last batch starting at or before seq; batches are disjoint when the checks
    // above passed, and a neighbour is looked at too in case they are not.
    auto it = std::upper_bound(list.begin(), list.end(), seq,
                               [](std::int64_t v, const Batch& b) { return v < b.first; });
    for (auto b = it; b != list.begin();) {
      --b;
      if (seq >= b->first && seq <= b->last) {
        ++covering;
        if (!tombstoned) ++b->covered;
      }
      if (std::distance(b, it) >= 2) break;
    }
    if (seq >= cur || (!tombstoned && covering != 1) || (tombstoned && covering > 1)) {
      ++r.lane_violations;
      note(r, fmt::format("lane p{} s{}: ready row lane_seq {} claimed by {} batches{} "
                          "(claim cursor {})",
                          lane.first, lane.second, seq, covering, tombstoned ? ", tombstoned" : "",
                          cur));
    }
  }
  for (const auto& [lane, list] : batches) {
    for (const auto& b : list) {
      if (b.covered != b.n_items) {
        ++r.lane_violations;
        note(r, fmt::format("lane p{} s{}: claim batch {} says {} items, covers {} rows",
                            lane.first, lane.second, b.id, b.n_items, b.covered));
      }
    }
  }
}

}  // namespace

std::int64_t load_ledger(awa::pg::Connection& db, const std::vector<ProducedJob>& jobs,
                         const std::vector<SealedBatch>& batches) {
  db.exec(sql::file("ledger/create_ledger.sql"));
  std::vector<std::optional<std::string>> m, j, p, s, k, o, u, b;
  for (const auto& job : jobs) {
    m.emplace_back(job.marker);
    j.emplace_back(std::to_string(job.job_id));
    p.emplace_back(std::to_string(job.producer));
    s.emplace_back(std::to_string(job.seq));
    k.emplace_back(job.kind);
    o.emplace_back(job.ordering_key);
    u.emplace_back(job.commit == CommitState::kUnknown ? "t" : "f");
    b.emplace_back(job.batch);
  }
  db.query(sql::file("ledger/insert_ledger.sql"), array_literal(m), array_literal(j),
           array_literal(p), array_literal(s), array_literal(k), array_literal(o), array_literal(u),
           array_literal(b));
  std::vector<std::optional<std::string>> names, producers;
  for (const auto& batch : batches) {
    names.emplace_back(batch.name);
    producers.emplace_back(std::to_string(batch.producer));
  }
  db.query(sql::file("ledger/insert_batches.sql"), array_literal(names), array_literal(producers));
  db.exec(sql::file("ledger/find_markers.sql"));
  return num(db.query(sql::file("ledger/unknown_counts.sql")), 0, 2);
}

std::int64_t unfinished(const std::string& url, const std::string& queue) {
  auto conn = awa::Connection::connect(url);
  const auto c = awa::Admin().queue_counts(conn, queue);
  return c.waiting + c.available + c.running + c.scheduled + c.retryable;
}

LedgerResult check_ledger(awa::pg::Connection& db, const std::string& url,
                          const std::string& queue) {
  LedgerResult r;
  // A copy of the view awa.attempt_outcomes with the success expansion materialised first,
  // so the planner hashes the lane-key join: the view itself, on fresh tables, joins every
  // claim batch of a lane with every ready row of it (quadratic).
  db.exec(sql::file("ledger/snapshot_outcomes.sql"));
  if (num(db.query(sql::file("ledger/count_outcomes.sql")), 0, 0) <= 20000) {
    // The copy must agree with the view (compared on small ledgers only).
    if (const auto differ = num(db.query(sql::file("ledger/view_differences.sql")), 0, 0);
        differ != 0) {
      ++r.lane_violations;
      note(r, fmt::format("the ledger's copy of attempt_outcomes differs from the view in {} "
                          "rows (a harness bug, or the view changed)",
                          differ));
    }
  }
  const auto counts = db.query(sql::file("ledger/unknown_counts.sql"));
  r.unknown_commits = num(counts, 0, 0);
  r.unknown_applied = num(counts, 0, 1);
  r.jobs = num(counts, 0, 2);

  const auto identity = db.query(sql::file("ledger/identity_mismatches.sql"));
  for (int i = 0; i < identity.rows(); ++i) {
    ++r.phantom;
    note(r, fmt::format("marker {}: ledger job {} but the database has job(s) {}",
                        str(identity, i, 0, "?"), str(identity, i, 1, "none"),
                        str(identity, i, 2, "?")));
  }

  const auto t = db.query(sql::file("ledger/terminal_counts.sql"));
  r.completed = num(t, 0, 0);
  r.failed = num(t, 0, 1);
  r.cancelled = num(t, 0, 2);
  r.dlq = num(t, 0, 3);

  const auto twice = db.query(sql::file("ledger/double_finalised.sql"));
  for (int i = 0; i < twice.rows(); ++i) {
    ++r.double_finalised;
    note(r,
         fmt::format("double finalised: job {}: {}", str(twice, i, 0, "?"), str(twice, i, 1, "?")));
  }
  const auto lost = db.query(sql::file("ledger/lost_jobs.sql"));
  for (int i = 0; i < lost.rows(); ++i) {
    ++r.lost;
    const bool pending = lost.get_opt<bool>(i, 3).value_or(false);
    if (pending) ++r.lost_pending;
    note(r, fmt::format("lost: job {} ({}, {}): {}; attempts: {}", str(lost, i, 0, "?"),
                        str(lost, i, 1, "?"), str(lost, i, 2, "?"),
                        pending ? "still pending after the drain" : "no row holds it",
                        str(lost, i, 4, "none")));
  }
  const auto again = db.query(sql::file("ledger/resurrected_jobs.sql"));
  for (int i = 0; i < again.rows(); ++i) {
    ++r.resurrected;
    note(r, fmt::format("resurrected: job {} runnable again after its terminal end (lease {})",
                        str(again, i, 0, "?"), str(again, i, 1, "?")));
  }
  const auto order = db.query(sql::file("ledger/key_order_violations.sql"));
  for (int i = 0; i < order.rows(); ++i) {
    r.keyed_checked = num(order, i, 0);
    r.keyed_moves = num(order, i, 1);
    r.keyed_moves_checked = num(order, i, 2);
    if (order.is_null(i, 3)) continue;
    ++r.order_violations;
    note(r, fmt::format("key order: key {}: job {} (shard {}, lane_seq {}) after job {} "
                        "(shard {}, lane_seq {})",
                        str(order, i, 3, "?"), str(order, i, 4, "?"), str(order, i, 6, "?"),
                        str(order, i, 8, "?"), str(order, i, 5, "?"), str(order, i, 7, "?"),
                        str(order, i, 9, "?")));
  }
  const auto deps = db.query(sql::file("ledger/started_before_parents.sql"));
  r.dependency_edges = num(deps, 0, 0);
  r.started_before_parents = num(deps, 0, 2);
  if (r.started_before_parents > 0)
    note(r, fmt::format("started before its parents: {}", str(deps, 0, 1, "?")));
  const auto batches = db.query(sql::file("ledger/batch_callbacks_not_once.sql"),
                                std::string(kBatchCallbackKind), queue);
  r.batches_judged = num(batches, 0, 0);
  r.batch_callbacks_not_once = num(batches, 0, 2);
  if (r.batch_callbacks_not_once > 0) {
    // One line per batch (the query joins them with " | ").
    std::string_view rest = str(batches, 0, 1, "?");
    for (;;) {
      const auto bar = rest.find(" | ");
      note(r, fmt::format("batch callback: {}", rest.substr(0, bar)));
      if (bar == std::string_view::npos) break;
      rest.remove_prefix(bar + 3);
    }
  }
  // Only a run with the exactly-once worker has credits (awa_hosts runs none).
  if (num(db.query(sql::file("ledger/has_credits.sql")), 0, 0) == 1) {
    const auto credits = db.query(sql::file("ledger/credits_not_once.sql"));
    r.credit_jobs = num(credits, 0, 0);
    r.credits_not_once = num(credits, 0, 2);
    if (r.credits_not_once > 0)
      note(r, fmt::format("credits not once: {}", str(credits, 0, 1, "?")));
  }
  const auto ru = db.query(sql::file("ledger/retried_and_unexpected.sql"));
  r.retried_jobs = num(ru, 0, 0);
  r.unexpected_end = num(ru, 0, 1);
  check_lanes(db, url, queue, r);
  return r;
}

std::vector<double> recovery_seconds(awa::pg::Connection& db,
                                     const std::vector<std::chrono::system_clock::time_point>& at) {
  const auto query = sql::file("ledger/recovery_seconds.sql");
  std::vector<double> out;
  for (const auto& t : at) {
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
    const auto v = db.query(query, fmt::format("{:.6f}", static_cast<double>(us) / 1e6));
    out.push_back(v.empty() ? -1.0 : v.get_opt<double>(0, 0).value_or(-1.0));
  }
  return out;
}

}  // namespace chaos
