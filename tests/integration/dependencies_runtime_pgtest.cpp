// Dependencies through the runtime: the order pipeline of docs/workflows.md (charge ->
// [email, invoice] -> archive) run by a Client, each job starting only after its parents
// completed and reading their results with JobContext::parent_results().
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

using nlohmann::json;

TEST_F(RuntimeTest, AnOrderPipelineRunsEachJobAfterItsParentsWithTheirResults) {
  constexpr int kOrders = 20;
  std::mutex mu;
  std::map<JobId, std::chrono::steady_clock::time_point> finished;  // guarded by mu
  std::map<JobId, std::map<JobId, json>> seen;                      // guarded by mu
  std::atomic<int> started_early{0};

  // Each handler records when it finished, checks that its parents had finished before
  // it started, and what parent_results() gave it.
  const auto handler = [&](const std::string& step) {
    return [&, step](JobContext& job) {
      const auto started = std::chrono::steady_clock::now();
      const auto results = job.parent_results();
      {
        std::lock_guard lock(mu);
        seen[job.job_id()] = results;
        for (const auto& [parent, _] : results) {
          const auto it = finished.find(parent);
          if (it == finished.end() || it->second > started) started_early.fetch_add(1);
        }
      }
      json out = {{"step", step}, {"order", job.args().at("order")}};
      std::lock_guard lock(mu);
      finished[job.job_id()] = std::chrono::steady_clock::now();
      return JobResult::completed(out);
    };
  };
  Client client(options());
  for (const char* step : {"charge", "email", "invoice", "archive"})
    client.register_worker(step, handler(step));
  client.add_queue(queue("orders", 8));
  client.start();

  struct Order {
    JobId charge, email, invoice, archive;
  };
  std::vector<Order> orders;
  for (int i = 0; i < kOrders; ++i) {
    std::vector<NewJob> tree;
    InsertOpts o = on_queue("orders");
    tree.emplace_back("charge", json{{"order", i}}, o);
    InsertOpts then = o;
    then.after_in_call = {0};
    tree.emplace_back("email", json{{"order", i}}, then);
    tree.emplace_back("invoice", json{{"order", i}}, then);
    InsertOpts last = o;
    last.after_in_call = {1, 2};
    tree.emplace_back("archive", json{{"order", i}}, last);
    const auto ids = client.insert_many(tree);
    orders.push_back({ids[0], ids[1], ids[2], ids[3]});
  }
  ASSERT_TRUE(eventually([&] { return terminal("state = 'completed'") == 4 * kOrders; },
                         std::chrono::seconds(60)))
      << "completed " << terminal("state = 'completed'");
  client.stop();

  EXPECT_EQ(started_early.load(), 0);
  std::lock_guard lock(mu);
  for (int i = 0; i < kOrders; ++i) {
    const auto& o = orders[static_cast<std::size_t>(i)];
    ASSERT_TRUE(finished.count(o.archive)) << "order " << i;
    EXPECT_LT(finished.at(o.charge), finished.at(o.email));
    EXPECT_LT(finished.at(o.email), finished.at(o.archive));
    EXPECT_LT(finished.at(o.invoice), finished.at(o.archive));
    EXPECT_TRUE(seen.at(o.charge).empty());
    EXPECT_EQ(seen.at(o.email),
              (std::map<JobId, json>{{o.charge, json{{"step", "charge"}, {"order", i}}}}));
    EXPECT_EQ(seen.at(o.archive),
              (std::map<JobId, json>{{o.email, json{{"step", "email"}, {"order", i}}},
                                     {o.invoice, json{{"step", "invoice"}, {"order", i}}}}));
  }
  const Admin admin(schema_);
  auto conn = Connection::connect(database_url());
  EXPECT_EQ(admin.queue_counts(conn, "orders").waiting, 0);
}

}  // namespace
}  // namespace awa::testing
