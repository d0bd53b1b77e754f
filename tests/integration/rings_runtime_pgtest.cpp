// Rings under the real runtime (a regression gate) and the awa storage commands.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/client.hpp"
#include "cli_runner.hpp"
#include "rings_support.hpp"
#include "storage/store_access.hpp"

namespace awa::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// --- the runtime's rotation: a regression gate ----------------------------------------------

TEST_F(RingsTest, RuntimeWorkloadLeavesAppendOnlyTablesUntouchedAndTheRingsTurning) {
  // A gate that runs in CI with the other tests: a representative workload through
  // awa::Client with the leader rotating every 200 ms. Afterwards: no UPDATE or DELETE
  // ever hit the append-only ring partitions (n_tup_upd + n_tup_del, cumulative; zero dead
  // tuples), the claim ring stays small, every ring advanced and was pruned, and neither
  // ring control table was ever updated.
  set_shards("gate_a", 4);
  set_shards("gate_b", 4);
  const std::string app = "awa_rings_gate_" + std::to_string(::getpid());
  ClientOptions o;
  o.database_url = database_url();
  o.schema = schema_;
  o.migrate = false;
  o.maintenance_interval = milliseconds(50);
  o.ring_rotate_interval = milliseconds(200);
  o.heartbeat_interval = milliseconds(100);
  o.stale_after = seconds(60);
  o.application_name = app;
  std::atomic<int> retried{0};
  {
    Client client(o);
    client.register_worker("work", [&](JobContext& job) {
      const auto& args = job.args();
      if (args.value("progress", false)) job.set_progress(50, "half way");
      if (args.value("retry", false) && job.attempt() == 1) {
        ++retried;
        return JobResult::retry_after(milliseconds(20), "once more");
      }
      return JobResult::completed();
    });
    for (const char* q : {"gate_a", "gate_b"}) {
      QueueConfig qc;
      qc.name = q;
      qc.max_workers = 8;
      client.add_queue(qc);
    }
    client.start();
    for (int b = 0; b < 12; ++b) {
      std::vector<NewJob> jobs;
      for (int i = 0; i < 250; ++i) {
        const int n = b * 250 + i;
        nlohmann::json args{{"n", n}, {"retry", n % 10 == 0}, {"progress", n % 50 == 7}};
        jobs.push_back(job(b % 2 == 0 ? "gate_a" : "gate_b", args,
                           n % 3 == 0 ? std::optional<std::string>("key-" + std::to_string(n % 17))
                                      : std::nullopt));
      }
      storage::insert_many_copy(*store_, conn(), jobs);
    }
    const auto done = [&] { return counts("gate_a").completed + counts("gate_b").completed; };
    ASSERT_TRUE(eventually([&] { return done() == 3000; }, seconds(90))) << "completed " << done();
    // Every ring advanced and was pruned; the claim ring shrinks back once work stops.
    ASSERT_TRUE(eventually(
        [&] {
          return count(
                     "SELECT count(DISTINCT ring) FROM ring_prunes WHERE ring IN "
                     "('queue', 'claim')") == 2 &&
                 count("SELECT count(*) FROM claim_batches") +
                         count("SELECT count(*) FROM claim_closures") <
                     200;
        },
        seconds(30)))
        << "claim ring rows: "
        << count("SELECT count(*) FROM claim_batches") +
               count("SELECT count(*) FROM claim_closures");
    const auto s = client.stats();
    EXPECT_EQ(s.stale_completions, 0U);
    EXPECT_GT(s.rotations, 0U);
    EXPECT_GT(s.prunes, 0U);
    client.stop();
  }
  EXPECT_EQ(retried.load(), 300);
  for (const char* q : {"gate_a", "gate_b"}) {
    QueueCounts want;
    want.completed = 1500;
    EXPECT_EQ(describe(counts(q)), describe(want)) << q;
  }
  for (const char* ring : {"queue", "claim"}) {
    const auto st = ring_status(ring);
    EXPECT_GT(st.generation, 0) << ring;
    EXPECT_TRUE(st.last_prune.has_value()) << ring;
  }

  // Statistics are flushed by each backend when it exits (and on a timer before that):
  // wait for the client's backends to be gone, and then for their inserts to show. A
  // backend leaves pg_stat_activity before its exit-time flush, so the first alone was
  // a race (seen: 2907 of the >3000 inserts). The counters only ever grow, so a read
  // that came too early could only miss a violation, never invent one.
  const char* kInserted =
      "SELECT coalesce(sum(n_tup_ins), 0) FROM pg_stat_user_tables WHERE schemaname = $1 AND "
      "relname ~ '^(ready_entries|done_entries|ready_tombstones|claim_batches|claim_closures)_"
      "[0-9]+$'";
  ASSERT_TRUE(eventually(
      [&] {
        return conn()
                   .query("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app)
                   .get<std::int64_t>(0, 0) == 0;
      },
      seconds(20)));
  const bool all_flushed = eventually(
      [&] {
        conn().exec("SELECT pg_stat_clear_snapshot()");
        return conn().query(kInserted, schema_).get<std::int64_t>(0, 0) > 3000;
      },
      seconds(20));
  EXPECT_TRUE(all_flushed) << "the workload's inserts never showed in the statistics";
  conn().exec("SELECT pg_stat_clear_snapshot()");
  const auto st = conn().query(
      "SELECT count(*), coalesce(sum(n_tup_ins), 0), coalesce(sum(n_tup_upd + n_tup_del), 0), "
      "coalesce(sum(n_dead_tup), 0), "
      "coalesce(string_agg(relname || ' upd ' || n_tup_upd || ' del ' || n_tup_del || ' dead ' "
      "|| n_dead_tup, ', ') FILTER (WHERE n_tup_upd + n_tup_del + n_dead_tup > 0), '') "
      "FROM pg_stat_user_tables WHERE schemaname = $1 AND relname ~ "
      "'^(ready_entries|done_entries|ready_tombstones|claim_batches|claim_closures)_[0-9]+$'",
      schema_);
  ASSERT_EQ(st.get<std::int64_t>(0, 0), 16 * 3 + 8 * 2) << "partitions missing from the stats";
  EXPECT_GT(st.get<std::int64_t>(0, 1), 3000) << "no statistics recorded: the gate is vacuous";
  EXPECT_EQ(st.get<std::int64_t>(0, 2), 0) << st.get<std::string>(0, 4);
  EXPECT_EQ(st.get<std::int64_t>(0, 3), 0) << st.get<std::string>(0, 4);
  const auto control = conn().query(
      "SELECT relname, n_tup_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND "
      "relname IN ('ring_state', 'ring_rotations') ORDER BY relname",
      schema_);
  ASSERT_EQ(control.rows(), 2);
  for (int r = 0; r < control.rows(); ++r) {
    EXPECT_EQ(control.get<std::int64_t>(r, 1), 0) << control.get<std::string>(r, 0) << " updated";
  }
  EXPECT_LT(
      count("SELECT count(*) FROM claim_batches") + count("SELECT count(*) FROM claim_closures"),
      200);
}

// --- awa storage -------------------------------------------------------------------------------

TEST_F(RingsTest, CliStorageStatusJsonAndRotatePruneExitCodes) {
  // Guards the operator interface: `awa storage status --json` has, per ring, the current
  // slot, generation, slots [{slot, state, rows}] and the last prune (and the newest prune
  // overall at the top); a bad ring name fails clearly; a prune that skipped everywhere
  // exits 3, one that pruned exits 0.
  const std::string base = "--database-url '" + database_url() + "' --schema " + schema_;
  enqueue("cli", 2);
  ASSERT_EQ(drain("cli").size(), 2U);
  for (const char* ring : {"queue", "claim"}) ASSERT_TRUE(rotate(ring).done) << ring;

  const auto pr = run_cli(base + " storage prune --ring queue");
  EXPECT_EQ(pr.exit_code, 0) << pr.output;
  EXPECT_THAT(pr.output, HasSubstr("queue ring: pruned generation 0"));
  const auto pr2 = run_cli(base + " storage prune");  // claim prunable; others skip
  EXPECT_EQ(pr2.exit_code, 0) << pr2.output;
  const auto skipped = run_cli(base + " storage prune");
  EXPECT_EQ(skipped.exit_code, 3) << skipped.output;
  EXPECT_THAT(skipped.output, HasSubstr("skipped"));
  const auto rot_skipped = run_cli(base + " storage rotate");  // every current slot is empty
  EXPECT_EQ(rot_skipped.exit_code, 3) << rot_skipped.output;
  EXPECT_THAT(rot_skipped.output, HasSubstr("idle"));

  const auto bogus = run_cli(base + " storage rotate --ring bogus");
  EXPECT_NE(bogus.exit_code, 0);
  EXPECT_NE(bogus.exit_code, 3);
  EXPECT_THAT(bogus.output, HasSubstr("bogus"));
  EXPECT_THAT(bogus.output, HasSubstr("queue"));

  const auto status = run_cli(base + " storage status --json");
  ASSERT_EQ(status.exit_code, 0) << status.output;
  const auto j = nlohmann::json::parse(status.output);
  ASSERT_TRUE(j.at("rings").is_array());
  ASSERT_EQ(j.at("rings").size(), 3U);
  const std::map<std::string, std::size_t> slot_count{{"queue", 16}, {"claim", 8}, {"lease", 8}};
  const auto api = admin().storage_status(admin_conn());
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& r = j.at("rings").at(i);
    const auto name = r.at("ring").get<std::string>();
    ASSERT_EQ(name, api[i].ring);
    EXPECT_EQ(r.at("current_slot").get<int>(), api[i].current_slot) << name;
    EXPECT_EQ(r.at("generation").get<std::int64_t>(), api[i].generation) << name;
    ASSERT_TRUE(r.contains("last_prune")) << name;
    const auto& slots = r.at("slots");
    ASSERT_EQ(slots.size(), slot_count.at(name)) << name;
    for (std::size_t k = 0; k < slots.size(); ++k) {
      EXPECT_EQ(slots[k].at("slot").get<std::size_t>(), k) << name;
      EXPECT_THAT((std::vector<std::string>{"current", "sealed", "pruned"}),
                  ::testing::Contains(slots[k].at("state").get<std::string>()))
          << name;
      EXPECT_EQ(slots[k].at("rows").get<std::int64_t>(), api[i].slots[k].rows) << name;
    }
  }
  const auto& queue = j.at("rings").at(0);
  EXPECT_EQ(queue.at("generation").get<int>(), 1);
  EXPECT_EQ(queue.at("slots").at(0).at("state"), "pruned");
  EXPECT_EQ(queue.at("slots").at(1).at("state"), "current");
  ASSERT_TRUE(queue.at("last_prune").is_object());
  EXPECT_EQ(queue.at("last_prune").at("generation").get<int>(), 0);
  EXPECT_TRUE(queue.at("last_prune").contains("rows_removed"));
  EXPECT_TRUE(j.at("rings").at(2).at("last_prune").is_null()) << "the lease ring never pruned";
  ASSERT_TRUE(j.at("last_prune").is_object());
  EXPECT_THAT(j.at("last_prune").at("ring").get<std::string>(), ::testing::AnyOf("queue", "claim"));
  EXPECT_TRUE(j.at("last_prune").contains("at"));
}

}  // namespace
}  // namespace awa::testing
