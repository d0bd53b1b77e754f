// Batches (InsertOpts::batch, WorkflowAdmin; sql/functions/0069_batches.sql): members
// added over several transactions, from C++ and SQL; the completion job enqueued exactly
// once with the counts, whether the seal or the last member's end comes last; members that
// end without running (cancelled, ended by a failed parent) counted; the seal waiting for
// a producer's open transaction; refusals with nothing written.
#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/workflows.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class BatchTest : public StorageTest {
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

  WorkflowAdmin wf() const { return WorkflowAdmin(schema_); }

  Batch open(const std::string& name, const std::string& on_complete = "batch_done") {
    BatchOptions o;
    o.on_complete = on_complete;
    o.queue = "bdone";
    o.on_complete_args = json{{"order", 42}};
    return wf().open_batch(*ac_, name, o);
  }
  Batch show(const std::string& name) {
    auto b = wf().batch(*ac_, name);
    EXPECT_TRUE(b.has_value()) << name;
    return b.value_or(Batch{});
  }

  static InsertOpts member(const std::string& batch, const std::string& queue = "bq",
                           int max_attempts = 1) {
    InsertOpts o = on_queue(queue);
    o.batch = batch;
    o.max_attempts = max_attempts;
    return o;
  }
  std::vector<JobId> add(const std::vector<NewJob>& jobs) {
    return storage::insert_many(*store_, conn(), jobs);
  }
  std::vector<ClaimedEntry> claim(const std::string& queue, int n = 100) {
    QueueStorage::ClaimOptions o;
    o.max_batch = n;
    return storage::consumer(*store_).claim(conn(), queue, o);
  }
  std::vector<CompletionResult> end(const ClaimedEntry& e, Outcome outcome) {
    return storage::consumer(*store_).complete(
        conn(), std::vector<Completion>{Completion::of(e, outcome, "boom")});
  }
  std::string state(JobId id) {
    const auto d = Admin(schema_).job(*ac_, id);
    return d ? d->summary.state : "gone";
  }

  std::optional<Connection> ac_;
};

TEST_F(BatchTest, TheSealEnqueuesTheCompletionJobOnceWhenEveryMemberHasAlreadyEnded) {
  const auto opened = open("order-42-items");
  EXPECT_FALSE(opened.sealed);
  EXPECT_EQ(opened.members, 0);
  EXPECT_EQ(opened.on_complete, "batch_done");

  // Two members in one call, a third in another transaction.
  const auto ids = add({NewJob("item", {{"n", 1}}, member("order-42-items")),
                        NewJob("item", {{"n", 2}}, member("order-42-items"))});
  {
    conn().exec("BEGIN");
    add({NewJob("item", {{"n", 3}}, member("order-42-items"))});
    conn().exec("COMMIT");
  }
  EXPECT_EQ(show("order-42-items").members, 3);

  const auto claimed = claim("bq", 2);
  ASSERT_EQ(claimed.size(), 2U);
  EXPECT_EQ(end(claimed[0], Outcome::kCompleted).front().state, "completed");
  EXPECT_EQ(end(claimed[1], Outcome::kRetry).front().state, "failed");  // max_attempts 1
  const auto rest = claim("bq");
  ASSERT_EQ(rest.size(), 1U);
  EXPECT_EQ(Admin(schema_).cancel_job(*ac_, rest[0].job_id), "running");

  auto b = show("order-42-items");
  EXPECT_EQ(b.completed, 1);
  EXPECT_EQ(b.failed, 1);
  EXPECT_EQ(b.cancelled, 1);
  EXPECT_FALSE(b.finished) << "not sealed yet";
  EXPECT_FALSE(b.completion_job.has_value());
  EXPECT_EQ(claim("bdone").size(), 0U);

  b = wf().seal_batch(*ac_, "order-42-items");
  EXPECT_TRUE(b.sealed);
  EXPECT_TRUE(b.finished);
  EXPECT_EQ(b.pending, 0);
  ASSERT_TRUE(b.completion_job.has_value());
  const auto done = claim("bdone");
  ASSERT_EQ(done.size(), 1U);
  EXPECT_EQ(done[0].job_id, *b.completion_job);
  EXPECT_EQ(done[0].kind, "batch_done");
  EXPECT_EQ(json::parse(done[0].args_json), (json{{"order", 42},
                                                  {"batch", "order-42-items"},
                                                  {"members", 3},
                                                  {"completed", 1},
                                                  {"failed", 1},
                                                  {"cancelled", 1}}));

  // Sealing again changes nothing; a member retried after its end is not counted again.
  EXPECT_EQ(wf().seal_batch(*ac_, "order-42-items").completion_job, b.completion_job);
  EXPECT_EQ(Admin(schema_).retry_job(*ac_, ids[1]).outcome, "retried");
  const auto again = claim("bq");
  ASSERT_EQ(again.size(), 1U);
  end(again[0], Outcome::kCompleted);
  b = show("order-42-items");
  EXPECT_EQ(b.completed, 1);
  EXPECT_EQ(b.failed, 1);
  EXPECT_EQ(claim("bdone").size(), 0U);
}

TEST_F(BatchTest, TheLastMembersEndEnqueuesTheCompletionJobOnceAndAReplayIsStale) {
  open("b2");
  add({NewJob("item", {}, member("b2")), NewJob("item", {}, member("b2")),
       NewJob("item", {}, member("b2"))});
  auto b = wf().seal_batch(*ac_, "b2");
  EXPECT_TRUE(b.sealed);
  EXPECT_FALSE(b.finished);
  EXPECT_EQ(b.members, 3);
  EXPECT_EQ(b.pending, 3);

  const auto claimed = claim("bq");
  ASSERT_EQ(claimed.size(), 3U);
  // Two ends in one flush, then the last one alone.
  const auto first = storage::consumer(*store_).complete(
      conn(), std::vector<Completion>{Completion::of(claimed[0], Outcome::kCompleted),
                                      Completion::of(claimed[1], Outcome::kCompleted)});
  EXPECT_FALSE(first[1].stale());
  EXPECT_FALSE(show("b2").finished);
  EXPECT_EQ(end(claimed[2], Outcome::kCompleted).front().state, "completed");
  EXPECT_TRUE(end(claimed[2], Outcome::kCompleted).front().stale()) << "a replayed completion";

  b = show("b2");
  EXPECT_TRUE(b.finished);
  EXPECT_EQ(b.completed, 3);
  const auto done = claim("bdone");
  ASSERT_EQ(done.size(), 1U) << "exactly one completion job";
  EXPECT_EQ(json::parse(done[0].args_json).at("completed"), 3);
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM batch_members WHERE state IS NULL")), 0);
}

TEST_F(BatchTest, AnEmptyBatchFinishesWhenSealedAndOneWithoutCompletionJobOnlyCounts) {
  open("empty");
  const auto b = wf().seal_batch(*ac_, "empty");
  EXPECT_TRUE(b.finished);
  ASSERT_TRUE(b.completion_job.has_value());
  const auto done = claim("bdone");
  ASSERT_EQ(done.size(), 1U);
  EXPECT_EQ(json::parse(done[0].args_json).at("members"), 0);

  wf().open_batch(*ac_, "counting");  // no completion job
  add({NewJob("item", {}, member("counting"))});
  wf().seal_batch(*ac_, "counting");
  end(claim("bq").at(0), Outcome::kCompleted);
  const auto c = show("counting");
  EXPECT_TRUE(c.finished);
  EXPECT_FALSE(c.completion_job.has_value());
  EXPECT_FALSE(c.on_complete.has_value());
  EXPECT_EQ(claim("bdone").size(), 0U);
  EXPECT_EQ(wf().list_batches(*ac_, 10).size(), 2U);
  EXPECT_EQ(wf().list_batches(*ac_, 10, true).size(), 0U);
}

TEST_F(BatchTest, MembersEndedWithoutRunningCount) {
  open("deps");
  const JobId parent = add({NewJob("parent", {}, on_queue("bp"))}).front();
  // A member waiting for a parent that then fails: cancelled under the default policy.
  InsertOpts waiting = member("deps");
  waiting.after = {parent};
  const JobId child = add({NewJob("child", {}, waiting)}).front();
  EXPECT_EQ(state(child), "waiting");
  // A scheduled member cancelled before it ran.
  InsertOpts later = member("deps");
  later.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
  const JobId scheduled = add({NewJob("later", {}, later)}).front();
  wf().seal_batch(*ac_, "deps");
  EXPECT_EQ(Admin(schema_).cancel_job(*ac_, scheduled), "scheduled");
  EXPECT_FALSE(show("deps").finished);

  end(claim("bp").at(0), Outcome::kFail);
  EXPECT_EQ(state(child), "cancelled");
  auto b = show("deps");
  EXPECT_TRUE(b.finished);
  EXPECT_EQ(b.cancelled, 2);

  // A member enqueued after a parent that had already failed ends at its enqueue.
  open("late");
  const JobId c2 = add({NewJob("child", {},
                               [&] {
                                 InsertOpts o = member("late");
                                 o.after = {parent};
                                 return o;
                               }())})
                       .front();
  EXPECT_EQ(state(c2), "cancelled");
  b = wf().seal_batch(*ac_, "late");
  EXPECT_TRUE(b.finished);
  EXPECT_EQ(b.cancelled, 1);
}

TEST_F(BatchTest, SqlProducersAddMembers) {
  open("sql");
  const JobId one = conn()
                        .exec(
                            "SELECT id FROM insert_job_compat('item', 'bq', '{}', "
                            "p_batch => 'sql')")
                        .get<std::int64_t>(0, 0);
  const auto many = conn().exec(
      R"(SELECT job_id FROM insert_jobs_compat('[{"kind": "item", "queue": "bq", "batch": "sql"},
                                                 {"kind": "loose", "queue": "bq"},
                                                 {"kind": "item", "queue": "bq", "batch": "sql"}]'))");
  ASSERT_EQ(many.rows(), 3);
  const auto members = wf().batch_members(*ac_, "sql", 10);
  ASSERT_EQ(members.size(), 3U);
  EXPECT_EQ(members[0].id, one);
  EXPECT_EQ(members[1].id, many.get<std::int64_t>(0, 0));
  EXPECT_EQ(members[2].id, many.get<std::int64_t>(2, 0));
  EXPECT_EQ(members[0].state, "available");
  EXPECT_EQ(show("sql").members, 3);
}

TEST_F(BatchTest, RefusalsWriteNothing) {
  const auto sqlstate = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.sqlstate();
    }
    return std::string("none");
  };
  // No such batch: nothing of the call is written, plain jobs included.
  EXPECT_EQ(sqlstate([&] {
              add({NewJob("plain", {}, on_queue("bq")), NewJob("item", {}, member("missing"))});
            }),
            "23503");
  EXPECT_EQ(count("SELECT count(*) FROM job_states(p_queue => 'bq')"), 0);
  open("sealed");
  wf().seal_batch(*ac_, "sealed");
  EXPECT_EQ(sqlstate([&] { add({NewJob("item", {}, member("sealed"))}); }), "55000");
  EXPECT_EQ(sqlstate([&] {
              conn().exec("SELECT id FROM insert_job_compat('item', 'bq', p_batch => 'sealed')");
            }),
            "55000");
  EXPECT_EQ(count("SELECT count(*) FROM job_states(p_queue => 'bq')"), 0);
  EXPECT_EQ(sqlstate([&] { open("sealed"); }), "23505");
  // A producer cannot make any other job a member.
  open("open");
  const JobId other = add({NewJob("plain", {}, on_queue("bq"))}).front();
  EXPECT_EQ(
      sqlstate([&] { conn().query("SELECT add_batch_members('open', ARRAY[$1::bigint])", other); }),
      "22023");
  EXPECT_EQ(show("open").members, 0);

  EXPECT_THROW(wf().open_batch(*ac_, "bad name"), InvalidArgument);
  EXPECT_THROW(wf().seal_batch(*ac_, ""), InvalidArgument);
  BatchOptions bad;
  bad.on_complete_args = json::array();
  EXPECT_THROW(wf().open_batch(*ac_, "x", bad), InvalidArgument);
  InsertOpts unique = member("open");
  unique.unique = UniqueOpts{};
  EXPECT_THROW(add({NewJob("item", {}, unique)}), InvalidArgument);
  EXPECT_EQ(sqlstate([&] { wf().seal_batch(*ac_, "nope"); }), "23503");
  EXPECT_FALSE(wf().batch(*ac_, "nope").has_value());
}

TEST_F(BatchTest, TheSealWaitsForAProducerStillAddingMembers) {
  open("race");
  // A producer's transaction adds a member and stays open.
  conn().exec("BEGIN");
  add({NewJob("item", {}, member("race"))});

  auto sealer = std::async(std::launch::async, [&] {
    auto c = Connection::connect(database_url());
    return WorkflowAdmin(schema_).seal_batch(c, "race");
  });
  EXPECT_EQ(sealer.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "the seal must wait for the producer's transaction";
  conn().exec("COMMIT");
  const auto b = sealer.get();
  EXPECT_TRUE(b.sealed);
  EXPECT_EQ(b.members, 1) << "the member committed while the seal waited is counted";
  EXPECT_FALSE(b.finished);
  end(claim("bq").at(0), Outcome::kCompleted);
  EXPECT_TRUE(show("race").finished);
  EXPECT_EQ(claim("bdone").size(), 1U);
}

}  // namespace
}  // namespace awa::testing
