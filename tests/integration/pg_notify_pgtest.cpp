#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "pg/connection.hpp"
#include "support.hpp"

namespace awa::pg {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class NotifyTest : public testing::PgTest {};

TEST_F(NotifyTest, NotifyFromAnotherConnectionWakesTheListenerWithin100ms) {
  conn().listen("awa_wake");
  Connection sender = connect_new();
  std::promise<Clock::time_point> sent_at;
  std::future<Clock::time_point> sent = sent_at.get_future();
  std::thread notifier([&] {
    // The delay only makes the listener block first; the measurement does not rely on it.
    std::this_thread::sleep_for(milliseconds(200));
    const auto t = Clock::now();
    sender.exec("NOTIFY awa_wake, 'hello'");
    sent_at.set_value(t);
  });
  const auto n = conn().wait_notification(std::chrono::seconds(30));
  const auto woke = Clock::now();
  notifier.join();
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->channel, "awa_wake");
  EXPECT_EQ(n->payload, "hello");
  EXPECT_EQ(n->backend_pid, sender.backend_pid());
  const auto elapsed = woke - sent.get();
  EXPECT_LT(elapsed, milliseconds(100))
      << std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count() << " us";
}

TEST_F(NotifyTest, WaitWithoutNotifyReturnsNulloptAfterTheTimeout) {
  conn().listen("awa_quiet");
  const auto start = Clock::now();
  EXPECT_FALSE(conn().wait_notification(milliseconds(200)).has_value());
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(195));
  EXPECT_LT(elapsed, milliseconds(1000));
}

TEST_F(NotifyTest, NotificationReceivedDuringAQueryIsReturnedAtOnce) {
  conn().listen("awa_self");
  conn().exec("NOTIFY awa_self, 'x'");  // arrives with the reply to this statement
  const auto start = Clock::now();
  const auto n = conn().wait_notification(std::chrono::seconds(10));
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->payload, "x");
  EXPECT_LT(Clock::now() - start, milliseconds(100));
}

TEST_F(NotifyTest, UnlistenStopsDelivery) {
  conn().listen("Mixed Case");
  conn().unlisten("Mixed Case");
  Connection sender = connect_new();
  sender.exec("NOTIFY \"Mixed Case\"");
  EXPECT_FALSE(conn().wait_notification(milliseconds(100)).has_value());
}

}  // namespace
}  // namespace awa::pg
