// Admin: the dead-letter queue — list, depth, retry, purge and their bulk guards
// (sql/functions/0057_dlq_admin.sql).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "admin_jobs_support.hpp"
#include "awa/error.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

class DlqTest : public JobAdminTest {
 protected:
  // A job of `kind` in `queue` that failed for good into the DLQ, one attempt.
  JobId dead(const std::string& queue, const std::string& kind,
             const std::string& error = "fatal") {
    set_dlq(queue, true);
    const auto id = enqueue(opts(queue), kind, {{"q", queue}});
    EXPECT_EQ(finish(claim_one(queue, id), Outcome::kFail, error), "dlq");
    return id;
  }
  std::int64_t dlq_rows() { return count("SELECT count(*) FROM dlq_entries"); }
  static DlqFilter by_queue(const std::string& q) {
    DlqFilter f;
    f.queue = q;
    return f;
  }
};

TEST_F(DlqTest, ListAndDepthShowEachDeadLetterWithItsErrors) {
  const auto a1 = dead("qa", "k1", "bad input");
  const auto a2 = dead("qa", "k2");
  const auto b1 = dead("qb", "k1");

  const auto all = admin().list_dlq(ac(), DlqFilter{});
  ASSERT_EQ(all.size(), 3U);
  EXPECT_EQ(all[0].id, a1);
  EXPECT_EQ(all[0].queue, "qa");
  EXPECT_EQ(all[0].kind, "k1");
  EXPECT_EQ(all[0].attempt, 1);
  EXPECT_EQ(all[0].max_attempts, 25);
  EXPECT_EQ(all[0].reason, "bad input");
  EXPECT_EQ(nlohmann::json::parse(all[0].args_json), nlohmann::json({{"q", "qa"}}));
  ASSERT_EQ(all[0].errors.size(), 1U);
  EXPECT_EQ(all[0].errors[0].attempt, 1);
  EXPECT_EQ(all[0].errors[0].error, "bad input");
  EXPECT_TRUE(is_iso_utc(all[0].dlq_at)) << all[0].dlq_at;

  auto f = by_queue("qa");
  std::vector<JobId> ids;
  for (const auto& e : admin().list_dlq(ac(), f)) ids.push_back(e.id);
  EXPECT_EQ(ids, (std::vector<JobId>{a1, a2}));
  f = DlqFilter{};
  f.kind = "k1";
  ids.clear();
  for (const auto& e : admin().list_dlq(ac(), f)) ids.push_back(e.id);
  EXPECT_EQ(ids, (std::vector<JobId>{a1, b1}));
  f = DlqFilter{};
  f.limit = 1;
  EXPECT_EQ(admin().list_dlq(ac(), f).size(), 1U);
  f.limit = 0;
  EXPECT_THROW(admin().list_dlq(ac(), f), InvalidArgument);
  f.limit = 10001;
  EXPECT_THROW(admin().list_dlq(ac(), f), InvalidArgument);

  EXPECT_EQ(admin().dlq_depth(ac()),
            (std::vector<std::pair<std::string, std::int64_t>>{{"qa", 2}, {"qb", 1}}));
}

TEST_F(DlqTest, BulkRetryAndPurgeNeedAFilterOrAll) {
  dead("qa", "k1");
  dead("qb", "k1");
  try {
    admin().retry_dlq(ac(), DlqFilter{});
    FAIL() << "an unfiltered retry ran";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("refusing to retry every dead letter without a filter"));
  }
  EXPECT_THROW(admin().purge_dlq(ac(), DlqFilter{}), InvalidArgument);
  EXPECT_EQ(dlq_rows(), 2);
  // The SQL functions refuse as well, for SQL callers.
  EXPECT_THROW(conn().exec("SELECT purge_dlq_entries(NULL, NULL, NULL, NULL, false)"),
               DatabaseError);
  EXPECT_THROW(conn().exec("SELECT retry_dlq_entries(NULL, NULL, NULL, NULL, NULL)"),
               DatabaseError);
  EXPECT_EQ(dlq_rows(), 2);

  DlqFilter everything;
  everything.all = true;
  EXPECT_EQ(admin().purge_dlq(ac(), everything), 2);
  EXPECT_EQ(dlq_rows(), 0);
}

TEST_F(DlqTest, RetryMovesDeadLettersBackToReadyAndTheyRunAgain) {
  set_shards("qa", 8);
  const auto a1 = dead("qa", "k1");
  const auto a2 = dead("qa", "k2");
  const auto b1 = dead("qb", "k1");
  EXPECT_EQ(admin().list_dlq(ac(), DlqFilter{})[0].attempt, 1);

  DlqFilter one;
  one.id = a2;
  EXPECT_EQ(admin().retry_dlq(ac(), one), (std::vector<JobId>{a2}));
  EXPECT_TRUE(admin().retry_dlq(ac(), one).empty());  // not there any more
  auto c = admin().queue_counts(ac(), "qa");
  EXPECT_EQ(c.dlq, 1);
  EXPECT_EQ(c.available, 1);
  expect_counts_match_listing("qa");

  const auto again = claim_one("qa", a2);
  EXPECT_EQ(again.attempt, 1);
  EXPECT_EQ(again.run_lease, 2);
  ASSERT_EQ(again.errors.size(), 1U);
  EXPECT_EQ(again.errors[0]["error"], "fatal");
  EXPECT_EQ(finish(again, Outcome::kCompleted), "completed");
  const auto d = admin().job(ac(), a2);
  ASSERT_TRUE(d);
  std::vector<std::string> events;
  for (const auto& e : d->timeline) events.push_back(e.event);
  EXPECT_EQ(events, (std::vector<std::string>{"created", "claimed", "dlq", "retried_by_operator",
                                              "claimed", "completed"}));

  DlqFilter kind;
  kind.kind = "k1";
  EXPECT_EQ(admin().retry_dlq(ac(), kind), (std::vector<JobId>{a1, b1}));
  EXPECT_EQ(dlq_rows(), 0);
  EXPECT_EQ(admin().queue_counts(ac(), "qa").available, 1);
  EXPECT_EQ(admin().queue_counts(ac(), "qb").available, 1);
  EXPECT_EQ(admin().job(ac(), a1)->summary.attempt, 0);
  ASSERT_TRUE(admin().job(ac(), a1)->summary.enqueue_shard);
  EXPECT_LT(*admin().job(ac(), a1)->summary.enqueue_shard, 8);
  // The single-job retry of `awa job retry` takes dead letters too.
  const auto b2 = dead("qc", "k3");
  const auto r = admin().retry_job(ac(), b2);
  EXPECT_EQ(r.state, "dlq");
  EXPECT_EQ(r.outcome, "retried");
  expect_counts_match_listing("qa");
  expect_counts_match_listing("qb");
  expect_counts_match_listing("qc");
}

TEST_F(DlqTest, PurgeByIdQueueAndAge) {
  const auto a1 = dead("qa", "k1");
  dead("qa", "k2");
  const auto b1 = dead("qb", "k1");
  const auto c1 = dead("qc", "k1");
  conn().query("UPDATE dlq_entries SET dlq_at = now() - interval '8 days' WHERE job_id = $1", c1);

  DlqFilter one;
  one.id = a1;
  EXPECT_EQ(admin().purge_dlq(ac(), one), 1);
  EXPECT_EQ(admin().purge_dlq(ac(), one), 0);
  DlqFilter old;
  old.older_than = std::chrono::hours(24 * 7);
  EXPECT_EQ(admin().purge_dlq(ac(), old), 1);
  EXPECT_EQ(count("SELECT count(*) FROM dlq_entries WHERE job_id = " + std::to_string(c1)), 0);
  EXPECT_EQ(admin().purge_dlq(ac(), by_queue("qa")), 1);
  EXPECT_EQ(admin().queue_counts(ac(), "qa").dlq, 0);
  EXPECT_EQ(admin().queue_counts(ac(), "qb").dlq, 1);
  DlqFilter neg;
  neg.older_than = std::chrono::seconds(-1);
  EXPECT_THROW(admin().purge_dlq(ac(), neg), InvalidArgument);
  EXPECT_THROW(admin().purge_dlq(ac(), by_queue("bad queue")), InvalidArgument);
  EXPECT_EQ(dlq_rows(), 1);
  // The maintenance leader's retention overload still works.
  conn().query("UPDATE dlq_entries SET dlq_at = now() - interval '1 hour' WHERE job_id = $1", b1);
  EXPECT_EQ(admin().purge_dlq(ac(), std::chrono::milliseconds(60'000)), 1);
  EXPECT_EQ(dlq_rows(), 0);
}

}  // namespace
}  // namespace awa::testing
