// Wake-ups against a running Client: a producer whose NOTIFYs are coalesced away
// (storage/wake_coalescer.hpp) leaves no job waiting for the poll interval; the Client's
// one listener wakes every queue, and after losing its session wakes them all again.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

TEST_F(RuntimeTest, CoalescedWakeUpsLeaveNoJobToThePollInterval) {
  // The poll interval is far longer than the test may take: a job whose wake-up was
  // coalesced away and not covered by the dispatcher's quick re-claim would sit until
  // the poll and fail the deadline below.
  const std::string q = "wakes_" + schema_;
  set_shards(q, 4);
  pg::Connection listener = connect_new();
  listener.listen(notify_channel(q));

  ClientOptions o = options();
  o.max_workers = 8;
  Client client(o);
  std::atomic<int> handled{0};
  client.register_worker("noop", [&](JobContext&) {
    ++handled;
    return JobResult::completed();
  });
  QueueConfig qc = queue(q, 8);
  qc.poll_interval = std::chrono::minutes(10);
  client.add_queue(qc);
  client.start();

  // Bursts of single-job inserts from one producer, back to back, so that most of a
  // burst's NOTIFYs are coalesced away; then a pause with nothing sent. A job whose
  // NOTIFY was left out and that the dispatcher's quick re-claim does not pick up would
  // sit until the next burst's NOTIFY or the poll: each burst must be worked before the
  // next one is sent.
  constexpr int kBursts = 40;
  constexpr int kPerBurst = 5;
  pg::Connection producer = connect_new();
  int sent = 0;
  for (int b = 0; b < kBursts; ++b) {
    for (int i = 0; i < kPerBurst; ++i, ++sent) {
      storage::insert_many(*store_, producer,
                           std::vector<NewJob>{NewJob("noop", {{"n", sent}}, on_queue(q))});
    }
    ASSERT_TRUE(eventually([&] { return handled.load() == sent; }, seconds(10)))
        << "burst " << b << ": " << handled.load() << " of " << sent
        << " jobs worked: a job waits for the poll interval";
  }
  constexpr int kJobs = kBursts * kPerBurst;
  client.stop();
  EXPECT_EQ(handled.load(), kJobs);

  // At most one NOTIFY per insert call. How many fewer depends on timing: a call that
  // skipped its NOTIFY sends one after its commit if that took longer than the window,
  // which is every call on a slow build (the sanitizer CI run sent 200 for 200). The rule
  // itself is pinned with explicit clock values in tests/unit/wake_coalescer_test.cpp, and its
  // effect measured in docs/benchmarks.md.
  int notifications = 0;
  while (listener.wait_notification(milliseconds(0))) ++notifications;
  EXPECT_GT(notifications, 0);
  EXPECT_LE(notifications, kJobs) << "an insert call sent more than one NOTIFY";
}

// The Client's sessions that LISTEN: those whose last statement was a LISTEN (the
// listener runs nothing else; a claimer's last statement is a claim).
std::string listening_sessions_sql(const std::string& app) {
  return fmt::format(
      "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{}' AND query LIKE "
      "'LISTEN %'",
      app);
}

TEST_F(RuntimeTest, OneListenerWakesEveryQueueAndAllOfThemAfterItReconnects) {
  // Poll intervals far longer than the test: only notifications (or the listener's
  // reconnect) can get these jobs worked in time.
  ClientOptions o = options();
  o.application_name = fmt::format("awa_listen_{}", ::getpid());
  Client client(o);
  std::atomic<int> handled{0};
  client.register_worker("noop", [&](JobContext&) {
    ++handled;
    return JobResult::completed();
  });
  const std::vector<std::string> queues{"listen_a_" + schema_, "listen_b_" + schema_,
                                        "listen_c_" + schema_};
  for (const auto& q : queues) {
    QueueConfig qc = queue(q, 2);
    qc.poll_interval = std::chrono::minutes(10);
    client.add_queue(qc);
  }
  client.start();
  ASSERT_TRUE(eventually([&] { return count(listening_sessions_sql(o.application_name)) == 1; },
                         seconds(10)))
      << count(listening_sessions_sql(o.application_name)) << " sessions LISTEN";

  pg::Connection producer = connect_new();
  int sent = 0;
  for (int round = 0; round < 3; ++round) {
    for (const auto& q : queues) {
      storage::insert_many(*store_, producer,
                           std::vector<NewJob>{NewJob("noop", {{"n", sent}}, on_queue(q))});
      ++sent;
      ASSERT_TRUE(eventually([&] { return handled.load() == sent; }, seconds(10)))
          << "queue " << q << " round " << round << ": its job waits for the poll interval";
    }
  }
  // Three queues, and still one session on the server's listener list: each NOTIFY
  // costs the server one transaction in this Client, not one per queue.
  EXPECT_EQ(count(listening_sessions_sql(o.application_name)), 1);

  // The listener's session ends; jobs sent before it listens again get no notification
  // anyone hears. Its reconnect makes every queue claim once.
  const auto killed = count(fmt::format(
      "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name "
      "= '{}' AND query LIKE 'LISTEN %'",
      o.application_name));
  ASSERT_EQ(killed, 1);
  for (const auto& q : queues) {
    storage::insert_many(*store_, producer,
                         std::vector<NewJob>{NewJob("noop", {{"n", sent}}, on_queue(q))});
    ++sent;
  }
  EXPECT_TRUE(eventually([&] { return handled.load() == sent; }, seconds(15)))
      << handled.load() << " of " << sent << " jobs worked after the listener's session ended";
  EXPECT_TRUE(eventually([&] { return count(listening_sessions_sql(o.application_name)) == 1; },
                         seconds(10)));
  const auto t0 = Clock::now();
  client.stop();
  // Nothing waits for a poll interval to stop: the claimers' waits end on stop.
  EXPECT_LT(Clock::now() - t0, seconds(5));
}

}  // namespace
}  // namespace awa::testing
