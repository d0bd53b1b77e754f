// External callbacks through the runtime (awa::Client): a handler that returns
// wait_for_callback frees its worker slot at once, and the job ends when its callback
// comes, from whichever connection (docs/scheduling.md, "External callbacks").
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

TEST_F(RuntimeTest, WaitingForACallbackFreesTheWorkerSlot) {
  ClientOptions o = options();
  // Short, so that the leader's rescue rounds below run when the parked attempts would be
  // stale if rescue counted them as running ones.
  o.stale_after = seconds(1);
  Client client(o);
  std::mutex mu;
  std::vector<std::string> callbacks;
  client.register_worker("await", [&](JobContext& job) {
    const auto id = job.register_callback(std::chrono::hours(1));
    // The same id on a second call, so a handler may register before it knows whether it
    // will wait.
    if (job.register_callback(std::chrono::hours(1)) != id)
      return JobResult::failed("a second register_callback gave another id", false);
    std::lock_guard lock(mu);
    callbacks.push_back(id);
    return JobResult::wait_for_callback(std::chrono::hours(1));
  });
  client.register_worker(
      "park_only", [](JobContext&) { return JobResult::wait_for_callback(std::chrono::hours(1)); });
  // One worker: a third job can start only if the first two gave their slot back.
  client.add_queue(queue("ext", 1));
  const auto ids = enqueue("ext", 3, "await");
  const auto unregistered = enqueue("ext", 1, "park_only").at(0);
  client.start();
  ASSERT_TRUE(eventually([&] { return client.stats().waiting >= 4; }, seconds(30)))
      << "waiting " << client.stats().waiting;
  EXPECT_EQ(client.stats().running, 0);

  const Admin admin(schema_);
  auto conn = Connection::connect(database_url());
  for (const JobId id : ids) EXPECT_EQ(admin.job(conn, id)->summary.state, "waiting_external");
  EXPECT_EQ(admin.job(conn, unregistered)->summary.state, "waiting_external");
  std::vector<std::string> got;
  {
    std::lock_guard lock(mu);
    got = callbacks;
  }
  ASSERT_EQ(got.size(), 3U);
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()).size(), 3U);
  // The runtime's heartbeats and its leader's rescue leave waiting attempts alone: the
  // client's leader (it records each finished round in runtime_instances) completes a
  // round that began after every claim was older than stale_after, by the server's clock.
  ASSERT_TRUE(eventually([&] { return client.stats().leader; }, seconds(10)));
  const auto tick_past = [&](const std::string& since) {
    return count("SELECT count(*) FROM runtime_instances WHERE is_leader AND leader_tick_at > " +
                 since) == 1;
  };
  const std::string stale_at = "(SELECT max(claimed_at) FROM claim_batches) + interval '1 s'";
  ASSERT_TRUE(eventually([&] { return tick_past(stale_at); }, seconds(10)));
  // That tick ended a round; the next tick ends one that began after it.
  const auto first =
      PgTest::conn().query("SELECT leader_tick_at::text FROM runtime_instances WHERE is_leader");
  ASSERT_EQ(first.rows(), 1);
  const auto after_first = "'" + first.get<std::string>(0, 0) + "'::timestamptz";
  ASSERT_TRUE(eventually([&] { return tick_past(after_first); }, seconds(10)));
  EXPECT_EQ(client.stats().rescued, 0U);
  for (const JobId id : ids) EXPECT_EQ(admin.job(conn, id)->summary.state, "waiting_external");

  EXPECT_EQ(admin.complete_external(conn, got[0]).state, "completed");
  EXPECT_EQ(admin.fail_external(conn, got[1], "declined", false).state, "failed");
  EXPECT_TRUE(admin.heartbeat_external(conn, got[2], std::chrono::hours(2)));
  EXPECT_TRUE(admin.complete_external(conn, got[0]).stale());
  client.stop();
  EXPECT_EQ(admin.job(conn, ids[0])->summary.state, "completed");
  EXPECT_EQ(admin.job(conn, ids[1])->summary.state, "failed");
  // stop() does not touch parked attempts: they wait in the database, not in the process.
  EXPECT_EQ(admin.job(conn, ids[2])->summary.state, "waiting_external");
  EXPECT_EQ(admin.complete_external(conn, got[2]).state, "completed");
  const auto s = client.stats();
  EXPECT_EQ(s.waiting, 4U);
  EXPECT_EQ(s.completed, 0U);  // the callbacks, not this client, completed them
  EXPECT_EQ(s.stale_completions, 0U);
}

TEST_F(RuntimeTest, AWaitForCallbackWithABadTimeoutFailsTheAttemptRetryably) {
  Client client(options());
  client.register_worker("bad", [](JobContext&) {
    return JobResult::wait_for_callback(std::chrono::milliseconds(0));
  });
  client.add_queue(queue("ext_bad", 1));
  const auto id = enqueue("ext_bad", 1, "bad", nlohmann::json::object(), 1).at(0);
  client.start();
  ASSERT_TRUE(eventually([&] { return client.stats().failed >= 1; }, seconds(30)));
  client.stop();
  const Admin admin(schema_);
  auto conn = Connection::connect(database_url());
  const auto d = admin.job(conn, id);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->summary.state, "failed");
  ASSERT_EQ(d->errors.size(), 1U);
  EXPECT_NE(d->errors[0].error.find("could not wait for a callback"), std::string::npos)
      << d->errors[0].error;
}

}  // namespace
}  // namespace awa::testing
