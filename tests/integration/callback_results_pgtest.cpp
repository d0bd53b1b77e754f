// What an external system answers (issue 14; docs/scheduling.md, "External callbacks"):
// Admin::complete_external(id, result) keeps the result on the completed job, counts the
// job once everywhere a success is counted, and a stale callback's result changes
// nothing. Regression guard: a result closed as a bare success (closure 'completed') and
// also written as a done row would count the job twice.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <string>

#include "admin_jobs_support.hpp"
#include "awa/error.hpp"
#include "cli_runner.hpp"

namespace awa::testing {
namespace {

using std::chrono::hours;

class CallbackResultTest : public JobAdminTest {
 protected:
  std::string park(const ClaimedEntry& e) {
    const auto cb = storage::consumer(*store_).callback(conn(), e, hours(1), true);
    EXPECT_TRUE(cb);
    return cb.value_or("");
  }
  std::int64_t completed_in_last_hour(const std::string& queue) {
    const auto t = admin().throughput(ac(), std::chrono::minutes(60), queue);
    std::int64_t n = 0;
    for (const auto& s : t.queues) n = std::accumulate(s.completed.begin(), s.completed.end(), n);
    return n;
  }
  // Seals the current slot of `ring` and prunes every sealed slot that holds nothing
  // live, as the maintenance leader would: nothing written before is left in the ring.
  void turn(const std::string& ring) {
    const auto r = admin().rotate(ac(), ring);
    ASSERT_TRUE(r.done) << ring << ": " << r.reason;
    int pruned = 0;
    while (admin().prune(ac(), ring).done) ++pruned;
    ASSERT_GE(pruned, 1) << ring;
  }
  int timeline_count(JobId id, const std::string& event) {
    const auto d = admin().job(ac(), id);  // kept: the loop reads its timeline
    int n = 0;
    for (const auto& e : d.value().timeline) n += e.event == event ? 1 : 0;
    return n;
  }
};

TEST_F(CallbackResultTest, TheResultIsKeptOnTheJobWhichCountsOnce) {
  const JobId with = enqueue("q");
  const JobId plain = enqueue("q");
  const auto cb = park(claim_one("q", with));
  EXPECT_EQ(finish(claim_one("q", plain), Outcome::kCompleted), "completed");

  const auto r = admin().complete_external(ac(), cb, R"({"approved": true, "by": "alice"})");
  ASSERT_FALSE(r.stale());
  EXPECT_EQ(r.state, "completed");

  auto d = admin().job(ac(), with);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->summary.state, "completed");
  ASSERT_TRUE(d->result_json);
  EXPECT_EQ(nlohmann::json::parse(*d->result_json),
            nlohmann::json({{"approved", true}, {"by", "alice"}}));
  EXPECT_FALSE(admin().job(ac(), plain)->result_json);  // a handler's success has none
  EXPECT_EQ(timeline_count(with, "completed"), 1);

  // Counted once: in the exact counts, the per-minute rates and the job list.
  EXPECT_EQ(admin().queue_counts(ac(), "q").completed, 2);
  EXPECT_EQ(completed_in_last_hour("q"), 2);
  JobFilter f;
  f.queue = "q";
  f.state = "completed";
  EXPECT_EQ(admin().list_jobs(ac(), f).size(), 2U);

  // A duplicate callback with another answer is stale and does not replace the first.
  EXPECT_TRUE(admin().complete_external(ac(), cb, R"({"approved": false})").stale());
  EXPECT_EQ(nlohmann::json::parse(*admin().job(ac(), with)->result_json)["approved"], true);
  EXPECT_EQ(admin().queue_counts(ac(), "q").completed, 2);
}

TEST_F(CallbackResultTest, TheResultOutlivesTheClaimRingAndTheCountsOutliveTheQueueRing) {
  const JobId id = enqueue("q");
  const auto cb = park(claim_one("q", id));
  ASSERT_FALSE(admin().complete_external(ac(), cb, R"("approved")").stale());
  // The claim ring turns over: the batch and its closure go; the done row stays.
  turn("claim");
  auto d = admin().job(ac(), id);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->summary.state, "completed");
  EXPECT_EQ(d->result_json, R"("approved")");
  EXPECT_EQ(admin().queue_counts(ac(), "q").completed, 1);
  // The queue ring turns over: the job is gone, its end is still counted once.
  turn("queue");
  EXPECT_FALSE(admin().job(ac(), id));
  EXPECT_EQ(admin().queue_counts(ac(), "q").completed, 1);
  EXPECT_EQ(completed_in_last_hour("q"), 1);
}

TEST_F(CallbackResultTest, ABadResultIsRefusedAndChangesNothing) {
  const JobId id = enqueue("q");
  const auto cb = park(claim_one("q", id));
  EXPECT_THROW(admin().complete_external(ac(), cb, "approved"), InvalidArgument);
  EXPECT_THROW(admin().complete_external(ac(), cb, R"({"a": "\u0000"})"), InvalidArgument);
  EXPECT_THROW(admin().complete_external(ac(), cb, std::string(kMaxArgsBytes + 1, ' ')),
               InvalidArgument);
  EXPECT_EQ(state_of(id), "waiting_external");
  // Only a completion carries a result (the SQL function says so too).
  try {
    conn().query("SELECT * FROM resolve_callback($1::uuid, 'fail', 'x', '1'::jsonb)", cb);
    ADD_FAILURE() << "a failure with a result was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "22023") << e.what();
  }
  EXPECT_EQ(state_of(id), "waiting_external");
  EXPECT_EQ(admin().complete_external(ac(), cb, "null").state, "completed");
}

TEST_F(CallbackResultTest, TheCliPassesAndShowsTheResult) {
  const JobId id = enqueue("q");
  const auto cb = park(claim_one("q", id));
  const std::string awa = "--schema " + schema_ + " ";
  auto r = run_cli(awa + "callback complete " + cb + " --result 'not json'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the callback result is not valid JSON"), std::string::npos) << r.output;
  EXPECT_EQ(state_of(id), "waiting_external");
  r = run_cli(awa + "callback complete " + cb + R"( --result '{"ticket": 77}' --json)");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["state"], "completed");
  r = run_cli(awa + "job show " + std::to_string(id));
  EXPECT_NE(r.output.find(R"(result       {"ticket": 77})"), std::string::npos) << r.output;
  r = run_cli(awa + "job show " + std::to_string(id) + " --json");
  EXPECT_EQ(nlohmann::json::parse(r.output)["result"], nlohmann::json({{"ticket", 77}}))
      << r.output;
}

}  // namespace
}  // namespace awa::testing
