// Completions never wait behind handlers for a pool connection. Handlers take pool
// connections for their calls (set_progress, callbacks, Client::insert) and may hold or
// wait for every one of them; the completion batcher's writers have connections of their
// own. Before, they shared the pool: with it exhausted, no completion was written and the
// finished jobs' attempts stayed open until the handlers let go (or rescue came).
#include <atomic>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime_support.hpp"

namespace awa::testing {
namespace {

class RuntimePoolTest : public RuntimeTest {};

TEST_F(RuntimePoolTest, CompletionsAreWrittenWhileAHandlerHoldsThePoolsOnlyConnection) {
  // The test holds queue "held"'s lane from its insert to its commit (placed at the
  // statement, not at commit), so an insert into that lane waits for the commit. The queue
  // exists before (a committed job), so the wait is on the lane's lock, not on the
  // transaction that would give a new queue its id.
  enqueue("held", 1, "seed");
  pg::Connection holder = connect_new();
  pg::Transaction tx(holder);
  holder.exec("SET CONSTRAINTS place_staged_jobs IMMEDIATE");
  storage::insert_many(
      *store_, holder,
      std::vector<NewJob>{NewJob("seed", nlohmann::json::object(), on_queue("held"))});

  ClientOptions o = options();
  o.pool_size = 1;
  o.completion_writers = 1;
  Client client(o);
  std::atomic<bool> blocker_started{false};
  client.register_worker("blocker", [&](JobContext&) {
    blocker_started = true;
    // Takes the pool's only connection and waits on the held lane with it.
    client.insert(NewJob("after", nlohmann::json::object(), on_queue("held")));
    return JobResult::completed();
  });
  client.register_worker("noop", [](JobContext&) { return JobResult::completed(); });
  client.add_queue(queue("work", 4));
  enqueue("work", 1, "blocker");
  client.start();

  // The blocker's pool connection waits for the lane lock (seen in pg_stat_activity).
  ASSERT_TRUE(eventually(
      [&] {
        return blocker_started.load() &&
               count(
                   "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                   "'awa_tests_runtime' AND wait_event_type = 'Lock' AND "
                   "wait_event = 'advisory'") == 1;
      },
      seconds(20)))
      << "the blocker's insert never waited on the held lane";

  enqueue("work", 20, "noop");
  EXPECT_TRUE(eventually([&] { return terminal("state = 'completed'") == 20; }, seconds(15)))
      << terminal("state = 'completed'")
      << " of 20 completions written while a handler held the pool's only connection";

  tx.commit();
  EXPECT_TRUE(eventually([&] { return terminal("state = 'completed'") == 21; }, seconds(15)))
      << terminal("state = 'completed'") << " of 21 after the lane was released";
  client.stop();
  EXPECT_EQ(count("SELECT count(*) FROM open_attempts()"), 0);
}

}  // namespace
}  // namespace awa::testing
