// The per-lane gauges on /metrics (awa_queue_available, awa_queue_lag) are refreshed by
// a running Client's maintenance leader (issue 12), at a bounded cost: these tests never
// call refresh_queue_gauges themselves.
#include <unistd.h>

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/metrics.hpp"
#include "metrics_scrape.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

class QueueGaugesTest : public RuntimeTest {
 protected:
  void SetUpSchema() override {
    RuntimeTest::SetUpSchema();
    // The registry is process-wide and its labels carry no schema: a queue name of this
    // test's own.
    queue_ = "g" + schema_;
  }

  static double available(const std::string& q, int shard, int priority = 2) {
    return metrics::engine()
        .queue_available.with({q, std::to_string(priority), std::to_string(shard)})
        .value();
  }
  static double lag(const std::string& q, int shard, int priority = 2) {
    return metrics::engine()
        .queue_lag.with({q, std::to_string(priority), std::to_string(shard)})
        .value();
  }
  double total_available(int shards) const {
    double sum = 0;
    for (int s = 0; s < shards; ++s) sum += available(queue_, s);
    return sum;
  }

  std::string queue_;
};

TEST_F(QueueGaugesTest, TheLeaderRefreshesEveryQueuesGauges) {
  constexpr int kShards = 4;
  set_shards(queue_, kShards);
  auto o = options();
  o.queue_gauges_interval = milliseconds(100);
  Client client(o);
  // The client works another queue: the leader refreshes every queue of the schema, not
  // only its own.
  client.add_queue(queue("elsewhere", 1));
  client.start();

  // 4 batches of 10: the rotor puts each on its own shard.
  for (int i = 0; i < kShards; ++i) enqueue(queue_, 10);
  ASSERT_TRUE(eventually([&] { return total_available(kShards) == 40.0; }, seconds(10)))
      << total_available(kShards);
  for (int s = 0; s < kShards; ++s) {
    EXPECT_EQ(available(queue_, s), 10.0) << "shard " << s;
    EXPECT_EQ(lag(queue_, s), 10.0) << "shard " << s;
  }

  // Drained: back to 0 on the next refresh.
  int claimed = 0;
  while (claimed < 40) {
    const auto got = storage::consumer(*store_).claim(conn(), queue_);
    ASSERT_FALSE(got.empty());
    claimed += static_cast<int>(got.size());
  }
  ASSERT_TRUE(eventually([&] { return total_available(kShards) == 0.0; }, seconds(10)));
  for (int s = 0; s < kShards; ++s) EXPECT_EQ(lag(queue_, s), 0.0) << "shard " << s;

  // A stopped leader leaves no stale value behind.
  enqueue(queue_, 5);
  ASSERT_TRUE(eventually([&] { return total_available(kShards) == 5.0; }, seconds(10)));
  client.stop();
  EXPECT_EQ(total_available(kShards), 0.0);
}

TEST_F(QueueGaugesTest, OnlyTheLeaderRefreshes) {
  // An `awa work` process leads and refreshes the gauges (its /metrics shows this queue's
  // jobs); a Client in this process runs maintenance as well but does not lead, and
  // however many rounds it asks for the leadership, its own gauges of the queue stay
  // unset: a sum over the processes' /metrics counts each lane once.
  enqueue(queue_, 3);
  WorkerProcess leader(schema_, {"--queue", "elsewhere", "--maintenance-ms", "100", "--gauges-ms",
                                 "100", "--metrics-addr", "127.0.0.1:0"});
  ASSERT_TRUE(eventually([&] { return leader_os_pid() == leader.pid(); }, seconds(30)))
      << "leader " << leader_os_pid();
  int port = 0;
  ASSERT_TRUE(eventually(
      [&] {
        port = logged_metrics_port(leader.log());
        return port > 0;
      },
      seconds(30)));
  const auto series = fmt::format(
      R"(awa_queue_available{{queue="{}",priority="2",awa_enqueue_shard="0"}})", queue_);
  ASSERT_TRUE(eventually([&] { return scrape(port, series) == 3.0; }, seconds(30)))
      << series << ": " << scrape(port, series).value_or(-1);

  auto o = options();
  o.queue_gauges_interval = milliseconds(100);
  // Names its connections, so that its leader-lock asks can be told apart.
  o.application_name = "awa_gauges_" + std::to_string(::getpid());
  Client client(o);
  client.add_queue(queue("elsewhere", 1));
  client.start();
  // Each maintenance round (every 100 ms) begins with a pg_try_advisory_lock statement,
  // which pg_stat_activity shows with its start time until the next one.
  std::set<std::string> asks;
  ASSERT_TRUE(eventually(
      [&] {
        const auto r = conn().query(
            "SELECT query_start::text FROM pg_stat_activity WHERE application_name = $1 "
            "AND query LIKE '%pg_try_advisory_lock%'",
            o.application_name);
        for (int i = 0; i < r.rows(); ++i) asks.insert(r.get<std::string>(i, 0));
        return asks.size() >= 4;
      },
      seconds(30), milliseconds(10)))
      << asks.size() << " leader-lock asks seen";
  EXPECT_FALSE(client.stats().leader);
  EXPECT_EQ(available(queue_, 0), 0.0);
  EXPECT_EQ(lag(queue_, 0), 0.0);
  client.stop();
  EXPECT_EQ(leader_os_pid(), leader.pid());
}

TEST_F(QueueGaugesTest, ACappedCountReportsTheLagBeyondTheCap) {
  // The leader's refresh counts at most `cap` rows per lane: below it the count is exact,
  // at it the lane reports its lag (here one above the exact count: a cancelled row).
  enqueue(queue_, 30);
  const auto id = count("SELECT min(job_id) FROM ready_entries");
  auto admin_conn = Connection::connect(database_url());
  ASSERT_EQ(Admin(schema_).cancel_job(admin_conn, id), "available");
  const auto row = [&](const std::string& cap) {
    const auto r = conn().query(
        "SELECT lag, available FROM queue_lane_gauges(ARRAY[$1], " + cap + ")", queue_);
    EXPECT_EQ(r.rows(), 1);
    return std::pair{r.get<std::int64_t>(0, 0), r.get<std::int64_t>(0, 1)};
  };
  EXPECT_EQ(row("NULL"), (std::pair<std::int64_t, std::int64_t>{30, 29}));
  EXPECT_EQ(row("100"), (std::pair<std::int64_t, std::int64_t>{30, 29}));
  EXPECT_EQ(row("29"), (std::pair<std::int64_t, std::int64_t>{30, 30}));
  EXPECT_EQ(row("10"), (std::pair<std::int64_t, std::int64_t>{30, 30}));
  // Every queue when none is named; none for an empty list.
  enqueue("other", 2);
  EXPECT_EQ(count("SELECT count(*) FROM queue_lane_gauges()"), 2);
  EXPECT_EQ(count("SELECT count(*) FROM queue_lane_gauges('{}')"), 0);
}

TEST_F(QueueGaugesTest, TheLeaderSetsTheWaitingGaugeOfAQueueWithoutLanes) {
  const std::string children = queue_ + "w";
  const auto waiting = [&] { return metrics::engine().queue_waiting.with({children}).value(); };
  auto o = options();
  o.queue_gauges_interval = milliseconds(100);
  Client client(o);
  client.add_queue(queue("elsewhere", 1));
  client.start();

  const JobId parent = enqueue(queue_, 1).at(0);
  InsertOpts after = on_queue(children);
  after.after = {parent};
  std::vector<NewJob> jobs(3, NewJob("noop", nlohmann::json::object(), after));
  storage::insert_many(*store_, conn(), jobs);
  ASSERT_TRUE(eventually([&] { return waiting() == 3.0; }, seconds(10))) << waiting();

  const auto got = storage::consumer(*store_).claim(conn(), queue_);
  ASSERT_EQ(got.size(), 1U);
  storage::consumer(*store_).complete(
      conn(), std::vector<Completion>{Completion::of(got[0], Outcome::kCompleted)});
  ASSERT_TRUE(eventually([&] { return waiting() == 0.0; }, seconds(10))) << waiting();
  ASSERT_TRUE(eventually([&] { return available(children, 0) == 3.0; }, seconds(10)));

  // Waiting again, then the leader stops: no stale value left behind.
  const JobId parent2 = enqueue(queue_, 1).at(0);
  after.after = {parent2};
  storage::insert_many(*store_, conn(), std::vector<NewJob>{NewJob("noop", {}, after)});
  ASSERT_TRUE(eventually([&] { return waiting() == 1.0; }, seconds(10))) << waiting();
  client.stop();
  EXPECT_EQ(waiting(), 0.0);
}

}  // namespace
}  // namespace awa::testing
