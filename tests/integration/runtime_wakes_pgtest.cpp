// Coalesced wake-ups (storage/wake_coalescer.hpp) against a running Client: producers
// send fewer NOTIFYs than jobs, and still no job waits for the poll interval.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
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

  // Three producers on one QueueStorage (one process), single-job inserts in bursts with
  // pauses around the coalescing window and the dispatcher's first quick retry, so that
  // some jobs land while the dispatcher is idle right after a coalesced wake-up.
  constexpr int kProducers = 3;
  constexpr int kPerProducer = 150;
  std::vector<std::thread> producers;
  std::atomic<int> failures{0};
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      try {
        pg::Connection c = connect_new();
        std::mt19937 rng(static_cast<unsigned>(p) + 7);
        std::uniform_int_distribution<int> pause_us(0, 8000);
        for (int i = 0; i < kPerProducer; ++i) {
          storage::insert_many(*store_, c,
                               std::vector<NewJob>{NewJob("noop", {{"i", i}}, on_queue(q))});
          if (i % 5 == 4) std::this_thread::sleep_for(std::chrono::microseconds(pause_us(rng)));
        }
      } catch (const std::exception& e) {
        ++failures;
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& t : producers) t.join();
  ASSERT_EQ(failures.load(), 0);
  constexpr int kJobs = kProducers * kPerProducer;
  EXPECT_TRUE(eventually([&] { return client.stats().completed >= kJobs; }, seconds(60)))
      << "completed " << client.stats().completed << " of " << kJobs
      << ": a job waited for the poll interval";
  client.stop();
  EXPECT_EQ(handled.load(), kJobs);

  int notifications = 0;
  while (listener.wait_notification(milliseconds(0))) ++notifications;
  EXPECT_GT(notifications, 0);
  EXPECT_LT(notifications, kJobs) << "every single-job insert sent its own NOTIFY";
}

}  // namespace
}  // namespace awa::testing
