// The ledger check. SQL here is the harness's own (one statement per constant); it reads
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

constexpr const char* kCreateLedger = R"sql(
SET client_min_messages = warning;
CREATE SCHEMA IF NOT EXISTS chaos;
DROP TABLE IF EXISTS chaos.ledger, chaos.found, chaos.outcomes, chaos.ready;
CREATE TABLE chaos.ledger (
    marker    text PRIMARY KEY,
    job_id    bigint NOT NULL,
    producer  int NOT NULL,
    seq       bigint NOT NULL,
    kind      text NOT NULL,
    okey      text,
    unknown   boolean NOT NULL,
    committed boolean NOT NULL)
)sql";

constexpr const char* kInsertLedger = R"sql(
INSERT INTO chaos.ledger (marker, job_id, producer, seq, kind, okey, unknown, committed)
SELECT m, j, p, s, k, o, u, NOT u
FROM unnest($1::text[], $2::bigint[], $3::int[], $4::bigint[], $5::text[], $6::text[],
            $7::boolean[]) AS t(m, j, p, s, k, o, u)
)sql";

// Every job of the run the database holds, by marker: its first ready row (ring rotation
// is off, so it is never pruned), or a deferred / dead-letter row.
constexpr const char* kFound = R"sql(
CREATE TABLE chaos.found AS
SELECT args->>'m' AS marker, job_id FROM awa.ready_entries WHERE args ? 'm'
UNION SELECT args->>'m', job_id FROM awa.deferred_jobs WHERE args ? 'm'
UNION SELECT args->>'m', job_id FROM awa.dlq_entries WHERE args ? 'm';
CREATE INDEX ON chaos.found (marker);
UPDATE chaos.ledger l SET committed = true
WHERE l.unknown AND EXISTS (SELECT 1 FROM chaos.found f WHERE f.marker = l.marker)
)sql";

constexpr const char* kUnknownCounts = R"sql(
SELECT count(*) FILTER (WHERE unknown), count(*) FILTER (WHERE unknown AND committed),
       count(*) FILTER (WHERE committed)
FROM chaos.ledger
)sql";

// The rows of awa.attempt_outcomes, built the same way (successes expanded from their
// 'completed' claim closures and hydrated from their ready rows, every other end from
// done_entries) but with the expansion materialised first so the planner hashes the
// lane-key join; the view itself, on fresh tables, joins every claim batch of a lane with
// every ready row of it (quadratic). chaos.ready copies the ready rows with a job_id index.
constexpr const char* kSnapshotOutcomes = R"sql(
SET client_min_messages = warning;
DROP TABLE IF EXISTS chaos.outcomes, chaos.ready;
ANALYZE awa.ready_entries, awa.claim_batches, awa.claim_closures, awa.done_entries;
CREATE TABLE chaos.ready AS
SELECT queue, priority, enqueue_shard, lane_seq, job_id, run_lease, attempt FROM awa.ready_entries;
CREATE INDEX ON chaos.ready (job_id);
CREATE TABLE chaos.outcomes AS
WITH closed AS MATERIALIZED (
    SELECT b.queue, b.priority, b.enqueue_shard, s.lane_seq, c.closed_at
    FROM awa.claim_closures c
    JOIN awa.claim_batches b ON b.claim_slot = c.claim_slot AND b.batch_id = c.batch_id
    CROSS JOIN LATERAL unnest(c.lane_seqs) AS rg(closed)
    CROSS JOIN LATERAL generate_series(lower(rg.closed), upper(rg.closed) - 1) AS s(lane_seq)
    WHERE c.outcome = 'completed')
SELECT r.job_id, r.run_lease + 1 AS run_lease, r.attempt + 1 AS attempt, 'completed'::text AS state,
       c.closed_at AS finished_at
FROM closed c
JOIN chaos.ready r USING (queue, priority, enqueue_shard, lane_seq)
UNION ALL
SELECT d.job_id, d.run_lease, d.attempt, d.state, d.finished_at FROM awa.done_entries d;
CREATE INDEX ON chaos.outcomes (job_id);
ANALYZE chaos.ready, chaos.outcomes
)sql";

// The copy must agree with the view (run on small ledgers only: the view is quadratic).
constexpr const char* kViewAgrees = R"sql(
SELECT (SELECT count(*) FROM (SELECT job_id, run_lease, state FROM awa.attempt_outcomes
                              EXCEPT ALL
                              SELECT job_id, run_lease, state FROM chaos.outcomes) a)
     + (SELECT count(*) FROM (SELECT job_id, run_lease, state FROM chaos.outcomes
                              EXCEPT ALL
                              SELECT job_id, run_lease, state FROM awa.attempt_outcomes) b)
)sql";

// A marker that names two jobs, or a ledger id that differs from the database's.
constexpr const char* kIdentity = R"sql(
SELECT f.marker, l.job_id, string_agg(f.job_id::text, ',')
FROM chaos.found f LEFT JOIN chaos.ledger l ON l.marker = f.marker
GROUP BY f.marker, l.job_id
HAVING count(*) > 1 OR l.job_id IS NULL OR bool_or(f.job_id <> l.job_id)
ORDER BY 1
)sql";

constexpr const char* kTerminalCounts = R"sql(
SELECT count(*) FILTER (WHERE o.state = 'completed'), count(*) FILTER (WHERE o.state = 'failed'),
       count(*) FILTER (WHERE o.state = 'cancelled'), count(*) FILTER (WHERE o.state = 'dlq')
FROM chaos.outcomes o JOIN chaos.ledger l ON l.job_id = o.job_id AND l.committed
WHERE o.state IN ('completed', 'failed', 'cancelled', 'dlq')
)sql";

// Jobs with an attempt (job_id, run_lease) closed more than once, or more than one
// terminal end.
constexpr const char* kDoubleFinalised = R"sql(
SELECT job_id, string_agg(DISTINCT why, '; ')
FROM (SELECT job_id, format('attempt run_lease %s closed %s times (%s)', run_lease, count(*),
                            string_agg(state, ',')) AS why
      FROM chaos.outcomes GROUP BY job_id, run_lease HAVING count(*) > 1
      UNION ALL
      SELECT job_id, format('%s terminal ends (%s)', count(*), string_agg(state, ','))
      FROM chaos.outcomes WHERE state IN ('completed', 'failed', 'cancelled', 'dlq')
      GROUP BY job_id HAVING count(*) > 1) x
GROUP BY job_id ORDER BY job_id
)sql";

// Committed jobs without a terminal end; pending = still deferred, or a ready row whose
// attempt has no outcome (unclaimed or running).
constexpr const char* kLost = R"sql(
SELECT l.job_id, l.marker, l.kind,
       EXISTS (SELECT 1 FROM awa.deferred_jobs d WHERE d.job_id = l.job_id)
       OR EXISTS (SELECT 1 FROM chaos.ready r WHERE r.job_id = l.job_id
                  AND NOT EXISTS (SELECT 1 FROM chaos.outcomes o
                                  WHERE o.job_id = r.job_id AND o.run_lease = r.run_lease + 1)),
       (SELECT string_agg(format('%s@%s', o.state, o.run_lease), ',' ORDER BY o.run_lease)
        FROM chaos.outcomes o WHERE o.job_id = l.job_id)
FROM chaos.ledger l
WHERE l.committed AND NOT EXISTS (
    SELECT 1 FROM chaos.outcomes o
    WHERE o.job_id = l.job_id AND o.state IN ('completed', 'failed', 'cancelled', 'dlq'))
ORDER BY l.job_id
)sql";

// Runnable again after its terminal end: a deferred row, or a ready row of a later lease.
constexpr const char* kResurrected = R"sql(
SELECT t.job_id, t.run_lease
FROM (SELECT job_id, min(run_lease) AS run_lease FROM chaos.outcomes
      WHERE state IN ('completed', 'failed', 'cancelled', 'dlq') GROUP BY job_id) t
WHERE EXISTS (SELECT 1 FROM awa.deferred_jobs d WHERE d.job_id = t.job_id)
   OR EXISTS (SELECT 1 FROM chaos.ready r WHERE r.job_id = t.job_id
              AND r.run_lease >= t.run_lease)
ORDER BY 1
)sql";

// Keyed jobs that ran exactly once, in producer order per key: each must sit on the
// key's one shard (lane) after its predecessor, so the lane's claim order is the
// producer's commit order.
constexpr const char* kKeyOrder = R"sql(
WITH once AS (
    SELECT l.okey, l.seq, l.job_id, r.enqueue_shard, r.lane_seq
    FROM chaos.ledger l
    JOIN chaos.ready r ON r.job_id = l.job_id AND r.run_lease = 0
    WHERE l.committed AND l.okey IS NOT NULL
      AND (SELECT count(*) FROM chaos.outcomes o WHERE o.job_id = l.job_id) = 1),
ordered AS (
    SELECT o.*, lag(o.enqueue_shard) OVER w AS prev_shard, lag(o.lane_seq) OVER w AS prev_seq,
           lag(o.job_id) OVER w AS prev_job
    FROM once o WINDOW w AS (PARTITION BY o.okey ORDER BY o.seq))
SELECT (SELECT count(*) FROM once), okey, job_id, prev_job, enqueue_shard, prev_shard, lane_seq,
       prev_seq
FROM ordered
WHERE prev_job IS NOT NULL AND (enqueue_shard <> prev_shard OR lane_seq <= prev_seq)
UNION ALL
SELECT (SELECT count(*) FROM once), NULL, NULL, NULL, NULL, NULL, NULL, NULL
)sql";

constexpr const char* kRetriedAndUnexpected = R"sql(
WITH per AS (
    SELECT l.kind, l.job_id, count(*) AS attempts,
           max(o.state) FILTER (WHERE o.state IN ('completed', 'failed', 'cancelled', 'dlq')) AS fin
    FROM chaos.ledger l JOIN chaos.outcomes o ON o.job_id = l.job_id
    WHERE l.committed GROUP BY l.kind, l.job_id)
SELECT count(*) FILTER (WHERE attempts > 1),
       count(*) FILTER (WHERE (kind = 'fail' AND fin <> 'failed')
                           OR (kind <> 'fail' AND fin <> 'completed'))
FROM per
)sql";

constexpr const char* kClaimHeads = R"sql(
SELECT priority, enqueue_shard, claim_seq FROM awa.queue_claim_heads WHERE queue = $1
)sql";
constexpr const char* kBatches = R"sql(
SELECT priority, enqueue_shard, batch_id, first_seq, last_seq, n_items
FROM awa.claim_batches WHERE queue = $1
)sql";
constexpr const char* kReadyRows = R"sql(
SELECT r.priority, r.enqueue_shard, r.lane_seq,
       EXISTS (SELECT 1 FROM awa.ready_tombstones t
               WHERE t.queue = r.queue AND t.priority = r.priority
                 AND t.enqueue_shard = r.enqueue_shard AND t.lane_seq = r.lane_seq)
FROM awa.ready_entries r WHERE r.queue = $1
)sql";

using Lane = std::pair<int, int>;  // (priority, enqueue_shard)

struct Batch {
  std::int64_t id, first, last, n_items, covered = 0;
};

// Lane cursors against the rows: every claim batch inside [1, claim cursor) and disjoint
// from the lane's other batches; every ready row below the cursor (drained) and claimed by
// exactly one batch unless tombstoned; each batch's n_items equals the rows it covers; the
// claim cursor never ahead of the enqueue cursor; nothing available.
void check_lanes(Db& db, const std::string& url, const std::string& queue, LedgerResult& r) {
  std::map<Lane, std::int64_t> cursor;
  for (const auto& row : db.query(kClaimHeads, {queue}))
    cursor[{static_cast<int>(to_ll(row[0])), static_cast<int>(to_ll(row[1]))}] = to_ll(row[2]);

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
  for (const auto& row : db.query(kBatches, {queue}))
    batches[{static_cast<int>(to_ll(row[0])), static_cast<int>(to_ll(row[1]))}].push_back(
        {to_ll(row[2]), to_ll(row[3]), to_ll(row[4]), to_ll(row[5])});
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

  for (const auto& row : db.query(kReadyRows, {queue})) {
    const Lane lane{static_cast<int>(to_ll(row[0])), static_cast<int>(to_ll(row[1]))};
    const auto seq = to_ll(row[2]);
    const bool tombstoned = row[3] && *row[3] == "t";
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

std::int64_t load_ledger(Db& db, const std::vector<ProducedJob>& jobs) {
  db.script(kCreateLedger);
  std::vector<std::optional<std::string>> m, j, p, s, k, o, u;
  for (const auto& job : jobs) {
    m.emplace_back(job.marker);
    j.emplace_back(std::to_string(job.job_id));
    p.emplace_back(std::to_string(job.producer));
    s.emplace_back(std::to_string(job.seq));
    k.emplace_back(job.kind);
    o.emplace_back(job.ordering_key);
    u.emplace_back(job.commit == CommitState::kUnknown ? "t" : "f");
  }
  db.query(kInsertLedger, {array_literal(m), array_literal(j), array_literal(p), array_literal(s),
                           array_literal(k), array_literal(o), array_literal(u)});
  db.script(kFound);
  return to_ll(db.query(kUnknownCounts)[0][2]);
}

std::int64_t unfinished(const std::string& url, const std::string& queue) {
  auto conn = awa::Connection::connect(url);
  const auto c = awa::Admin().queue_counts(conn, queue);
  return c.available + c.running + c.scheduled + c.retryable;
}

LedgerResult check_ledger(Db& db, const std::string& url, const std::string& queue) {
  LedgerResult r;
  db.script(kSnapshotOutcomes);
  if (to_ll(db.scalar("SELECT count(*) FROM chaos.outcomes")) <= 20000) {
    if (const auto differ = to_ll(db.scalar(kViewAgrees)); differ != 0) {
      ++r.lane_violations;
      note(r, fmt::format("the ledger's copy of attempt_outcomes differs from the view in {} "
                          "rows (a harness bug, or the view changed)",
                          differ));
    }
  }
  const auto counts = db.query(kUnknownCounts)[0];
  r.unknown_commits = to_ll(counts[0]);
  r.unknown_applied = to_ll(counts[1]);
  r.jobs = to_ll(counts[2]);

  for (const auto& row : db.query(kIdentity)) {
    ++r.phantom;
    note(r, fmt::format("marker {}: ledger job {} but the database has job(s) {}",
                        row[0].value_or("?"), row[1].value_or("none"), row[2].value_or("?")));
  }

  const auto t = db.query(kTerminalCounts)[0];
  r.completed = to_ll(t[0]);
  r.failed = to_ll(t[1]);
  r.cancelled = to_ll(t[2]);
  r.dlq = to_ll(t[3]);

  for (const auto& row : db.query(kDoubleFinalised)) {
    ++r.double_finalised;
    note(r,
         fmt::format("double finalised: job {}: {}", row[0].value_or("?"), row[1].value_or("?")));
  }
  for (const auto& row : db.query(kLost)) {
    ++r.lost;
    const bool pending = row[3] && *row[3] == "t";
    if (pending) ++r.lost_pending;
    note(r, fmt::format("lost: job {} ({}, {}): {}; attempts: {}", row[0].value_or("?"),
                        row[1].value_or("?"), row[2].value_or("?"),
                        pending ? "still pending after the drain" : "no row holds it",
                        row[4].value_or("none")));
  }
  for (const auto& row : db.query(kResurrected)) {
    ++r.resurrected;
    note(r, fmt::format("resurrected: job {} runnable again after its terminal end (lease {})",
                        row[0].value_or("?"), row[1].value_or("?")));
  }
  for (const auto& row : db.query(kKeyOrder)) {
    r.keyed_checked = to_ll(row[0]);
    if (!row[1]) continue;
    ++r.order_violations;
    note(r, fmt::format("key order: key {}: job {} (shard {}, lane_seq {}) after job {} "
                        "(shard {}, lane_seq {})",
                        row[1].value_or("?"), row[2].value_or("?"), row[4].value_or("?"),
                        row[6].value_or("?"), row[3].value_or("?"), row[5].value_or("?"),
                        row[7].value_or("?")));
  }
  const auto ru = db.query(kRetriedAndUnexpected)[0];
  r.retried_jobs = to_ll(ru[0]);
  r.unexpected_end = to_ll(ru[1]);
  check_lanes(db, url, queue, r);
  return r;
}

std::vector<double> recovery_seconds(Db& db,
                                     const std::vector<std::chrono::system_clock::time_point>& at) {
  constexpr const char* kRecovery = R"sql(
SELECT extract(epoch FROM min(c.closed_at) - to_timestamp($1::double precision))
FROM awa.claim_closures c
JOIN awa.claim_batches b ON b.claim_slot = c.claim_slot AND b.batch_id = c.batch_id
WHERE c.outcome = 'completed' AND b.claimed_at > to_timestamp($1::double precision)
)sql";
  std::vector<double> out;
  for (const auto& t : at) {
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
    const auto v = db.scalar(kRecovery, {fmt::format("{:.6f}", static_cast<double>(us) / 1e6)});
    out.push_back(v ? std::stod(*v) : -1.0);
  }
  return out;
}

}  // namespace chaos
