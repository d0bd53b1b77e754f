// The dispatcher's prefetch buffer (docs/runtime.md, "Prefetch"): bounded, counted, kept
// alive, and handed back unstarted by a stopping client for an immediate re-claim.
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "awa/metrics.hpp"
#include "runtime_support.hpp"
#include "storage/store_access.hpp"

namespace awa::testing {
namespace {

// Handlers of kind "gate" block until open(), or let_through() lets them pass one at a
// time (or their stop token fires).
class Gate {
 public:
  JobResult wait(JobContext& job) {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.wait(lock, [&] { return open_ || passes_ > 0 || job.stop_token().stop_requested(); });
    if (!open_ && passes_ > 0) --passes_;
    return JobResult::completed();
  }
  void open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void let_through(int n) {
    {
      std::lock_guard lock(mu_);
      passes_ += n;
    }
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard lock(mu_);
    return waiting_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int passes_ = 0;
  int waiting_ = 0;
};

class PrefetchTest : public RuntimeTest {
 protected:
  // A client whose queue "pf" has `workers` workers, running "noop" and "gate" jobs; no
  // maintenance, and a stale_after no test waits for: nothing here is rescued. One claim
  // connection: the tests count on the workers meeting the jobs in claim order (all fast
  // jobs before the first gate job). With two, a later batch (gate jobs) could reach the
  // workers before an earlier one still in flight, leaving fast jobs among the prefetched
  // ones (seen in CI: 85 of 248), which the counts below do not expect.
  std::unique_ptr<Client> client(Gate& gate, int workers, int max_prefetch) {
    ClientOptions o = options();
    o.maintenance = false;
    o.stale_after = std::chrono::hours(1);
    auto c = std::make_unique<Client>(o);
    c->register_worker("noop", [](JobContext&) { return JobResult::completed(); });
    c->register_worker("gate", [&gate](JobContext& j) { return gate.wait(j); });
    QueueConfig q = queue("pf", workers);
    q.max_prefetch = max_prefetch;
    q.claimers = 1;
    c->add_queue(q);
    return c;
  }

  // Fast jobs first, so the dispatcher learns a high pace, then gate jobs behind them
  // (one shard: claimed in this order): the workers block on the first gate jobs while
  // the dispatcher has more of them claimed ahead.
  void seed(int fast, int gated) {
    set_shards("pf", 1);
    enqueue("pf", fast, "noop");
    enqueue("pf", gated, "gate");
    // What autovacuum would do soon: without statistics every claim plans for an empty
    // table and scans.
    conn().exec("ANALYZE ready_entries");
  }

  // The client's stats once its dispatcher has stopped claiming (the workers are all
  // blocked and it holds what it wants ahead): nothing claimed for 300 ms, and some
  // jobs prefetched.
  ClientStats settled(const Client& c) {
    ClientStats last = c.stats();
    const bool ok = eventually(
        [&] {
          std::this_thread::sleep_for(milliseconds(300));
          const auto now = c.stats();
          const bool same = now.claimed == last.claimed && now.prefetched > 0;
          last = now;
          return same;
        },
        seconds(10));
    EXPECT_TRUE(ok) << "claimed " << last.claimed << ", prefetched " << last.prefetched;
    return last;
  }

  // attempt_outcomes expands closures: plan it with real statistics.
  void analyze() { conn().exec("ANALYZE ready_entries, claim_batches, claim_closures"); }

  static double prefetched_gauge() {
    return metrics::engine().jobs_prefetched.with({"pf"}).value();
  }
};

TEST_F(PrefetchTest, AStoppedClientHandsBackPrefetchedJobsForAnImmediateReclaim) {
  constexpr int kWorkers = 4, kFast = 5000, kGated = 400;
  seed(kFast, kGated);
  Gate gate;
  auto first = client(gate, kWorkers, 256);
  first->start();
  ASSERT_TRUE(eventually([&] { return gate.waiting() == kWorkers; }, seconds(60)))
      << "completed " << first->stats().completed;
  // The workers are blocked; what the dispatcher claimed beyond them waits, counted.
  const auto before = settled(*first);
  EXPECT_LE(before.prefetched, 256);
  EXPECT_EQ(before.running, kWorkers);
  EXPECT_EQ(prefetched_gauge(), before.prefetched);
  // Their attempts are open, not available to anyone else.
  EXPECT_EQ(count("SELECT available FROM queue_counts_exact('pf')"),
            kGated - kWorkers - before.prefetched);

  // stop() hands the prefetched jobs back before it waits for the running handlers, so
  // they are claimable while the gate is still shut.
  std::thread stopper([&] { first->stop(); });
  const bool handed_back =
      eventually([&] { return first->stats().released > 0; }, seconds(10), milliseconds(5));
  const auto available = count("SELECT available FROM queue_counts_exact('pf')");
  gate.open();
  stopper.join();
  ASSERT_TRUE(handed_back);
  const auto after = first->stats();
  EXPECT_EQ(after.released, static_cast<std::uint64_t>(before.prefetched));
  EXPECT_EQ(after.prefetched, 0);
  EXPECT_EQ(available, kGated - kWorkers);
  EXPECT_EQ(after.claimed, after.completed + after.released);
  EXPECT_EQ(prefetched_gauge(), 0);

  // Another claimer takes them at once — no rescue, no promotion round — as first
  // attempts: a hand-back does not consume the attempt.
  QueueStorage::ClaimOptions co;
  co.max_batch = kGated;
  const auto reclaimed = storage::consumer(*store_).claim(conn(), "pf", co);
  EXPECT_EQ(static_cast<std::int64_t>(reclaimed.size()), kGated - kWorkers);
  for (const auto& e : reclaimed) {
    EXPECT_EQ(e.kind, "gate");
    EXPECT_EQ(e.attempt, 1) << "job " << e.job_id;
  }
  // The hand-back is in each job's attempt history.
  analyze();
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'snoozed' "
                  "AND error LIKE 'released unstarted%'"),
            before.prefetched);
  EXPECT_EQ(terminal(), kFast + kWorkers);
}

TEST_F(PrefetchTest, NoPrefetchClaimsOnlyForFreeWorkers) {
  constexpr int kWorkers = 4, kFast = 5000, kGated = 100, kSteps = 3;
  seed(kFast, kGated);
  Gate gate;
  auto c = client(gate, kWorkers, 0);
  c->start();
  ASSERT_TRUE(eventually([&] { return gate.waiting() == kWorkers; }, seconds(60)));
  // With every worker blocked, each gate job let through frees one worker, and the next
  // gate job reaches it only through a claim: the dispatcher has claimed for that worker,
  // and for it alone.
  for (int step = 1; step <= kSteps; ++step) {
    gate.let_through(1);
    ASSERT_TRUE(eventually([&] { return gate.waiting() == kWorkers + step; }, seconds(30)))
        << "step " << step;
    const auto s = c->stats();
    EXPECT_EQ(s.prefetched, 0) << "step " << step;
    EXPECT_EQ(s.claimed, static_cast<std::uint64_t>(kFast + kWorkers + step)) << "step " << step;
  }
  EXPECT_EQ(count("SELECT available FROM queue_counts_exact('pf')"), kGated - kWorkers - kSteps);
  // No claim, from the fast jobs' pace on, brought more rows than there are workers (each
  // claim is one claim batch).
  EXPECT_LE(count("SELECT max(n_items) FROM claim_batches WHERE queue_id = queue_id_of('pf')"),
            kWorkers);
  gate.open();
  ASSERT_TRUE(eventually([&] { return c->stats().completed == kFast + kGated; }, seconds(60)));
  c->stop();
  EXPECT_EQ(c->stats().released, 0U);
}

TEST_F(PrefetchTest, PrefetchedJobsAreHeartbeatedAndACancelledOneNeverStarts) {
  constexpr int kWorkers = 2, kFast = 5000, kGated = 300;
  seed(kFast, kGated);
  Gate gate;
  auto c = client(gate, kWorkers, 128);
  c->start();
  ASSERT_TRUE(eventually([&] { return gate.waiting() == kWorkers; }, seconds(60)));
  const auto before = settled(*c);
  // The heartbeat (every 200 ms here) materialises a lease for every open attempt,
  // prefetched ones included.
  const auto open =
      count("SELECT count(*) FROM open_attempts() WHERE queue_id = queue_id_of('pf')");
  EXPECT_EQ(open, kWorkers + before.prefetched);
  ASSERT_TRUE(eventually(
      [&] {
        return count("SELECT count(*) FROM leases WHERE queue_id = queue_id_of('pf')") == open;
      },
      seconds(5)));
  // Cancel the last prefetched job: it must never start (gate.waiting() would count it).
  const auto victim = count(
      "SELECT job_id FROM open_attempts() WHERE queue_id = queue_id_of('pf') ORDER BY job_id DESC "
      "LIMIT 1");
  auto pc = Connection::connect(database_url());
  ASSERT_EQ(Admin(schema_).cancel_job(pc, victim), "running");
  // The stop reaches the prefetched job by the 'awa:cancel' notification at once, or by
  // the next heartbeat (every 200 ms) at the latest.
  std::this_thread::sleep_for(milliseconds(1500));
  gate.open();
  ASSERT_TRUE(eventually([&] { return c->stats().completed == kFast + kGated - 1; }, seconds(60)));
  c->stop();
  EXPECT_EQ(gate.waiting(), kGated - 1);
  analyze();
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'cancelled'"), 1);
}

}  // namespace
}  // namespace awa::testing
