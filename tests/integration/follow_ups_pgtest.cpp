// Follow-up jobs (Completion::follow_ups / JobResult::then, WorkflowAdmin's queue
// follow-ups; enqueue_follow_ups in sql/functions/0069_batches.sql): written in the
// transaction of the end they follow, only for the trigger that matches, never for a stale
// or replayed completion, and a queue's follow-up job triggers none itself.
#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/workflows.hpp"
#include "runtime_support.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class FollowUpTest : public StorageTest {
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

  JobId add(const std::string& queue, int max_attempts = 2) {
    InsertOpts o = on_queue(queue);
    o.max_attempts = max_attempts;
    return storage::insert_many(*store_, conn(), std::vector<NewJob>{NewJob("work", {}, o)})
        .front();
  }
  std::vector<ClaimedEntry> claim(const std::string& queue) {
    return storage::consumer(*store_).claim(conn(), queue);
  }
  CompletionResult end(const ClaimedEntry& e, Outcome outcome, std::vector<FollowUp> follow_ups,
                       std::optional<std::string> result = std::nullopt) {
    auto c = Completion::of(e, outcome, "boom", std::chrono::milliseconds(0));
    c.follow_ups = std::move(follow_ups);
    c.result_json = std::move(result);
    return storage::consumer(*store_).complete(conn(), std::vector<Completion>{c}).front();
  }
  static std::vector<FollowUp> both() {
    return {FollowUp{FollowUpOn::kCompleted, NewJob("on_done", {{"x", 1}}, on_queue("fu"))},
            FollowUp{FollowUpOn::kExhausted, NewJob("on_dead", {{"x", 2}}, on_queue("fu"))}};
  }
  std::vector<std::string> kinds(const std::string& queue) {
    std::vector<std::string> out;
    for (const auto& e : claim(queue)) out.push_back(e.kind);
    return out;
  }

  std::optional<Connection> ac_;
};

TEST_F(FollowUpTest, AHandlersFollowUpsAreEnqueuedWithTheEndTheyMatchOnly) {
  add("fq");
  const auto e = claim("fq").at(0);
  EXPECT_EQ(end(e, Outcome::kCompleted, both(), R"({"receipt": 7})").state, "completed");
  EXPECT_THAT(kinds("fu"), ::testing::ElementsAre("on_done"));
  // The replay of that completion is stale and enqueues nothing.
  EXPECT_TRUE(end(e, Outcome::kCompleted, both()).stale());
  EXPECT_TRUE(kinds("fu").empty());

  // A retry that leaves attempts enqueues nothing; the last failed attempt exhausts.
  add("fq", 2);
  auto a = claim("fq").at(0);
  EXPECT_EQ(end(a, Outcome::kRetry, both()).state, "retried");
  EXPECT_TRUE(kinds("fu").empty());
  conn().exec("SELECT promote_due_deferred()");
  a = claim("fq").at(0);
  EXPECT_EQ(end(a, Outcome::kRetry, both()).state, "failed");
  EXPECT_THAT(kinds("fu"), ::testing::ElementsAre("on_dead"));

  // A snooze or a cancel enqueues nothing; a terminal failure exhausts.
  add("fq");
  a = claim("fq").at(0);
  EXPECT_EQ(end(a, Outcome::kCancel, both()).state, "cancelled");
  add("fq");
  a = claim("fq").at(0);
  EXPECT_EQ(end(a, Outcome::kFail, both()).state, "failed");
  EXPECT_THAT(kinds("fu"), ::testing::ElementsAre("on_dead"));
}

TEST_F(FollowUpTest, AFollowUpKeepsItsOptions) {
  add("fq");
  const auto e = claim("fq").at(0);
  InsertOpts o = on_queue("fu");
  o.priority = 3;
  o.max_attempts = 7;
  o.metadata = {{"trace", "t-1"}};
  o.tags = {"a", "b"};
  o.ordering_key = "customer-9";
  NewJob now("now", json::parse(R"({"big": 12345678901234567890, "s": "\u00e9"})"), o);
  o.run_at = std::chrono::system_clock::now() + std::chrono::hours(2);
  NewJob later("later", {}, o);
  EXPECT_EQ(end(e, Outcome::kCompleted,
                {FollowUp{FollowUpOn::kCompleted, now}, FollowUp{FollowUpOn::kCompleted, later}})
                .state,
            "completed");
  const auto got = claim("fu");
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].kind, "now");
  EXPECT_EQ(got[0].priority, 3);
  EXPECT_EQ(got[0].max_attempts, 7);
  EXPECT_EQ(got[0].metadata, (json{{"trace", "t-1"}}));
  EXPECT_EQ(got[0].tags, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(got[0].ordering_key, "customer-9");
  EXPECT_EQ(json::parse(got[0].args_json), json::parse(now.args_json));
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs WHERE kind = 'later' AND run_at > now() + "
                  "interval '1 hour'"),
            1);
}

TEST_F(FollowUpTest, AFollowUpThatBreaksTheRulesIsRefusedBeforeAnythingIsWritten) {
  add("fq");
  const auto e = claim("fq").at(0);
  FollowUp bad{FollowUpOn::kCompleted, NewJob("child", {}, on_queue("fu"))};
  bad.job.opts.after = {1};
  EXPECT_THROW(end(e, Outcome::kCompleted, {bad}), InvalidArgument);
  bad.job.opts.after.clear();
  bad.job.opts.batch = "b";
  EXPECT_THROW(validate_follow_up(bad), InvalidArgument);
  bad.job.opts.batch.clear();
  bad.job.opts.queue = "bad queue";
  EXPECT_THROW(validate_follow_up(bad), InvalidArgument);
  // The attempt is still open: nothing was sent.
  EXPECT_EQ(end(e, Outcome::kCompleted, {}).state, "completed");
}

TEST_F(FollowUpTest, AQueuesFollowUpsFireOnItsJobsAndNeverChain) {
  WorkflowAdmin wf(schema_);
  wf.set_queue_follow_up(*ac_, "fq", FollowUpOn::kCompleted, "audit", std::string("fa"));
  auto all = wf.set_queue_follow_up(*ac_, "fq", FollowUpOn::kExhausted, "alert", std::string("fa"));
  ASSERT_EQ(all.size(), 2U);
  EXPECT_EQ(all[0].on, FollowUpOn::kCompleted);
  EXPECT_EQ(all[1].kind, "alert");
  // The audit queue's own follow-up would loop back if follow-up jobs triggered one.
  wf.set_queue_follow_up(*ac_, "fa", FollowUpOn::kCompleted, "audit", std::string("fq"));

  const JobId done = add("fq");
  EXPECT_EQ(end(claim("fq").at(0), Outcome::kCompleted, {}).state, "completed");
  const JobId dead = add("fq", 1);
  EXPECT_EQ(end(claim("fq").at(0), Outcome::kRetry, {}).state, "failed");

  const auto audit = claim("fa");
  ASSERT_EQ(audit.size(), 2U);
  EXPECT_EQ(audit[0].kind, "audit");
  EXPECT_EQ(json::parse(audit[0].args_json),
            (json{{"job_id", done}, {"kind", "work"}, {"queue", "fq"}, {"state", "completed"}}));
  EXPECT_EQ(audit[1].kind, "alert");
  EXPECT_EQ(json::parse(audit[1].args_json).at("job_id"), dead);
  EXPECT_EQ(json::parse(audit[1].args_json).at("error"), "boom");
  EXPECT_EQ(audit[0].metadata.at("awa.follow_up_of"), done);

  // The audit job completes: it is a follow-up, so "fa"'s follow-up does not fire.
  EXPECT_EQ(end(audit[0], Outcome::kCompleted, {}).state, "completed");
  EXPECT_TRUE(claim("fq").empty());

  all = wf.clear_queue_follow_up(*ac_, "fq", FollowUpOn::kCompleted);
  ASSERT_EQ(all.size(), 1U);
  EXPECT_EQ(all[0].on, FollowUpOn::kExhausted);
  EXPECT_EQ(wf.queue_follow_ups(*ac_).size(), 2U);
  add("fq");
  end(claim("fq").at(0), Outcome::kCompleted, {});
  EXPECT_TRUE(claim("fa").empty());
  EXPECT_THROW(wf.set_queue_follow_up(*ac_, "fq", FollowUpOn::kCompleted, ""), InvalidArgument);
}

TEST_F(RuntimeTest, AHandlersThenEnqueuesItsFollowUpWithItsCompletion) {
  std::atomic<int> shipped{0};
  Client client(options());
  client.register_worker("charge", [](JobContext& job) {
    return JobResult::completed(json{{"paid", true}})
        .then(FollowUpOn::kCompleted,
              NewJob("ship", {{"order", job.args().at("order")}}, on_queue("orders")))
        .then(FollowUpOn::kExhausted, NewJob("refund", {}, on_queue("orders")));
  });
  client.register_worker("ship", [&](JobContext& job) {
    if (job.args().at("order") == 7) shipped.fetch_add(1);
    return JobResult::completed();
  });
  client.register_worker("refund", [](JobContext&) { return JobResult::completed(); });
  client.add_queue(queue("orders", 2));
  client.start();
  client.insert(NewJob("charge", {{"order", 7}}, on_queue("orders")));
  ASSERT_TRUE(
      eventually([&] { return terminal("state = 'completed'") == 2; }, std::chrono::seconds(30)));
  client.stop();
  EXPECT_EQ(shipped.load(), 1);
  EXPECT_EQ(terminal(), 2) << "no refund: the charge did not exhaust";
}

}  // namespace
}  // namespace awa::testing
