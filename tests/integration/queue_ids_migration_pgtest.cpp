// Migration 0018_queue_ids on a populated schema: a schema at version 17 holding what the
// previous release's producers, claimers and prune wrote (rows keyed by queue name: lanes
// with a backlog, a completed claim, an open claim with a lease, a tombstone, rollups, a
// shard fence) is migrated by this build and then drained by it. Every job not yet
// claimed is claimed exactly once, lane by lane in lane_seq order from the claim cursor;
// the open attempt of the old claim still completes; the counts carry over; new jobs
// continue the old lanes' sequences; and no hot table keeps a name column.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "schema/migrator.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/store_access.hpp"
#include "support.hpp"

namespace awa::testing {
namespace {

class QueueIdsMigrationTest : public PgTest {
 protected:
  std::int64_t scalar(const std::string& sql) { return conn().exec(sql).get<std::int64_t>(0, 0); }

  // Applies the migrations up to `last` as the migrator would have, functions aside.
  void install_through(int last) {
    conn().exec(
        "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
        "checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
    const auto quoted = sql::quote_schema(schema_);
    for (const auto& m : schema::embedded_migrations()) {
      if (m.version > last) break;
      conn().exec(sql::render(m.text, quoted));
      conn().query("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                   m.version, m.name, m.checksum);
    }
  }

  // A lane as the previous release's ensure_lane made it, with `rows` ready rows in the
  // current queue slot and its claim cursor at `claim_seq`. Returns the job ids by lane_seq.
  std::vector<std::int64_t> old_lane(const std::string& queue, int shard, int rows,
                                     std::int64_t claim_seq) {
    const auto lane_id = scalar("SELECT nextval('lane_ids')");
    const std::string seq = "lane_seq_" + std::to_string(lane_id);
    conn().exec("CREATE SEQUENCE " + seq + " AS bigint MINVALUE 1 START 1");
    conn().query(
        "INSERT INTO queue_enqueue_heads (queue, priority, enqueue_shard, lane_id, seq) "
        "VALUES ($1, 2, $2, $3, $4::regclass)",
        queue, shard, lane_id, seq);
    conn().query(
        "INSERT INTO queue_claim_heads (queue, priority, enqueue_shard, claim_seq) "
        "VALUES ($1, 2, $2, $3)",
        queue, shard, claim_seq);
    const auto r = conn().query(
        "WITH ins AS (INSERT INTO ready_entries (ready_slot, queue, priority, enqueue_shard, "
        "lane_seq, job_id, "
        "kind, args, max_attempts, run_at, created_at) "
        "SELECT (SELECT slot FROM ring_rotations WHERE ring = 'queue' ORDER BY generation DESC "
        "LIMIT 1), $1, 2, $2, nextval($3::regclass), nextval('job_ids'), 'old', "
        "jsonb_build_object('i', i), 5, now(), now() FROM generate_series(1, $4::int) i "
        "RETURNING job_id, lane_seq) SELECT job_id FROM ins ORDER BY lane_seq",
        queue, shard, seq, rows);
    std::vector<std::int64_t> ids;
    for (int i = 0; i < r.rows(); ++i) ids.push_back(r.get<std::int64_t>(i, 0));
    return ids;
  }

  // A claim batch of the previous release over lane_seq [first, last] of the lane.
  std::int64_t old_batch(const std::string& queue, int shard, int first, int last) {
    return conn()
        .query(
            "INSERT INTO claim_batches (claim_slot, batch_id, queue, priority, enqueue_shard, "
            "first_seq, last_seq, n_items, claimed_at) "
            "VALUES ((SELECT slot FROM ring_rotations WHERE ring = 'claim' ORDER BY generation "
            "DESC LIMIT 1), nextval('claim_batch_ids'), $1, 2, $2, $3::bigint, $4::bigint, "
            "$4::int - $3::int + 1, now()) "
            "RETURNING batch_id",
            queue, shard, first, last)
        .get<std::int64_t>(0, 0);
  }
};

TEST_F(QueueIdsMigrationTest, APopulatedSchemaMigratesAndDrainsExactlyOnceInOrder) {
  install_through(17);
  conn().exec("INSERT INTO queue_meta (queue, enqueue_shards) VALUES ('alpha', 2)");

  // alpha shard 0: rows 1..3 claimed and completed (one closure), the rest waiting.
  const auto a0 = old_lane("alpha", 0, 10, 4);
  const auto done_batch = old_batch("alpha", 0, 1, 3);
  conn().query(
      "INSERT INTO claim_closures (claim_slot, batch_id, outcome, lane_seqs, n_closed) "
      "SELECT claim_slot, batch_id, 'completed', int8multirange(int8range(1, 4)), 3 "
      "FROM claim_batches WHERE batch_id = $1",
      done_batch);
  // alpha shard 1: row 5 cancelled before it was claimed (tombstone and done row).
  const auto a1 = old_lane("alpha", 1, 10, 1);
  conn().exec(
      "INSERT INTO ready_tombstones (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id) "
      "SELECT ready_slot, queue, priority, enqueue_shard, lane_seq, job_id FROM ready_entries "
      "WHERE queue = 'alpha' AND enqueue_shard = 1 AND lane_seq = 5");
  conn().exec(
      "INSERT INTO done_entries (ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, "
      "run_lease, attempt, state, error) "
      "SELECT ready_slot, queue, priority, enqueue_shard, lane_seq, job_id, 0, 0, 'cancelled', "
      "'cancelled before it ran' FROM ready_entries "
      "WHERE queue = 'alpha' AND enqueue_shard = 1 AND lane_seq = 5");
  // beta: rows 1..2 claimed by a claim still open, row 1 heartbeating (a lease).
  const auto b0 = old_lane("beta", 0, 10, 3);
  const auto open_batch = old_batch("beta", 0, 1, 2);
  conn().query(
      "INSERT INTO leases (lease_slot, queue, priority, enqueue_shard, lane_seq, job_id, "
      "run_lease, ready_slot, attempt, claim_batch) "
      "SELECT (SELECT slot FROM ring_rotations WHERE ring = 'lease' ORDER BY generation DESC "
      "LIMIT 1), queue, priority, enqueue_shard, lane_seq, job_id, 1, ready_slot, 1, $1 "
      "FROM ready_entries WHERE queue = 'beta' AND lane_seq = 1",
      open_batch);
  // Pruned history and a shard fence of a queue with nothing else.
  conn().exec("INSERT INTO terminal_rollups (queue, state, jobs) VALUES ('alpha', 'completed', 5)");
  conn().exec(
      "INSERT INTO minute_rollups (queue, priority, enqueue_shard, minute, completed, claims) "
      "VALUES ('alpha', 2, 0, date_trunc('minute', now()), 5, 5)");
  conn().exec(
      "INSERT INTO shard_fences (queue, epoch, priority, enqueue_shard, fence_seq) "
      "VALUES ('gamma', 1, 2, 0, 7)");

  const auto report = schema::Migrator(schema_).migrate(conn());
  ASSERT_FALSE(report.applied.empty());
  EXPECT_EQ(report.applied.front(), "0018_queue_ids.sql");

  // Ids given in name order; no hot table keeps a name column; the keys are on the id.
  EXPECT_EQ(scalar("SELECT count(*) FROM queue_ids"), 3);
  EXPECT_EQ(
      conn().exec("SELECT string_agg(queue, ',' ORDER BY queue_id) FROM queue_ids").text(0, 0),
      "alpha,beta,gamma");
  EXPECT_EQ(
      scalar("SELECT count(*) FROM information_schema.columns WHERE table_schema = '" + schema_ +
             "' AND column_name = 'queue' AND table_name IN ('ready_entries', "
             "'done_entries', 'ready_tombstones', 'claim_batches', 'leases', "
             "'queue_enqueue_heads', 'queue_claim_heads', 'terminal_rollups', "
             "'minute_rollups', 'shard_fences')"),
      0);
  EXPECT_EQ(conn().exec("SELECT pg_get_indexdef('ready_entries_pkey'::regclass)")
                    .text(0, 0)
                    .find("(ready_slot, queue_id, priority, enqueue_shard, lane_seq)") !=
                std::string::npos,
            true);
  EXPECT_EQ(scalar("SELECT count(*) FROM shard_fences WHERE queue_id = queue_id_of('gamma')"), 1);

  // The counts carry over: 3 closed + 5 pruned completed, 1 cancelled, 2 running.
  const auto alpha = conn().exec(
      "SELECT available, running, completed, cancelled FROM queue_counts_exact('alpha')");
  EXPECT_EQ(alpha.get<std::int64_t>(0, 0), 7 + 9);
  EXPECT_EQ(alpha.get<std::int64_t>(0, 1), 0);
  EXPECT_EQ(alpha.get<std::int64_t>(0, 2), 8);
  EXPECT_EQ(alpha.get<std::int64_t>(0, 3), 1);
  const auto beta = conn().exec("SELECT available, running FROM queue_counts_exact('beta')");
  EXPECT_EQ(beta.get<std::int64_t>(0, 0), 8);
  EXPECT_EQ(beta.get<std::int64_t>(0, 1), 2);

  // New jobs after the migration: alpha's lanes go on from their sequences (the second
  // job takes the one-job path: its lane and the queue's id are cached by then); a new
  // queue gets the next id.
  QueueStorage store(StorageOptions{schema_});
  InsertOpts on_alpha;
  on_alpha.queue = "alpha";
  on_alpha.ordering_key = "k";  // keyed: both land on the same one of alpha's old lanes
  std::vector<std::int64_t> late;
  for (int i = 0; i < 2; ++i) {
    const std::vector<NewJob> job{NewJob("new", nlohmann::json::object(), on_alpha)};
    late.push_back(storage::insert_many(store, conn(), job).at(0));
  }
  InsertOpts on_delta;
  on_delta.queue = "delta";
  const std::vector<NewJob> delta_job{NewJob("new", nlohmann::json::object(), on_delta)};
  const auto fresh = storage::insert_many(store, conn(), delta_job).at(0);
  EXPECT_EQ(scalar("SELECT queue_id FROM queue_ids WHERE queue = 'delta'"), 4);
  EXPECT_EQ(scalar("SELECT min(lane_seq) FROM ready_entries WHERE job_id IN (" +
                   std::to_string(late[0]) + ", " + std::to_string(late[1]) + ")"),
            11);

  // Drain: every job not claimed before the migration, exactly once, in lane order.
  std::map<std::tuple<std::string, int>, std::vector<std::int64_t>> seqs;
  std::map<std::int64_t, int> claimed;
  for (const std::string queue : {"alpha", "beta", "delta"}) {
    for (int round = 0; round < 100; ++round) {
      QueueStorage::ClaimOptions o;
      o.max_batch = 3;
      const auto got = storage::consumer(store).claim(conn(), queue, o);
      if (got.empty()) break;
      std::vector<Completion> cs;
      for (const auto& e : got) {
        EXPECT_EQ(e.queue, queue);
        ++claimed[e.job_id];
        seqs[{queue, e.enqueue_shard}].push_back(e.lane_seq);
        cs.push_back(Completion::of(e, Outcome::kCompleted));
      }
      for (const auto& r : storage::consumer(store).complete(conn(), cs))
        EXPECT_EQ(r.state, "completed");
    }
  }
  std::set<std::int64_t> expected(a0.begin() + 3, a0.end());
  expected.insert(a1.begin(), a1.end());
  expected.erase(a1[4]);  // tombstoned
  expected.insert(b0.begin() + 2, b0.end());
  expected.insert(late.begin(), late.end());
  expected.insert(fresh);
  std::set<std::int64_t> got;
  for (const auto& [id, n] : claimed) {
    EXPECT_EQ(n, 1) << "job " << id << " claimed " << n << " times";
    got.insert(id);
  }
  EXPECT_EQ(got, expected);
  for (const auto& [lane, s] : seqs) {
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()))
        << std::get<0>(lane) << " shard " << std::get<1>(lane) << " out of lane order";
  }
  const auto& alpha0 = seqs[std::make_tuple(std::string("alpha"), 0)];
  ASSERT_FALSE(alpha0.empty());
  EXPECT_EQ(alpha0.front(), 4) << "alpha shard 0 resumes at its claim cursor";

  // The open attempts of the old claim complete through the new functions, once.
  const auto closed = conn().query(
      "SELECT count(*) FROM close_attempts(ARRAY[$1, $1]::bigint[], ARRAY[1, 2]::bigint[], "
      "ARRAY['completed', 'completed'])",
      open_batch);
  EXPECT_EQ(closed.get<std::int64_t>(0, 0), 2);
  EXPECT_EQ(scalar("SELECT count(*) FROM leases"), 0) << "the lease ends with its attempt";
  const auto beta_after =
      conn().exec("SELECT available, running, completed FROM queue_counts_exact('beta')");
  EXPECT_EQ(beta_after.get<std::int64_t>(0, 0), 0);
  EXPECT_EQ(beta_after.get<std::int64_t>(0, 1), 0);
  EXPECT_EQ(beta_after.get<std::int64_t>(0, 2), 10);
  EXPECT_EQ(scalar("SELECT completed FROM queue_counts_exact('alpha')"), 8 + 7 + 9 + 2);
}

}  // namespace
}  // namespace awa::testing
