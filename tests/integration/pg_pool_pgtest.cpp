#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <thread>

#include "awa/error.hpp"
#include "pg/pool.hpp"
#include "support.hpp"

namespace awa::pg {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class PoolTest : public testing::PgTest {
 protected:
  void terminate(int pid) {
    // The timeout variant waits until the backend is gone, so the next use fails for sure.
    const Result r = conn().query("SELECT pg_terminate_backend($1, 10000) AS done", pid);
    ASSERT_TRUE(r.get<bool>(0, "done"));
  }
};

TEST_F(PoolTest, AcquireBeyondMaxWaitsAndTimesOut) {
  Pool pool(testing::test_connect_options(), 2);
  Pool::Lease a = pool.acquire();
  Pool::Lease b = pool.acquire();
  EXPECT_EQ(pool.open_connections(), 2u);
  const auto start = Clock::now();
  EXPECT_THROW(pool.acquire(milliseconds(200)), ConnectionError);
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(190));
  EXPECT_LT(elapsed, milliseconds(2000));
  EXPECT_EQ(pool.open_connections(), 2u);
}

TEST_F(PoolTest, WaiterGetsTheConnectionReturnedByAnotherThread) {
  Pool pool(testing::test_connect_options(), 1);
  std::optional<Pool::Lease> held(pool.acquire());
  const int pid = (*held)->backend_pid();
  std::promise<void> waiting;
  auto got = std::async(std::launch::async, [&] {
    waiting.set_value();
    Pool::Lease l = pool.acquire(std::chrono::seconds(10));
    return l->backend_pid();
  });
  waiting.get_future().wait();
  held.reset();  // whether the waiter is already blocked or not, it must get this one
  EXPECT_EQ(got.get(), pid);
  EXPECT_EQ(pool.open_connections(), 1u);
}

TEST_F(PoolTest, RecoversAfterTheBackendOfALeaseIsTerminated) {
  Pool pool(testing::test_connect_options(), 1);
  int old_pid = 0;
  {
    Pool::Lease lease = pool.acquire();
    old_pid = lease->backend_pid();
    terminate(old_pid);
    try {
      lease->exec("SELECT 1");
      FAIL() << "a query on a terminated backend succeeded";
    } catch (const ConnectionError& e) {
      EXPECT_EQ(e.retry(), Retry::kRetryCall);
    }
    EXPECT_FALSE(lease->ok());
  }
  EXPECT_EQ(pool.open_connections(), 0u);  // the broken connection was closed
  Pool::Lease next = pool.acquire(std::chrono::seconds(5));
  EXPECT_NE(next->backend_pid(), old_pid);
  EXPECT_EQ(next->exec("SELECT 1 AS one").get<std::int32_t>(0, "one"), 1);
}

TEST_F(PoolTest, IdleConnectionWhoseBackendDiedIsReplacedOnAcquire) {
  Pool pool(testing::test_connect_options(), 1);
  int old_pid = 0;
  {
    Pool::Lease lease = pool.acquire();
    old_pid = lease->backend_pid();
  }
  terminate(old_pid);
  Pool::Lease next = pool.acquire(std::chrono::seconds(5));
  EXPECT_NE(next->backend_pid(), old_pid);
  EXPECT_EQ(next->exec("SELECT 1 AS one").get<std::int32_t>(0, "one"), 1);
}

TEST_F(PoolTest, ConnectionReturnedInsideATransactionIsRolledBack) {
  conn().exec("CREATE TABLE t (id int)");
  const std::string table = quoted_schema() + ".t";
  Pool pool(testing::test_connect_options(), 1);
  int pid = 0;
  {
    Pool::Lease lease = pool.acquire();
    pid = lease->backend_pid();
    lease->exec("BEGIN");
    lease->exec("INSERT INTO " + table + " VALUES (1)");
  }
  EXPECT_EQ(pool.idle_connections(), 1u);
  Pool::Lease again = pool.acquire();
  EXPECT_EQ(again->backend_pid(), pid);  // kept, not replaced
  EXPECT_TRUE(again->idle());
  EXPECT_EQ(again->exec("SELECT count(*) FROM " + table).get<std::int64_t>(0, 0), 0);
}

TEST_F(PoolTest, ConnectFailureFreesTheSlot) {
  ConnectOptions bad;
  bad.url = "postgresql://awa@127.0.0.1:1/awa";
  Pool pool(bad, 1);
  EXPECT_THROW(pool.acquire(milliseconds(100)), ConnectionError);
  EXPECT_EQ(pool.open_connections(), 0u);
  EXPECT_THROW(pool.acquire(milliseconds(100)), ConnectionError);
}

}  // namespace
}  // namespace awa::pg
