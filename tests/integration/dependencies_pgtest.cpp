// Job dependencies (InsertOpts::after; sql/functions/0067_dependencies.sql): a child waits
// until every parent has ended, is released exactly once after the last one, follows its
// policy when a parent fails, and is enqueued from C++, SQL and the CLI in the same call or
// transaction as its parents. The race between a child's transaction and a parent's end
// is closed by the leader's re-check (verify_waiting_jobs), tested here both ways.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "cli_runner.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

class DependencyTest : public StorageTest {
 protected:
  void SetUpSchema() override {
    StorageTest::SetUpSchema();
    conn().exec("SET jit = off");
    ac_.emplace(Connection::connect(database_url()));
  }
  void TearDown() override {
    ac_.reset();
    StorageTest::TearDown();
  }

  static InsertOpts after(const std::string& queue, std::vector<JobId> parents,
                          OnParentFailure policy = OnParentFailure::kCancel) {
    InsertOpts o = on_queue(queue);
    o.after = std::move(parents);
    o.on_parent_failure = policy;
    return o;
  }

  JobId add(const std::string& kind, InsertOpts o) {
    return storage::insert_many(*store_, conn(),
                                std::vector<NewJob>{NewJob(kind, {}, std::move(o))})
        .front();
  }
  JobId add_parent(const std::string& queue = "dq", int max_attempts = 1) {
    InsertOpts o = on_queue(queue);
    o.max_attempts = max_attempts;
    return add("parent", o);
  }

  std::vector<ClaimedEntry> claim(const std::string& queue, int n = 100) {
    QueueStorage::ClaimOptions o;
    o.max_batch = n;
    return storage::consumer(*store_).claim(conn(), queue, o);
  }
  void end(const ClaimedEntry& e, Outcome outcome) {
    const auto r = storage::consumer(*store_).complete(
        conn(), std::vector<Completion>{Completion::of(e, outcome, "boom")});
    ASSERT_FALSE(r.front().stale()) << "job " << e.job_id;
  }

  JobDetail detail(JobId id) {
    auto d = Admin(schema_).job(*ac_, id);
    EXPECT_TRUE(d.has_value()) << "job " << id;
    return d.value_or(JobDetail{});
  }
  std::string state(JobId id) { return detail(id).summary.state; }
  QueueCounts counts(const std::string& queue) { return Admin(schema_).queue_counts(*ac_, queue); }
  int verify() { return conn().exec("SELECT verify_waiting_jobs(100)").get<int>(0, 0); }

  std::optional<Connection> ac_;
};

TEST_F(DependencyTest, FanInReleasesTheChildExactlyOnceAfterItsLastParent) {
  const JobId p1 = add_parent(), p2 = add_parent(), p3 = add_parent();
  const JobId child = add("child", after("dc", {p1, p2, p3, p2}));  // a repeat counts once
  EXPECT_EQ(state(child), "waiting");
  EXPECT_EQ(counts("dc").waiting, 1);
  EXPECT_EQ(counts("dc").available, 0);
  auto d = detail(child);
  ASSERT_EQ(d.parents.size(), 3U);
  EXPECT_EQ(d.parents[0].id, p1);
  EXPECT_EQ(d.parents[0].state, "available");
  EXPECT_EQ(d.on_parent_failure, "cancel");
  EXPECT_EQ(d.pending_parents, 3);
  const auto p1_detail = detail(p1);
  ASSERT_EQ(p1_detail.children.size(), 1U);
  EXPECT_EQ(p1_detail.children[0].id, child);
  EXPECT_EQ(p1_detail.children[0].state, "waiting");

  const auto claimed = claim("dq");
  ASSERT_EQ(claimed.size(), 3U);
  end(claimed[0], Outcome::kCompleted);
  end(claimed[1], Outcome::kCompleted);
  EXPECT_EQ(state(child), "waiting");
  EXPECT_EQ(detail(child).pending_parents, 1);
  EXPECT_TRUE(claim("dc").empty()) << "released before its last parent";

  end(claimed[2], Outcome::kCompleted);
  EXPECT_EQ(state(child), "available");
  EXPECT_EQ(counts("dc").waiting, 0);
  EXPECT_EQ(counts("dc").available, 1);
  EXPECT_EQ(count("SELECT count(*) FROM job_dependencies WHERE resolved_at IS NULL"), 0);
  d = detail(child);
  EXPECT_FALSE(d.pending_parents.has_value());
  for (const auto& p : d.parents) EXPECT_EQ(p.state, "completed") << p.id;

  // A replayed completion of the last parent is stale and releases nothing again; the
  // leader's re-check finds nothing to do.
  const auto again = storage::consumer(*store_).complete(
      conn(), std::vector<Completion>{Completion::of(claimed[2], Outcome::kCompleted)});
  EXPECT_TRUE(again.front().stale());
  EXPECT_EQ(verify(), 0);
  const auto released = claim("dc");
  ASSERT_EQ(released.size(), 1U);
  EXPECT_EQ(released[0].job_id, child);
  EXPECT_TRUE(claim("dc").empty());
}

TEST_F(DependencyTest, AChildOfCompletedParentsIsAvailableAtOnceAndAScheduledOneWaitsItsTime) {
  const JobId p = add_parent();
  end(claim("dq").at(0), Outcome::kCompleted);
  const JobId now = add("child", after("dc", {p}));
  EXPECT_EQ(state(now), "available");
  InsertOpts later = after("dc", {p});
  later.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
  const JobId scheduled = add("child", later);
  EXPECT_EQ(state(scheduled), "scheduled");
  EXPECT_EQ(count("SELECT count(*) FROM waiting_jobs"), 0);
}

TEST_F(DependencyTest, ParentsInTheSameCallOrTransactionWork) {
  // One call: a tree of four, the children naming earlier positions.
  std::vector<NewJob> tree;
  tree.emplace_back("charge", nlohmann::json::object(), on_queue("dq"));
  InsertOpts email = on_queue("dc");
  email.after_in_call = {0};
  tree.emplace_back("email", nlohmann::json::object(), email);
  tree.emplace_back("invoice", nlohmann::json::object(), email);
  InsertOpts archive = on_queue("dc");
  archive.after_in_call = {1, 2};
  tree.emplace_back("archive", nlohmann::json::object(), archive);
  const auto ids = storage::insert_many(*store_, conn(), tree);
  EXPECT_EQ(state(ids[0]), "available");
  EXPECT_EQ(state(ids[1]), "waiting");
  EXPECT_EQ(state(ids[3]), "waiting");
  ASSERT_EQ(detail(ids[3]).parents.size(), 2U);
  EXPECT_EQ(detail(ids[3]).parents[0].id, ids[1]);

  // One transaction, two calls: the parent is staged until the commit.
  JobId parent = 0, child = 0;
  {
    Transaction tx(*ac_);
    parent = store_->insert(*ac_, NewJob("parent", {}, on_queue("dq")));
    child = store_->insert(*ac_, NewJob("child", {}, after("dc", {parent})));
    tx.commit();
  }
  EXPECT_EQ(state(child), "waiting");
  EXPECT_EQ(detail(child).parents.at(0).state, "available");

  // SQL producers: two calls in one transaction, and the batch form with after_index.
  conn().exec("BEGIN");
  const auto sql_parent =
      conn().exec("SELECT id FROM insert_job_compat('parent', 'dq')").get<std::int64_t>(0, 0);
  const auto sql_child = conn().query(
      "SELECT id, state FROM insert_job_compat('child', 'dc', "
      "p_after => ARRAY[$1::bigint], p_on_parent_failure => 'fail')",
      sql_parent);
  EXPECT_EQ(sql_child.get<std::string>(0, 1), "waiting");
  const auto batch = conn().exec(
      R"(SELECT job_id FROM insert_jobs_compat('[{"kind": "a", "queue": "dq"},
           {"kind": "b", "queue": "dc", "after_index": [0], "on_parent_failure": "run"}]') ORDER BY ord)");
  conn().exec("COMMIT");
  EXPECT_EQ(state(sql_child.get<std::int64_t>(0, 0)), "waiting");
  EXPECT_EQ(detail(sql_child.get<std::int64_t>(0, 0)).on_parent_failure, "fail");
  const JobId b = batch.get<std::int64_t>(1, 0);
  EXPECT_EQ(state(b), "waiting");
  EXPECT_EQ(detail(b).parents.at(0).id, batch.get<std::int64_t>(0, 0));
  EXPECT_EQ(detail(b).on_parent_failure, "run");

  // Every parent completes; every child is released.
  for (int round = 0; round < 4; ++round) {
    for (const auto& e : claim("dq")) end(e, Outcome::kCompleted);
    for (const auto& e : claim("dc")) end(e, Outcome::kCompleted);
  }
  EXPECT_EQ(count("SELECT count(*) FROM waiting_jobs"), 0);
  EXPECT_EQ(state(ids[3]), "completed");
  EXPECT_EQ(state(child), "completed");
  EXPECT_EQ(state(b), "completed");
}

TEST_F(DependencyTest, APolicyDecidesWhatAFailedParentDoesAndCancelCascades) {
  const JobId p = add_parent();
  const JobId cancel = add("c", after("dc", {p}));
  const JobId grandchild = add("g", after("dc", {cancel}, OnParentFailure::kRun));
  const JobId run = add("r", after("dc", {p}, OnParentFailure::kRun));
  const JobId fail = add("f", after("dc", {p}, OnParentFailure::kFail));
  const JobId other = add_parent("dq2", 25);  // fail's second parent, still pending
  const JobId fail2 = add("f2", after("dc", {other, p}, OnParentFailure::kFail));

  end(claim("dq").at(0), Outcome::kFail);
  EXPECT_EQ(state(p), "failed");
  EXPECT_EQ(state(cancel), "cancelled");
  // run: the cancelled parent counts as done, so the grandchild runs
  EXPECT_EQ(state(grandchild), "available");
  EXPECT_EQ(state(run), "available");
  const auto f = detail(fail);
  EXPECT_EQ(f.summary.state, "failed");
  ASSERT_FALSE(f.errors.empty());
  EXPECT_THAT(f.errors.back().error, HasSubstr(fmt::format("parent job {} ended failed", p)));
  // ended at once, without waiting for its other parent, whose edge stops being pending
  EXPECT_EQ(state(fail2), "failed");
  EXPECT_EQ(count("SELECT count(*) FROM job_dependencies WHERE resolved_at IS NULL"), 0);
  const auto c = counts("dc");
  EXPECT_EQ(c.cancelled, 1);
  EXPECT_EQ(c.failed, 2);
  EXPECT_EQ(c.available, 2);
  // Enqueued after the parent had already failed: the same policies apply at once.
  EXPECT_EQ(state(add("late", after("dc", {p}))), "cancelled");
  EXPECT_EQ(state(add("late_run", after("dc", {p}, OnParentFailure::kRun))), "available");
  EXPECT_EQ(conn()
                .query("SELECT state FROM insert_job_compat('late', 'dc', p_after => "
                       "ARRAY[$1::bigint], p_on_parent_failure => 'fail')",
                       p)
                .get<std::string>(0, 0),
            "failed");

  // A parent cancelled while running cancels its default-policy child; a dead-lettered one
  // too (the queue's DLQ on).
  const JobId q = add_parent("dq3", 25);
  const JobId qc = add("qc", after("dc", {q}));
  claim("dq3");
  EXPECT_EQ(Admin(schema_).cancel_job(*ac_, q), "running");
  EXPECT_EQ(state(qc), "cancelled");
  conn().exec("INSERT INTO queue_meta (queue, dlq_enabled) VALUES ('dq4', true)");
  const JobId d = add_parent("dq4", 1);
  const JobId dc = add("dc", after("dc", {d}, OnParentFailure::kFail));
  end(claim("dq4").at(0), Outcome::kFail);
  EXPECT_EQ(state(d), "dlq");
  EXPECT_EQ(state(dc), "failed");
  EXPECT_THAT(detail(dc).errors.back().error, HasSubstr("was dead-lettered"));
}

TEST_F(DependencyTest, CancellingAWaitingJobCascadesToItsChildren) {
  const JobId a = add_parent();
  const JobId b = add("b", after("dc", {a}));
  const JobId c = add("c", after("dc", {b}));
  const JobId scheduled_parent = [&] {
    InsertOpts o = on_queue("dq");
    o.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
    return add("s", o);
  }();
  const JobId d = add("d", after("dc", {scheduled_parent}));
  EXPECT_EQ(Admin(schema_).cancel_job(*ac_, b), "waiting");
  EXPECT_EQ(state(b), "cancelled");
  EXPECT_EQ(state(c), "cancelled");
  EXPECT_EQ(state(a), "available");
  EXPECT_EQ(Admin(schema_).cancel_job(*ac_, scheduled_parent), "scheduled");
  EXPECT_EQ(state(d), "cancelled");
  // A cancelled waiting job can be retried like any cancelled job: it runs then.
  EXPECT_EQ(Admin(schema_).retry_job(*ac_, c).outcome, "retried");
  EXPECT_EQ(state(c), "available");
  end(claim("dq").at(0), Outcome::kCompleted);
  EXPECT_EQ(state(b), "cancelled");
}

TEST_F(DependencyTest, BadParentsAreRefusedAndNothingIsWritten) {
  const JobId p = add_parent();
  try {
    add("child", after("dc", {p, 987654321}));
    FAIL() << "a missing parent was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "23503") << e.what();
    EXPECT_THAT(e.what(), HasSubstr("parent job 987654321 does not exist"));
  }
  EXPECT_EQ(count("SELECT count(*) FROM job_dependencies"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM waiting_jobs"), 0);

  InsertOpts unique = after("dc", {p});
  unique.unique.emplace();
  EXPECT_THROW(add("child", unique), InvalidArgument);
  InsertOpts forward = on_queue("dc");
  forward.after_in_call = {0};
  EXPECT_THROW(add("child", forward), InvalidArgument);
  EXPECT_THROW(add("child", after("dc", std::vector<JobId>(kMaxParents + 1, p))), InvalidArgument);

  for (const char* sql : {"SELECT insert_job_compat('c', p_after => ARRAY[-5]::bigint[])",
                          "SELECT insert_job_compat('c', p_on_parent_failure => 'run')",
                          "SELECT enqueue_after(ARRAY[1]::bigint[], 'explode', 'c')",
                          "SELECT enqueue_after('{}'::bigint[], NULL, 'c')"}) {
    try {
      conn().exec(sql);
      ADD_FAILURE() << "accepted: " << sql;
    } catch (const Error& e) {
      EXPECT_THAT(std::string("23503 22023"), HasSubstr(e.sqlstate())) << sql << ": " << e.what();
    }
  }
  EXPECT_EQ(count("SELECT count(*) FROM job_dependencies"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM waiting_jobs"), 0);
}

// The race: the parent's closer looked for edges before the child's transaction
// committed, and the child's transaction saw the parent still running. Without the
// leader's re-check the child would wait forever.
TEST_F(DependencyTest, TheLeaderReleasesAChildWhoseParentEndedWhileItsTransactionWasOpen) {
  const JobId p = add_parent();
  const auto e = claim("dq").at(0);
  JobId child = 0;
  {
    Transaction tx(*ac_);
    child = store_->insert(*ac_, NewJob("child", {}, after("dc", {p})));
    end(e, Outcome::kCompleted);  // another session: sees no edge yet
    tx.commit();
  }
  EXPECT_EQ(state(p), "completed");
  EXPECT_EQ(state(child), "waiting") << "the closer cannot have seen an uncommitted edge";
  EXPECT_EQ(verify(), 1);
  EXPECT_EQ(state(child), "available");
  EXPECT_EQ(verify(), 0) << "a verified job is not checked again";
}

// The other order: the parent's closer holds its batch lock, uncommitted, when the leader
// re-checks. The leader does not wait behind it (its other work must go on): it leaves the
// child for a later round, and sees the end then.
TEST_F(DependencyTest, TheLeadersReCheckLeavesAChildWhoseParentsCloserIsInFlight) {
  const JobId p = add_parent();
  const auto e = claim("dq").at(0);
  auto closer = Connection::connect(database_url());
  Transaction closing(closer);
  store_->finalize_in(closer, e, std::nullopt);  // holds the batch lock; saw no edge
  const JobId child = add("child", after("dc", {p}));
  EXPECT_EQ(state(child), "waiting");

  EXPECT_EQ(verify(), 0) << "checked a child whose parent's end was in flight";
  EXPECT_EQ(count("SELECT count(*) FROM waiting_jobs WHERE NOT verified"), 1);
  closing.commit();
  EXPECT_EQ(state(child), "waiting") << "the closer cannot have seen the edge";
  EXPECT_EQ(verify(), 1);
  EXPECT_EQ(state(child), "available");
}

TEST_F(DependencyTest, TheCliEnqueuesAfterParentsAndShowsTheWaitingState) {
  const JobId p = add_parent();
  const auto enq = run_cli(fmt::format(
      "--schema {} enqueue child --queue dc --after {},{} --on-parent-failure run", schema_, p, p));
  ASSERT_EQ(enq.exit_code, 0) << enq.output;
  const JobId child = std::stoll(enq.output);
  const auto list = run_cli(fmt::format("--schema {} job list --state waiting --json", schema_));
  ASSERT_EQ(list.exit_code, 0) << list.output;
  const auto jobs = nlohmann::json::parse(list.output);
  ASSERT_EQ(jobs.size(), 1U) << list.output;
  EXPECT_EQ(jobs[0].at("id"), child);
  EXPECT_EQ(jobs[0].at("state"), "waiting");
  const auto show = run_cli(fmt::format("--schema {} job show {} --json", schema_, child));
  ASSERT_EQ(show.exit_code, 0) << show.output;
  const auto j = nlohmann::json::parse(show.output);
  EXPECT_EQ(j.at("parents"), (nlohmann::json::array({{{"id", p}, {"state", "available"}}})));
  EXPECT_EQ(j.at("on_parent_failure"), "run");
  EXPECT_EQ(j.at("pending_parents"), 1);
  const auto text = run_cli(fmt::format("--schema {} job show {}", schema_, p));
  EXPECT_THAT(text.output, HasSubstr(fmt::format("children     {} (waiting)", child)));
  const auto stats = run_cli(fmt::format("--schema {} queue stats dc --json", schema_));
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_EQ(nlohmann::json::parse(stats.output).at("counts").at("waiting"), 1);

  const auto bad = run_cli(fmt::format("--schema {} enqueue child --after 987654321", schema_));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.output, HasSubstr("does not exist"));
  EXPECT_THAT(bad.output, HasSubstr("23503"));
  const auto policy = run_cli(
      fmt::format("--schema {} enqueue child --after {} --on-parent-failure maybe", schema_, p));
  EXPECT_NE(policy.exit_code, 0);
}

}  // namespace
}  // namespace awa::testing
