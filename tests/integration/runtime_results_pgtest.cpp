// Job results: a handler's JobResult::completed(json) is stored with the job and shown by
// Admin::job and `awa job show`; a result that cannot be stored fails the attempt; the
// storage call refuses a result on anything but a success, before writing anything.
#include <atomic>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "cli_runner.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

using nlohmann::json;

TEST_F(RuntimeTest, AHandlersResultIsStoredWithTheJobAndShownByJobShow) {
  Client client(options());
  client.register_worker("sum", [](JobContext& job) {
    const int a = job.args().at("a").get<int>();
    if (a % 2 == 0) return JobResult::completed();  // no result: the bare success
    return JobResult::completed(json{{"total", a + job.args().at("b").get<int>()}});
  });
  client.add_queue(queue("results", 4));
  std::vector<JobId> ids;
  for (int a = 1; a <= 6; ++a)
    ids.push_back(enqueue("results", 1, "sum", {{"a", a}, {"b", 10}})[0]);
  client.start();
  ASSERT_TRUE(eventually([&] { return client.stats().completed == 6; }, seconds(30)))
      << "completed " << client.stats().completed;
  client.stop();

  const Admin admin(schema_);
  auto conn = Connection::connect(database_url());
  for (int a = 1; a <= 6; ++a) {
    const auto d = admin.job(conn, ids[static_cast<std::size_t>(a - 1)]);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->summary.state, "completed");
    if (a % 2 == 0) {
      EXPECT_FALSE(d->result_json.has_value()) << *d->result_json;
    } else {
      ASSERT_TRUE(d->result_json.has_value()) << "job " << a;
      EXPECT_EQ(json::parse(*d->result_json), (json{{"total", a + 10}}));
    }
  }
  EXPECT_EQ(terminal("state = 'completed'"), 6);

  const auto shown = run_cli(fmt::format("--schema {} job show {} --json", schema_, ids[0]));
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_EQ(json::parse(shown.output).at("result"), (json{{"total", 11}}));
  const auto text = run_cli(fmt::format("--schema {} job show {}", schema_, ids[2]));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("result       {\"total\": 13}"), std::string::npos) << text.output;
}

TEST_F(RuntimeTest, AResultThatCannotBeStoredFailsTheAttemptWithTheReason) {
  Client client(options());
  client.register_worker("big", [](JobContext&) {
    return JobResult::completed(json{{"blob", std::string(kMaxArgsBytes, 'x')}});
  });
  client.register_worker("nul", [](JobContext&) {
    return JobResult::completed(json{{"s", std::string("a\0b", 3)}});
  });
  client.add_queue(queue("results", 2));
  const auto big = enqueue("results", 1, "big", json::object(), 1)[0];
  const auto nul = enqueue("results", 1, "nul", json::object(), 1)[0];
  client.start();
  ASSERT_TRUE(eventually([&] { return terminal("state = 'failed'") == 2; }, seconds(30)));
  client.stop();

  const Admin admin(schema_);
  auto conn = Connection::connect(database_url());
  const auto b = admin.job(conn, big);
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->errors.size(), 1U);
  EXPECT_NE(b->errors[0].error.find(fmt::format("the job's result is {} bytes of JSON; the limit "
                                                "is {}",
                                                kMaxArgsBytes + 11, kMaxArgsBytes)),
            std::string::npos)
      << b->errors[0].error;
  EXPECT_FALSE(b->result_json.has_value());
  const auto n = admin.job(conn, nul);
  ASSERT_TRUE(n.has_value());
  ASSERT_EQ(n->errors.size(), 1U);
  EXPECT_NE(n->errors[0].error.find("\\u0000"), std::string::npos) << n->errors[0].error;
}

// The runtime side of JobContext::complete_in: the handler's transaction completes the job
// with its write and result, the runtime sends nothing after it (no stale completion), and
// a heartbeat or progress report between complete_in and the commit returns at once
// instead of waiting on the lock the handler's own transaction holds.
TEST_F(RuntimeTest, CompleteInCompletesTheJobWithTheHandlersWrite) {
  conn().exec("CREATE TABLE effects (job_id bigint NOT NULL)");
  Client client(options());
  const std::string url = database_url();
  const std::string table = schema_ + ".effects";
  std::atomic<int> callback_refused{0};
  client.register_worker("effect", [&](JobContext& job) {
    auto c = Connection::connect(url);
    Transaction tx(c);
    c.execute("INSERT INTO " + table + " (job_id) VALUES ($1)", {SqlParam(job.job_id())});
    job.complete_in(c, json{{"done", true}});
    job.heartbeat();
    job.set_progress(100, "committing");
    try {
      job.register_callback(std::chrono::minutes(1));
    } catch (const Error&) {
      callback_refused.fetch_add(1);
    }
    tx.commit();
    return JobResult::completed();
  });
  client.add_queue(queue("results", 2));
  const auto ids = enqueue("results", 3, "effect");
  client.start();
  ASSERT_TRUE(eventually([&] { return terminal("state = 'completed'") == 3; }, seconds(30)));
  client.stop();
  EXPECT_EQ(client.stats().completed, 3U);
  EXPECT_EQ(client.stats().stale_completions, 0U);
  EXPECT_EQ(callback_refused.load(), 3);
  EXPECT_EQ(count("SELECT count(*) FROM effects"), 3);
  EXPECT_EQ(count("SELECT count(*) FROM done_entries WHERE result = '{\"done\": true}'"), 3);
}

TEST_F(RuntimeTest, TheStorageRefusesAResultOnAnythingButASuccessAndWritesNothing) {
  enqueue("results", 2, "any");
  QueueStorage::ClaimOptions o;
  o.max_batch = 2;
  const auto claimed = storage::consumer(*store_).claim(conn(), "results", o);
  ASSERT_EQ(claimed.size(), 2U);
  auto ok = Completion::of(claimed[0], Outcome::kCompleted);
  ok.result_json = R"({"n": 1})";
  auto bad = Completion::of(claimed[1], Outcome::kRetry, "boom");
  bad.result_json = R"({"n": 2})";
  const std::vector<Completion> both{ok, bad};
  try {
    storage::consumer(*store_).complete(conn(), both);
    FAIL() << "a result on a retry was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("job {}: only a completed job has a result (outcome retry)",
                          claimed[1].job_id));
  }
  auto not_json = ok;
  not_json.result_json = "{";
  EXPECT_THROW(storage::consumer(*store_).complete(conn(), std::vector<Completion>{not_json}),
               InvalidArgument);
  EXPECT_EQ(count("SELECT count(*) FROM claim_closures"), 0);

  bad.result_json.reset();
  const auto r = storage::consumer(*store_).complete(conn(), std::vector<Completion>{ok, bad});
  ASSERT_EQ(r.size(), 2U);
  EXPECT_EQ(r[0].state, "completed");
  EXPECT_EQ(r[1].state, "retried");
  EXPECT_EQ(count("SELECT count(*) FROM done_entries WHERE state = 'completed' AND "
                  "result = '{\"n\": 1}'::jsonb"),
            1);
}

}  // namespace
}  // namespace awa::testing
