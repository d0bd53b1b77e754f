// Admin: listing and showing jobs in every state, and retrying them (issue 12;
// sql/functions/0055_job_admin.sql, 0056_job_moves.sql).
#include <atomic>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "admin_jobs_support.hpp"
#include "awa/error.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

class JobListTest : public JobAdminTest, public ::testing::WithParamInterface<int> {};

TEST_P(JobListTest, ListsAndShowsEveryStateOnceAndAgreesWithTheCounts) {
  set_shards("st", GetParam());
  const auto ids = every_state("st");

  JobFilter all;
  all.queue = "st";
  const auto jobs = admin().list_jobs(ac(), all);
  std::map<JobId, std::string> listed;
  for (const auto& s : jobs) EXPECT_TRUE(listed.emplace(s.id, s.state).second) << s.id;
  ASSERT_EQ(listed.size(), ids.size());
  for (const auto& [state, id] : ids) {
    const std::string want = state == "cancelled_scheduled" ? "cancelled" : state;
    EXPECT_EQ(listed[id], want) << state;
    EXPECT_EQ(state_of(id), want) << state;
  }
  // Ordered by id.
  for (std::size_t i = 1; i < jobs.size(); ++i) EXPECT_LT(jobs[i - 1].id, jobs[i].id);

  // Every state filter selects exactly its jobs.
  for (const char* state : kJobStates) {
    JobFilter f;
    f.queue = "st";
    f.state = state;
    std::set<JobId> got;
    for (const auto& s : admin().list_jobs(ac(), f)) got.insert(s.id);
    std::set<JobId> want;
    for (const auto& [name, id] : ids) {
      if (name == state || (name == "cancelled_scheduled" && std::string(state) == "cancelled")) {
        want.insert(id);
      }
    }
    EXPECT_EQ(got, want) << state;
  }
  expect_counts_match_listing("st");

  // Attempts, shards and lanes as each state has them.
  std::map<JobId, JobSummary> by_id;
  for (const auto& s : jobs) by_id[s.id] = s;
  EXPECT_EQ(by_id[ids.at("available")].attempt, 0);
  EXPECT_EQ(by_id[ids.at("running")].attempt, 1);
  EXPECT_EQ(by_id[ids.at("completed")].attempt, 1);
  EXPECT_EQ(by_id[ids.at("failed")].attempt, 1);
  EXPECT_EQ(by_id[ids.at("failed")].max_attempts, 1);
  EXPECT_EQ(by_id[ids.at("retryable")].attempt, 1);
  EXPECT_EQ(by_id[ids.at("scheduled")].attempt, 0);
  EXPECT_EQ(by_id[ids.at("dlq")].kind, "dead");
  EXPECT_FALSE(by_id[ids.at("scheduled")].enqueue_shard.has_value());
  EXPECT_FALSE(by_id[ids.at("retryable")].enqueue_shard.has_value());
  EXPECT_FALSE(by_id[ids.at("dlq")].enqueue_shard.has_value());
  EXPECT_FALSE(by_id[ids.at("cancelled_scheduled")].enqueue_shard.has_value());
  for (const char* s :
       {"available", "running", "waiting_external", "completed", "failed", "cancelled"}) {
    ASSERT_TRUE(by_id[ids.at(s)].enqueue_shard.has_value()) << s;
    EXPECT_LT(*by_id[ids.at(s)].enqueue_shard, GetParam()) << s;
  }
  // Kind filter.
  JobFilter kinds;
  kinds.kind = "failing";
  const auto failing = admin().list_jobs(ac(), kinds);
  ASSERT_EQ(failing.size(), 1U);
  EXPECT_EQ(failing[0].id, ids.at("failed"));
}

INSTANTIATE_TEST_SUITE_P(Shards, JobListTest, ::testing::Values(1, 8));

TEST_F(JobAdminTest, ShowGivesPlaceErrorsProgressAndTimeline) {
  const auto ids = every_state("sh");

  const auto running = admin().job(ac(), ids.at("waiting_external"));
  ASSERT_TRUE(running);
  EXPECT_EQ(running->summary.state, "waiting_external");
  ASSERT_TRUE(running->progress_json);
  EXPECT_EQ(nlohmann::json::parse(*running->progress_json), nlohmann::json({{"step", 3}}));
  EXPECT_EQ(running->run_lease, 1);
  ASSERT_TRUE(running->lane_seq);

  const auto failed = admin().job(ac(), ids.at("failed"));
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->summary.kind, "failing");
  ASSERT_EQ(failed->errors.size(), 1U);
  EXPECT_EQ(failed->errors[0].attempt, 1);
  EXPECT_EQ(failed->errors[0].error, "boom");
  EXPECT_TRUE(is_iso_utc(failed->errors[0].at)) << failed->errors[0].at;
  std::vector<std::string> events;
  for (const auto& e : failed->timeline) events.push_back(e.event);
  EXPECT_EQ(events, (std::vector<std::string>{"created", "claimed", "failed"}));
  EXPECT_EQ(failed->timeline[1].attempt, 1);
  EXPECT_EQ(failed->timeline[1].enqueue_shard, 0);
  EXPECT_EQ(failed->timeline[2].detail, "boom");

  const auto completed = admin().job(ac(), ids.at("completed"));
  ASSERT_TRUE(completed);
  events.clear();
  for (const auto& e : completed->timeline) events.push_back(e.event);
  EXPECT_EQ(events, (std::vector<std::string>{"created", "claimed", "completed"}));
  EXPECT_FALSE(completed->timeline[2].at.empty());
  EXPECT_EQ(completed->args_json, "{}");
  EXPECT_EQ(completed->metadata_json, "null");

  const auto retryable = admin().job(ac(), ids.at("retryable"));
  ASSERT_TRUE(retryable);
  ASSERT_EQ(retryable->errors.size(), 1U);
  EXPECT_EQ(retryable->errors[0].error, "try again");
  events.clear();
  for (const auto& e : retryable->timeline) events.push_back(e.event);
  EXPECT_EQ(events, (std::vector<std::string>{"created", "claimed", "retried", "scheduled"}));
  EXPECT_THAT(retryable->timeline.back().detail, HasSubstr("(retry)"));

  const auto dead = admin().job(ac(), ids.at("dlq"));
  ASSERT_TRUE(dead);
  EXPECT_EQ(dead->summary.state, "dlq");
  ASSERT_EQ(dead->errors.size(), 1U);
  EXPECT_EQ(dead->errors[0].error, "fatal");
  EXPECT_EQ(dead->timeline.back().event, "dlq");

  const auto cs = admin().job(ac(), ids.at("cancelled_scheduled"));
  ASSERT_TRUE(cs);
  EXPECT_EQ(cs->summary.state, "cancelled");
  EXPECT_FALSE(cs->lane_seq.has_value());
  EXPECT_EQ(cs->timeline.back().event, "cancelled");
  EXPECT_EQ(cs->timeline.back().detail, "cancelled while scheduled");

  EXPECT_FALSE(admin().job(ac(), 987654321).has_value());
}

TEST_F(JobAdminTest, ListingUnderConcurrentClaimsShowsEveryJobExactlyOnce) {
  // One statement, one snapshot: a job moving from available to running to completed
  // while the listing runs is listed once, in one of those states, never twice or not
  // at all.
  set_shards("cc", 4);
  std::vector<NewJob> jobs(200, NewJob("work", nlohmann::json::object(), opts("cc")));
  storage::insert_many(*store_, conn(), jobs);
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    auto c = connect_new();
    QueueStorage::ClaimOptions o;
    o.max_batch = 7;
    while (!stop) {
      const auto got = storage::consumer(*store_).claim(c, "cc", o);
      if (got.empty()) break;
      std::vector<Completion> cs;
      for (const auto& e : got) cs.push_back(Completion::of(e, Outcome::kCompleted));
      storage::consumer(*store_).complete(c, cs);
    }
  });
  JobFilter f;
  f.queue = "cc";
  f.limit = 10000;
  for (int round = 0; round < 30; ++round) {
    std::set<JobId> seen;
    std::size_t n = 0;
    for (const auto& j : admin().list_jobs(ac(), f)) {
      ++n;
      seen.insert(j.id);
      EXPECT_TRUE(j.state == "available" || j.state == "running" || j.state == "completed")
          << j.state;
    }
    EXPECT_EQ(n, 200U);
    EXPECT_EQ(seen.size(), 200U);
  }
  stop = true;
  worker.join();
}

TEST_F(JobAdminTest, ACancelledScheduledJobsBodyIsHistoryToTheRings) {
  // The row at lane_seq = -job_id shares (queue, priority, shard 0) with a real lane:
  // prune must not take it for pending work, and it goes with its slot.
  const auto done = enqueue("hx");
  finish(claim_one("hx", done), Outcome::kCompleted);
  const auto cs = schedule("hx");
  ASSERT_EQ(admin().cancel_job(ac(), cs), "scheduled");
  EXPECT_EQ(admin().queue_shards(ac(), "hx").at(0).available, 0);
  EXPECT_EQ(admin().queue_counts(ac(), "hx").available, 0);
  EXPECT_TRUE(claim("hx").empty());
  ASSERT_TRUE(admin().rotate(ac(), "queue").done);
  const auto pruned = admin().prune(ac(), "queue");
  EXPECT_TRUE(pruned.done) << pruned.reason;
  EXPECT_EQ(pruned.rows_carried, 0);
  const auto c = admin().queue_counts(ac(), "hx");
  EXPECT_EQ(c.cancelled, 1);
  EXPECT_EQ(c.completed, 1);
  EXPECT_FALSE(admin().job(ac(), cs).has_value());
  EXPECT_EQ(admin().retry_job(ac(), cs).outcome, "not_found");
}

TEST_F(JobAdminTest, ShowKeepsTheBodyOfAScheduledJob) {
  InsertOpts o = opts("body", 3, std::string("k\x01y"));
  o.run_at = std::chrono::system_clock::now() + std::chrono::hours(2);
  o.metadata = {{"m", 1}};
  o.tags = {"a", "b"};
  const auto id = enqueue(o, "send", {{"to", "x"}});
  const auto d = admin().job(ac(), id);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->summary.state, "scheduled");
  EXPECT_EQ(d->summary.priority, 3);
  EXPECT_EQ(nlohmann::json::parse(d->args_json), nlohmann::json({{"to", "x"}}));
  EXPECT_EQ(nlohmann::json::parse(d->metadata_json), nlohmann::json({{"m", 1}}));
  EXPECT_EQ(d->tags, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(d->ordering_key, std::string("k\x01y"));
  EXPECT_FALSE(d->lane_seq.has_value());
  EXPECT_EQ(d->timeline.back().event, "scheduled");
  EXPECT_THAT(d->timeline.back().detail, HasSubstr("(scheduled)"));
}

TEST_F(JobAdminTest, ListPaginatesAndRejectsBadFilters) {
  std::vector<JobId> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(enqueue("pg"));
  JobFilter f;
  f.limit = 2;
  auto page = admin().list_jobs(ac(), f);
  ASSERT_EQ(page.size(), 2U);
  EXPECT_EQ(page[0].id, ids[0]);
  EXPECT_EQ(page[1].id, ids[1]);
  f.after = page[1].id;
  page = admin().list_jobs(ac(), f);
  ASSERT_EQ(page.size(), 2U);
  EXPECT_EQ(page[0].id, ids[2]);
  f.after = ids[4];
  EXPECT_TRUE(admin().list_jobs(ac(), f).empty());

  JobFilter bad;
  bad.state = "sleeping";
  try {
    admin().list_jobs(ac(), bad);
    FAIL() << "accepted an unknown state";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown job state \"sleeping\""));
    EXPECT_THAT(e.what(), HasSubstr("scheduled, retryable, available, running, waiting"));
  }
  bad = JobFilter{};
  bad.limit = 0;
  EXPECT_THROW(admin().list_jobs(ac(), bad), InvalidArgument);
  bad.limit = 10001;
  EXPECT_THROW(admin().list_jobs(ac(), bad), InvalidArgument);
  bad = JobFilter{};
  bad.queue = "a b";
  EXPECT_THROW(admin().list_jobs(ac(), bad), InvalidArgument);
  // The SQL function checks too (for SQL callers).
  EXPECT_THROW(conn().exec("SELECT * FROM job_states(p_state => 'nope')"), DatabaseError);
}

class JobRetryTest : public JobAdminTest, public ::testing::WithParamInterface<int> {};

TEST_P(JobRetryTest, FailedCancelledAndDeadJobsRunAgainWithCountsExact) {
  const int shards = GetParam();
  set_shards("rq", shards);
  const auto ids = every_state("rq");
  // Drain the one available job so every later claim takes a retried one.
  finish(claim_one("rq", ids.at("available")), Outcome::kCompleted);
  const auto before = admin().queue_counts(ac(), "rq");
  EXPECT_EQ(before.failed, 1);
  EXPECT_EQ(before.cancelled, 2);
  EXPECT_EQ(before.dlq, 1);

  int n = 0;
  for (const char* which : {"failed", "cancelled", "cancelled_scheduled", "dlq"}) {
    SCOPED_TRACE(which);
    const JobId id = ids.at(which);
    const auto lease_before = admin().job(ac(), id)->run_lease;
    const auto a = admin().retry_job(ac(), id);
    EXPECT_EQ(a.id, id);
    EXPECT_EQ(a.outcome, "retried");
    EXPECT_EQ(a.state, std::string(which) == "cancelled_scheduled" ? "cancelled" : which);
    ++n;
    const auto now = admin().queue_counts(ac(), "rq");
    EXPECT_EQ(now.available, 1);
    EXPECT_EQ(now.failed + now.cancelled + now.dlq,
              before.failed + before.cancelled + before.dlq - n);
    expect_counts_match_listing("rq");

    const auto d = admin().job(ac(), id);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->summary.state, "available");
    EXPECT_EQ(d->summary.attempt, 0);
    ASSERT_TRUE(d->summary.enqueue_shard);
    EXPECT_LT(*d->summary.enqueue_shard, shards);
    EXPECT_EQ(d->timeline.back().event, "retried_by_operator");

    const auto again = claim_one("rq", id);
    EXPECT_EQ(again.attempt, 1);
    EXPECT_GT(again.run_lease, lease_before);
    if (std::string(which) == "failed") {
      // The failed attempt's error, kept on the job.
      ASSERT_TRUE(again.errors.is_array());
      ASSERT_EQ(again.errors.size(), 1U);
      EXPECT_EQ(again.errors[0]["error"], "boom");
    }
    if (std::string(which) == "dlq") {
      EXPECT_EQ(again.errors.size(), 1U);
    }
    EXPECT_EQ(finish(again, Outcome::kCompleted), "completed");
  }
  const auto after = admin().queue_counts(ac(), "rq");
  EXPECT_EQ(after.failed, 0);
  EXPECT_EQ(after.cancelled, 0);
  EXPECT_EQ(after.dlq, 0);
  EXPECT_EQ(after.completed, before.completed + 4);
  expect_counts_match_listing("rq");
}

INSTANTIATE_TEST_SUITE_P(Shards, JobRetryTest, ::testing::Values(1, 8));

TEST_F(JobAdminTest, RetryRefusesLiveJobsAndUnknownIds) {
  const auto ids = every_state("rr");
  for (const char* which :
       {"available", "running", "waiting_external", "scheduled", "retryable", "completed"}) {
    const auto a = admin().retry_job(ac(), ids.at(which));
    EXPECT_EQ(a.outcome, "not_retryable") << which;
    EXPECT_EQ(a.state, which);
    EXPECT_EQ(state_of(ids.at(which)), which);
  }
  const auto missing = admin().retry_job(ac(), 55555555);
  EXPECT_EQ(missing.outcome, "not_found");
  EXPECT_EQ(missing.state, "");
  // Once retried, not again.
  EXPECT_EQ(admin().retry_job(ac(), ids.at("failed")).outcome, "retried");
  EXPECT_EQ(admin().retry_job(ac(), ids.at("failed")).outcome, "not_retryable");
  // A job cancelled while scheduled, retried and cancelled while scheduled again keeps
  // working (its lane_seq = -job_id rows were taken back by the retry).
  const JobId cs = ids.at("cancelled_scheduled");
  EXPECT_EQ(admin().retry_job(ac(), cs).outcome, "retried");
  // Lane order at S = 1: the available job, then the two retried ones.
  claim_one("rr", ids.at("available"));
  claim_one("rr", ids.at("failed"));
  const auto e = claim_one("rr", cs);
  EXPECT_EQ(finish(e, Outcome::kSnooze, {}, std::chrono::hours(1)), "snoozed");
  EXPECT_EQ(admin().cancel_job(ac(), cs), "scheduled");
  EXPECT_EQ(state_of(cs), "cancelled");
  EXPECT_EQ(admin().retry_job(ac(), cs).outcome, "retried");
  EXPECT_EQ(state_of(cs), "available");
}

TEST_F(JobAdminTest, ConcurrentRetriesOfOneJobRetryItOnce) {
  const auto ids = every_state("cr");
  std::vector<JobAction> results(2);
  std::vector<std::thread> ts;
  for (int i = 0; i < 2; ++i) {
    ts.emplace_back([&, i] {
      auto c = Connection::connect(database_url());
      results[static_cast<std::size_t>(i)] = admin().retry_job(c, ids.at("failed"));
    });
  }
  for (auto& t : ts) t.join();
  std::multiset<std::string> outcomes{results[0].outcome, results[1].outcome};
  EXPECT_EQ(outcomes, (std::multiset<std::string>{"not_retryable", "retried"}));
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE job_id = " +
                  std::to_string(ids.at("failed"))),
            2);
  expect_counts_match_listing("cr");
}

TEST_F(JobAdminTest, RetryFailedByQueueAndKind) {
  std::vector<JobId> failed;
  for (const auto* q : {"fa", "fa", "fb"}) {
    const auto id = enqueue(opts(q, 2, std::nullopt, 1), std::string("k-") + q);
    EXPECT_EQ(finish(claim_one(q, id), Outcome::kFail, "x"), "failed");
    failed.push_back(id);
  }
  EXPECT_THROW(admin().retry_failed(ac(), std::nullopt, std::nullopt), InvalidArgument);
  EXPECT_EQ(admin().retry_failed(ac(), std::string("fa"), std::nullopt),
            (std::vector<JobId>{failed[0], failed[1]}));
  EXPECT_EQ(admin().queue_counts(ac(), "fa").failed, 0);
  EXPECT_EQ(admin().queue_counts(ac(), "fa").available, 2);
  EXPECT_EQ(admin().queue_counts(ac(), "fb").failed, 1);
  EXPECT_TRUE(admin().retry_failed(ac(), std::nullopt, std::string("k-fa")).empty());
  EXPECT_EQ(admin().retry_failed(ac(), std::nullopt, std::string("k-fb")),
            (std::vector<JobId>{failed[2]}));
  EXPECT_EQ(state_of(failed[2]), "available");
  expect_counts_match_listing("fa");
  expect_counts_match_listing("fb");
}

}  // namespace
}  // namespace awa::testing
