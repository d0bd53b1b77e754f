// Queue administration through the public API (issue 12): exact counts of every state at
// S = 1 and S = 8, the queue listing, configure's round trip and refusals, pause / resume
// (also across a worker restart), and the claim's use of the queue's deadline.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "awa/queue_storage.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

std::string describe(const QueueCounts& c) {
  return "available " + std::to_string(c.available) + ", running " + std::to_string(c.running) +
         ", scheduled " + std::to_string(c.scheduled) + ", retryable " +
         std::to_string(c.retryable) + ", completed " + std::to_string(c.completed) + ", failed " +
         std::to_string(c.failed) + ", cancelled " + std::to_string(c.cancelled) + ", dlq " +
         std::to_string(c.dlq);
}

// The SQLSTATE `fn` fails with as a ConstraintViolation; "" when it succeeds.
template <class Fn>
std::string check_violation_of(Fn fn) {
  try {
    fn();
  } catch (const ConstraintViolation& e) {
    return e.sqlstate();
  }
  return "";
}

class AdminQueuesTest : public RuntimeTest {
 protected:
  void SetUpSchema() override {
    RuntimeTest::SetUpSchema();
    pub_ = std::make_unique<Connection>(Connection::connect(database_url()));
    admin_ = std::make_unique<Admin>(schema_);
  }

  Connection& pub() { return *pub_; }
  const Admin& admin() const { return *admin_; }

  NewJob job(const std::string& queue, int i, int max_attempts = 25) const {
    InsertOpts o = on_queue(queue);
    o.priority = 1 + i % 3;
    o.max_attempts = max_attempts;
    o.ordering_key = "key-" + std::to_string(i);  // spreads the jobs over the shards
    return NewJob("k", {{"i", i}}, o);
  }

  // Claims until `n` attempts are held, through the public QueueStorage.
  std::vector<ClaimedEntry> claim_n(QueueStorage& store, const std::string& queue, std::size_t n) {
    std::vector<ClaimedEntry> out;
    QueueStorage::ClaimOptions o;
    o.max_batch = 3;
    while (out.size() < n) {
      const auto got = store.claim(pub(), queue, o);
      if (got.empty()) throw std::runtime_error("queue " + queue + " ran dry");
      out.insert(out.end(), got.begin(), got.end());
    }
    return out;
  }

  std::unique_ptr<Connection> pub_;
  std::unique_ptr<Admin> admin_;
};

class AdminQueueCountsTest : public AdminQueuesTest, public ::testing::WithParamInterface<int> {};

TEST_P(AdminQueueCountsTest, CountsAreExactInEveryStateAndListedOnce) {
  // Guards queue_overview / queue_counts_exact: every state of one queue counted exactly
  // once however many shards (and priorities) its lanes span, the per-lane available
  // figures summing to the same total, and no bleed from another queue.
  const int shards = GetParam();
  admin().set_enqueue_shards(pub(), "mix", shards);
  QueueStorage store(StorageOptions{schema_});

  std::vector<NewJob> jobs;
  for (int i = 0; i < 20; ++i) jobs.push_back(job("mix", i));
  store.insert_many(pub(), jobs);
  auto run = claim_n(store, "mix", 20);
  ASSERT_EQ(run.size(), 20U) << "max_batch 3 never over-claims past 20 rows of 20";

  // 6 completed, 3 retried with a long backoff, 2 failed for good, 1 snoozed, 1 cancelled
  // by its handler; with the DLQ on, 2 more terminal failures go to the DLQ; 5 stay open.
  std::vector<Completion> done;
  for (std::size_t i = 0; i < 6; ++i) done.push_back(Completion::of(run[i], Outcome::kCompleted));
  for (std::size_t i = 6; i < 9; ++i)
    done.push_back(Completion::of(run[i], Outcome::kRetry, "later", std::chrono::hours(1)));
  for (std::size_t i = 9; i < 11; ++i) done.push_back(Completion::of(run[i], Outcome::kFail, "no"));
  done.push_back(Completion::of(run[11], Outcome::kSnooze, "", std::chrono::hours(1)));
  done.push_back(Completion::of(run[12], Outcome::kCancel, "stop"));
  for (const auto& r : store.complete(pub(), done)) ASSERT_FALSE(r.stale());
  QueueConfigChange dlq_on;
  dlq_on.dlq_enabled = true;
  admin().configure_queue(pub(), "mix", dlq_on);
  const auto to_dlq =
      store.complete(pub(), std::vector{Completion::of(run[13], Outcome::kFail, "x"),
                                        Completion::of(run[14], Outcome::kFail, "y")});
  ASSERT_EQ(to_dlq.at(0).state, "dlq");
  ASSERT_EQ(to_dlq.at(1).state, "dlq");

  // Not run yet: 5 available (1 then cancelled), 2 scheduled an hour ahead.
  std::vector<NewJob> waiting;
  for (int i = 100; i < 105; ++i) waiting.push_back(job("mix", i));
  const auto avail = store.insert_many(pub(), waiting);
  std::vector<NewJob> later;
  for (int i = 200; i < 202; ++i) {
    later.push_back(job("mix", i));
    later.back().opts.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
  }
  store.insert_many(pub(), later);
  ASSERT_EQ(admin().cancel_job(pub(), avail[0]), "available");
  // Another queue, which must not bleed into mix's numbers.
  store.insert(pub(), job("other", 0));

  QueueCounts want;
  want.available = 4;
  want.running = 5;
  want.scheduled = 2 + 1;  // scheduled + snoozed
  want.retryable = 3;
  want.completed = 6;
  want.failed = 2;
  want.cancelled = 1 + 1;  // by its handler + before its claim
  want.dlq = 2;
  EXPECT_EQ(describe(admin().queue_counts(pub(), "mix")), describe(want));

  const auto one = admin().queue_summary(pub(), "mix");
  EXPECT_TRUE(one.known);
  EXPECT_EQ(describe(one.counts), describe(want));
  EXPECT_EQ(one.settings.queue, "mix");
  EXPECT_EQ(one.settings.enqueue_shards, shards);
  EXPECT_TRUE(one.settings.dlq_enabled);
  EXPECT_TRUE(one.settings.configured);
  ASSERT_TRUE(one.oldest_available_age_s.has_value());
  EXPECT_GE(*one.oldest_available_age_s, 0.0);
  EXPECT_LT(*one.oldest_available_age_s, 300.0);

  const auto all = admin().list_queues(pub());
  ASSERT_EQ(all.size(), 2U);
  EXPECT_EQ(all[0].settings.queue, "mix");
  EXPECT_EQ(describe(all[0].counts), describe(want));
  EXPECT_EQ(all[1].settings.queue, "other");
  QueueCounts other;
  other.available = 1;
  EXPECT_EQ(describe(all[1].counts), describe(other));
  EXPECT_FALSE(all[1].settings.configured);
  EXPECT_EQ(all[1].settings.enqueue_shards, 1);

  const auto lanes = admin().queue_shards(pub(), "mix");
  const auto per_lane =
      std::accumulate(lanes.begin(), lanes.end(), std::int64_t{0},
                      [](std::int64_t s, const ShardLag& l) { return s + l.available; });
  EXPECT_EQ(per_lane, want.available);
  if (shards > 1) {
    std::vector<int> used;
    for (const auto& l : lanes) used.push_back(l.enqueue_shard);
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    EXPECT_GT(used.size(), 1U) << "the jobs should span several shards";
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, AdminQueueCountsTest, ::testing::Values(1, 8));

TEST_F(AdminQueuesTest, ListKnowsQueuesBySettingsLanesDeferredJobsAndDeadLetters) {
  QueueStorage store(StorageOptions{schema_});
  admin().pause_queue(pub(), "b-settings-only");
  store.insert(pub(), job("a-lane", 1));
  NewJob later = job("c-deferred-only", 2);
  later.opts.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
  store.insert(pub(), later);
  // A dead letter whose queue has no lane or settings left: written by hand, as a queue
  // emptied and dropped by an operator would leave it.
  conn().exec(
      "INSERT INTO dlq_entries (job_id, queue, priority, kind, args, attempt, run_lease, "
      "max_attempts, created_at, reason) VALUES (nextval('job_ids'), 'd-dlq-only', 2, 'k', "
      "'{}', 1, 1, 1, now(), 'failed')");

  const auto all = admin().list_queues(pub());
  std::vector<std::string> names;
  for (const auto& q : all) names.push_back(q.settings.queue);
  EXPECT_EQ(names, (std::vector<std::string>{"a-lane", "b-settings-only", "c-deferred-only",
                                             "d-dlq-only"}));
  EXPECT_EQ(all[0].counts.available, 1);
  EXPECT_TRUE(all[1].settings.paused);
  EXPECT_TRUE(all[1].settings.configured);
  EXPECT_FALSE(all[1].oldest_available_age_s.has_value());
  EXPECT_EQ(all[2].counts.scheduled, 1);
  EXPECT_EQ(all[3].counts.dlq, 1);
  for (const auto& q : all) EXPECT_TRUE(q.known) << q.settings.queue;
  for (const auto& name : names) EXPECT_TRUE(admin().queue_summary(pub(), name).known) << name;

  // A queue never used: defaults and zeros, not known, and nothing written.
  const auto none = admin().queue_summary(pub(), "never");
  EXPECT_FALSE(none.known);
  EXPECT_EQ(none.settings.queue, "never");
  EXPECT_FALSE(none.settings.configured);
  EXPECT_EQ(none.settings.enqueue_shards, 1);
  EXPECT_FALSE(none.settings.paused);
  EXPECT_EQ(describe(none.counts), describe(QueueCounts{}));
  EXPECT_FALSE(none.oldest_available_age_s.has_value());
  EXPECT_EQ(admin().list_queues(pub()).size(), 4U);

  EXPECT_THROW(admin().queue_summary(pub(), "bad name"), InvalidArgument);
  EXPECT_THROW(admin().pause_queue(pub(), ""), InvalidArgument);
  EXPECT_THROW(admin().resume_queue(pub(), std::string(201, 'q')), InvalidArgument);
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta"), 1);
}

TEST_F(AdminQueuesTest, ConfigureWritesOnlyTheGivenFieldsAndZeroClears) {
  admin().set_enqueue_shards(pub(), "cf", 4);
  QueueConfigChange c1;
  c1.dlq_enabled = true;
  c1.priority_aging_ms = 500;
  auto s = admin().configure_queue(pub(), "cf", c1);
  EXPECT_EQ(s.queue, "cf");
  EXPECT_TRUE(s.configured);
  EXPECT_EQ(s.enqueue_shards, 4) << "configure must not touch the shard count";
  EXPECT_TRUE(s.dlq_enabled);
  EXPECT_EQ(s.priority_aging_ms, std::optional<std::int64_t>(500));
  EXPECT_FALSE(s.deadline_ms.has_value());
  EXPECT_FALSE(s.max_workers_hint.has_value());

  QueueConfigChange c2;
  c2.deadline_ms = 30000;
  c2.max_workers_hint = 16;
  s = admin().configure_queue(pub(), "cf", c2);
  EXPECT_TRUE(s.dlq_enabled);
  EXPECT_EQ(s.priority_aging_ms, std::optional<std::int64_t>(500));
  EXPECT_EQ(s.deadline_ms, std::optional<std::int64_t>(30000));
  EXPECT_EQ(s.max_workers_hint, std::optional<int>(16));

  QueueConfigChange c3;
  c3.priority_aging_ms = 0;
  c3.dlq_enabled = false;
  s = admin().configure_queue(pub(), "cf", c3);
  EXPECT_FALSE(s.dlq_enabled);
  EXPECT_FALSE(s.priority_aging_ms.has_value());
  EXPECT_EQ(s.deadline_ms, std::optional<std::int64_t>(30000));

  // stats reads back what configure wrote.
  const auto read = admin().queue_summary(pub(), "cf").settings;
  EXPECT_EQ(read.enqueue_shards, 4);
  EXPECT_FALSE(read.dlq_enabled);
  EXPECT_FALSE(read.priority_aging_ms.has_value());
  EXPECT_EQ(read.deadline_ms, std::optional<std::int64_t>(30000));
  EXPECT_EQ(read.max_workers_hint, std::optional<int>(16));
  EXPECT_FALSE(read.paused);

  // A new queue gets a row with the defaults for what was not given.
  QueueConfigChange c4;
  c4.max_workers_hint = 3;
  s = admin().configure_queue(pub(), "fresh", c4);
  EXPECT_EQ(s.enqueue_shards, 1);
  EXPECT_FALSE(s.dlq_enabled);
  EXPECT_FALSE(s.paused);
  EXPECT_EQ(s.max_workers_hint, std::optional<int>(3));
}

TEST_F(AdminQueuesTest, ConfigureRefusesOutOfRangeValuesAndChangesNothing) {
  QueueConfigChange base;
  base.dlq_enabled = true;
  base.deadline_ms = 1000;
  base.max_workers_hint = 8;
  admin().configure_queue(pub(), "rf", base);
  const auto before = count(
      "SELECT count(*) FROM queue_meta WHERE queue = 'rf' AND dlq_enabled "
      "AND deadline_ms = 1000 AND max_workers_hint = 8 "
      "AND priority_aging_ms IS NULL");
  ASSERT_EQ(before, 1);

  const auto refused = [&](QueueConfigChange c) {
    return check_violation_of([&] { admin().configure_queue(pub(), "rf", c); });
  };
  QueueConfigChange bad_deadline;
  bad_deadline.dlq_enabled = false;  // valid, but must not be applied either
  bad_deadline.deadline_ms = -1;
  EXPECT_EQ(refused(bad_deadline), "23514");
  QueueConfigChange bad_aging;
  bad_aging.priority_aging_ms = -5;
  EXPECT_EQ(refused(bad_aging), "23514");
  QueueConfigChange bad_hint;
  bad_hint.max_workers_hint = 100001;
  EXPECT_EQ(refused(bad_hint), "23514");
  QueueConfigChange negative_hint;
  negative_hint.max_workers_hint = -2;
  EXPECT_EQ(refused(negative_hint), "23514");
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta WHERE queue = 'rf' AND dlq_enabled "
                  "AND deadline_ms = 1000 AND max_workers_hint = 8 "
                  "AND priority_aging_ms IS NULL"),
            1);

  // Refused for a queue that had no row: none is created.
  EXPECT_EQ(check_violation_of([&] { admin().configure_queue(pub(), "rf2", bad_hint); }), "23514");
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta WHERE queue = 'rf2'"), 0);
  EXPECT_THROW(admin().configure_queue(pub(), "bad/name", base), InvalidArgument);
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta"), 1);
}

TEST_F(AdminQueuesTest, PausedQueueClaimsNothingButAcceptsJobsUntilResumed) {
  QueueStorage store(StorageOptions{schema_});
  admin().set_enqueue_shards(pub(), "pz", 4);
  std::vector<NewJob> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(job("pz", i));
  store.insert_many(pub(), jobs);

  admin().pause_queue(pub(), "pz");
  EXPECT_TRUE(admin().queue_summary(pub(), "pz").settings.paused);
  EXPECT_EQ(admin().queue_summary(pub(), "pz").settings.enqueue_shards, 4)
      << "pause must keep the other settings";
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(store.claim(pub(), "pz").empty());
  store.insert(pub(), job("pz", 6));  // enqueue still works
  EXPECT_EQ(admin().queue_counts(pub(), "pz").available, 7);
  admin().pause_queue(pub(), "pz");  // idempotent
  EXPECT_TRUE(store.claim(pub(), "pz").empty());

  admin().resume_queue(pub(), "pz");
  EXPECT_FALSE(admin().queue_summary(pub(), "pz").settings.paused);
  std::size_t claimed = 0;
  for (int i = 0; i < 20 && claimed < 7; ++i) claimed += store.claim(pub(), "pz").size();
  EXPECT_EQ(claimed, 7U);
}

TEST_F(AdminQueuesTest, PauseSurvivesAClientRestart) {
  // A pause is stored, not held by a worker: a restarted client claims nothing from the
  // paused queue, while it works another queue (proof that it is up and claiming).
  std::atomic<int> ran_paused{0};
  std::atomic<int> ran_control{0};
  const auto make_client = [&] {
    auto c = std::make_unique<Client>(options());
    c->register_worker("p", [&](JobContext&) {
      ++ran_paused;
      return JobResult::completed();
    });
    c->register_worker("c", [&](JobContext&) {
      ++ran_control;
      return JobResult::completed();
    });
    auto q = queue("pq", 2);
    q.poll_interval = milliseconds(50);
    c->add_queue(q);
    auto ctl = queue("ctl", 2);
    ctl.poll_interval = milliseconds(50);
    c->add_queue(ctl);
    c->start();
    return c;
  };
  const auto enqueue_kind = [&](const std::string& q, const std::string& kind) {
    QueueStorage store(StorageOptions{schema_});
    store.insert(pub(), NewJob(kind, {}, on_queue(q)));
  };

  auto client = make_client();
  enqueue_kind("pq", "p");
  ASSERT_TRUE(eventually([&] { return ran_paused.load() == 1; }, seconds(10)));
  admin().pause_queue(pub(), "pq");
  client->stop();
  client.reset();

  client = make_client();
  for (int i = 0; i < 3; ++i) enqueue_kind("pq", "p");
  // The restarted client is claiming: a control job runs, and the paused queue's
  // dispatcher completes claims (awa_claim_duration_seconds counts each call, empty ones
  // included) that began after its jobs were there: the second one after `before` was
  // read began after any claim in flight then.
  enqueue_kind("ctl", "c");
  ASSERT_TRUE(eventually([&] { return ran_control.load() == 1; }, seconds(10)));
  const auto claims = [] {
    return metrics::engine().claim_duration_seconds.with({"pq"}).snapshot().count;
  };
  const auto before = claims();
  ASSERT_TRUE(eventually([&] { return claims() >= before + 3; }, seconds(10)))
      << "claims of pq: " << claims() - before;
  EXPECT_EQ(ran_paused.load(), 1);
  EXPECT_EQ(admin().queue_counts(pub(), "pq").available, 3);
  EXPECT_TRUE(admin().queue_summary(pub(), "pq").settings.paused);

  admin().resume_queue(pub(), "pq");
  EXPECT_TRUE(eventually([&] { return ran_paused.load() == 4; }, seconds(10)));
  client->stop();
  EXPECT_EQ(admin().queue_counts(pub(), "pq").completed, 4);
}

TEST_F(AdminQueuesTest, ClaimTakesTheQueueDeadlineWhenTheWorkerSetsNone) {
  QueueStorage store(StorageOptions{schema_});
  for (int i = 0; i < 3; ++i) store.insert(pub(), job("dl", 0));
  QueueStorage::ClaimOptions one;
  one.max_batch = 1;

  auto got = store.claim(pub(), "dl", one);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_FALSE(got[0].deadline_at.has_value()) << "no deadline anywhere: none";

  QueueConfigChange c;
  c.deadline_ms = 60000;
  admin().configure_queue(pub(), "dl", c);
  got = store.claim(pub(), "dl", one);
  ASSERT_EQ(got.size(), 1U);
  ASSERT_TRUE(got[0].deadline_at.has_value());
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(*got[0].deadline_at - got[0].claimed_at),
            milliseconds(60000));

  QueueStorage::ClaimOptions own = one;
  own.deadline = milliseconds(5000);
  got = store.claim(pub(), "dl", own);
  ASSERT_EQ(got.size(), 1U);
  ASSERT_TRUE(got[0].deadline_at.has_value());
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(*got[0].deadline_at - got[0].claimed_at),
            milliseconds(5000))
      << "the worker's deadline wins";
  EXPECT_EQ(count("SELECT count(*) FROM claim_batches WHERE deadline_at - claimed_at = "
                  "interval '60 seconds'"),
            1);

  // Cleared: back to none.
  c.deadline_ms = 0;
  admin().configure_queue(pub(), "dl", c);
  store.insert(pub(), job("dl", 0));
  got = store.claim(pub(), "dl", one);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_FALSE(got[0].deadline_at.has_value());
}

}  // namespace
}  // namespace awa::testing
