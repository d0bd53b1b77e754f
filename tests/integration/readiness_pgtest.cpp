// Readiness (Client::readiness, GET /readyz of metrics::Server and of `awa work
// --health-addr`): ready only while the client works, unready with the reason while its
// database or its LISTEN session is out, ready again after recovery.
//
// An outage is made with a role of its own per test: the client's connections (or only
// its listener's, through the pooled mode's direct URL) log in as that role, and
// `ALTER ROLE ... NOLOGIN` plus pg_terminate_backend cuts exactly those sessions off and
// keeps them from coming back until `LOGIN` — what a stopped server or a broken network
// does to this client, without stopping the server the other tests share.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "awa/metrics.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

// `url` (postgresql://[user[:password]@]host...) logging in as `user` instead.
std::string with_user(const std::string& url, const std::string& user) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) throw std::runtime_error("not a URL: " + url);
  const auto host = scheme + 3;
  const auto at = url.find('@', host);
  const auto slash = url.find('/', host);
  const bool has_user = at != std::string::npos && (slash == std::string::npos || at < slash);
  return url.substr(0, host) + user + "@" + url.substr(has_user ? at + 1 : host);
}

bool mentions(const metrics::Readiness& r, const std::string& text) {
  return std::any_of(r.reasons.begin(), r.reasons.end(),
                     [&](const std::string& why) { return why.find(text) != std::string::npos; });
}

std::string reasons(const metrics::Readiness& r) { return nlohmann::json(r.reasons).dump(); }

class ReadinessTest : public RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    role_ = "awa_ready_" + schema_;
    // A member of the test's own role: the same rights on the schema, its own sessions.
    conn().exec(fmt::format("CREATE ROLE {} LOGIN IN ROLE {}", role_, current_user()));
  }
  void TearDown() override {
    conn().exec(fmt::format("ALTER ROLE {} NOLOGIN", role_));
    cut_off();
    conn().exec(fmt::format("DROP ROLE IF EXISTS {}", role_));
    RuntimeTest::TearDown();
  }

  std::string current_user() { return conn().exec("SELECT current_user").get<std::string>(0, 0); }
  std::string role_url() const { return with_user(database_url(), role_); }

  // The role's sessions end, and no new one starts until restore(). A session that was
  // authenticating when the role lost LOGIN may show up in pg_stat_activity only after a
  // first pass: the passes repeat until two in a row find none.
  void cut_off() {
    conn().exec(fmt::format("ALTER ROLE {} NOLOGIN", role_));
    const auto terminate = fmt::format(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = '{}'",
        role_);
    int quiet = 0;
    for (int pass = 0; pass < 50 && quiet < 2; ++pass) {
      quiet = count(terminate) == 0 ? quiet + 1 : 0;
      std::this_thread::sleep_for(milliseconds(100));
    }
  }
  void restore() { conn().exec(fmt::format("ALTER ROLE {} LOGIN", role_)); }

  // A client logging in as the role, with one queue polled every 200 ms; the fixture
  // migrated the schema (the role may not) and no maintenance runs.
  std::unique_ptr<Client> start_as_role(const QueueConfig& q) {
    ClientOptions o = options();
    o.database_url = role_url();
    o.migrate = false;
    o.maintenance = false;
    auto client = std::make_unique<Client>(o);
    client->register_worker("noop", [](JobContext&) { return JobResult::completed(); });
    client->add_queue(q);
    client->start();
    return client;
  }

  // Asks `client` until its answer satisfies `until` or `timeout` passes; the last answer.
  static metrics::Readiness await(const Client& client,
                                  const std::function<bool(const metrics::Readiness&)>& until,
                                  std::chrono::milliseconds timeout) {
    metrics::Readiness r;
    eventually(
        [&] {
          r = client.readiness();
          return until(r);
        },
        timeout);
    return r;
  }

  std::string role_;
};

// GET `path` on 127.0.0.1:port: the status (0 when nothing answered) and the body.
std::pair<int, std::string> get(int port, const std::string& path) {
  httplib::Client http("127.0.0.1", port);
  http.set_connection_timeout(5);
  http.set_read_timeout(10);
  const auto res = http.Get(path);
  if (!res) return {0, ""};
  return {res->status, res->body};
}

TEST_F(ReadinessTest, ReadyOnlyWhileTheClientWorks) {
  Client client(options());
  client.add_queue(queue("ready_" + schema_, 2));
  metrics::Server server("127.0.0.1", 0);
  server.set_readiness([&client] { return client.readiness(); });
  server.start();

  auto r = client.readiness();
  EXPECT_FALSE(r.ready);
  EXPECT_TRUE(mentions(r, "has not started")) << reasons(r);
  auto [status, body] = get(server.port(), "/readyz");
  EXPECT_EQ(status, 503);
  const auto unready = nlohmann::json::parse(body);
  EXPECT_EQ(unready["ready"], false);
  ASSERT_TRUE(unready["reasons"].is_array());
  EXPECT_NE(unready["reasons"][0].get<std::string>().find("has not started"), std::string::npos)
      << body;
  EXPECT_EQ(get(server.port(), "/healthz"), std::make_pair(200, std::string("ok\n")));

  client.start();
  // The listener connects on its own thread: ready once it has.
  ASSERT_TRUE(eventually([&] { return client.readiness().ready; }, seconds(10)))
      << reasons(client.readiness());
  std::tie(status, body) = get(server.port(), "/readyz");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(nlohmann::json::parse(body),
            nlohmann::json({{"ready", true}, {"reasons", nlohmann::json::array()}}));

  client.stop();
  r = client.readiness();
  EXPECT_FALSE(r.ready);
  EXPECT_TRUE(mentions(r, "has stopped")) << reasons(r);
  EXPECT_EQ(get(server.port(), "/readyz").first, 503);
}

TEST_F(ReadinessTest, ADatabaseOutageMakesItUnreadyUntilTheDatabaseIsBack) {
  QueueConfig q = queue("outage_" + schema_, 2);
  q.poll_interval = milliseconds(200);
  const auto client = start_as_role(q);
  const auto ready = [](const metrics::Readiness& r) { return r.ready; };
  auto r = await(*client, ready, seconds(10));
  ASSERT_TRUE(r.ready) << reasons(r);

  cut_off();
  const auto down = [](const metrics::Readiness& now) {
    return mentions(now, "the database does not answer") &&
           mentions(now, "the listener is not connected") && mentions(now, "its claims fail");
  };
  r = await(*client, down, seconds(20));
  ASSERT_TRUE(down(r)) << reasons(r);
  EXPECT_FALSE(r.ready);

  restore();
  // The claimer's retry backs off while the outage lasts: its next claim may take a while.
  r = await(*client, ready, seconds(40));
  ASSERT_TRUE(r.ready) << reasons(r);
  // And it works again: a job enqueued now is done.
  enqueue(q.name, 1);
  EXPECT_TRUE(eventually([&] { return terminal() == 1; }, seconds(20)));
  client->stop();
}

TEST_F(ReadinessTest, FailingClaimsMakeItUnreadyWithTheQueuesName) {
  QueueConfig q = queue("denied_" + schema_, 2);
  q.poll_interval = milliseconds(200);
  const auto client = start_as_role(q);
  const auto ready = [](const metrics::Readiness& r) { return r.ready; };
  auto r = await(*client, ready, seconds(10));
  ASSERT_TRUE(r.ready) << reasons(r);

  // Without its membership's rights the role still connects, answers and listens, but its
  // claims are refused (42501). Its sessions start again, so that none keeps rights it
  // resolved before the change (a session's role memberships are cached).
  conn().exec(fmt::format("ALTER ROLE {} NOINHERIT", role_));
  count(fmt::format(
      "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = '{}'", role_));
  const auto refused = "queue " + q.name + ": its claims fail";
  // The listener and the pool reconnect at once: the state sought is the claims' reason alone.
  r = await(
      *client,
      [&](const metrics::Readiness& now) {
        return mentions(now, refused) && !mentions(now, "the database does not answer") &&
               !mentions(now, "the listener");
      },
      seconds(20));
  ASSERT_TRUE(mentions(r, refused)) << reasons(r);
  EXPECT_FALSE(r.ready);
  EXPECT_FALSE(mentions(r, "the database does not answer")) << reasons(r);
  EXPECT_FALSE(mentions(r, "the listener")) << reasons(r);

  conn().exec(fmt::format("ALTER ROLE {} INHERIT", role_));
  r = await(*client, ready, seconds(40));
  EXPECT_TRUE(r.ready) << reasons(r);
  client->stop();
}

// A claim that does not return reserves the room it claims for, so the queue shows no
// room; the claim in flight is what makes it late. Here it waits for a lock another
// session holds on the table every claim reads first.
TEST_F(ReadinessTest, AClaimThatDoesNotReturnMakesItUnreadyUntilItDoes) {
  QueueConfig q = queue("stuck_" + schema_, 2);
  q.poll_interval = milliseconds(200);
  Client client(options());
  client.register_worker("noop", [](JobContext&) { return JobResult::completed(); });
  client.add_queue(q);
  client.start();
  const auto ready = [](const metrics::Readiness& r) { return r.ready; };
  auto r = await(client, ready, seconds(10));
  ASSERT_TRUE(r.ready) << reasons(r);

  auto locker = connect_new();
  locker.exec("BEGIN");
  locker.exec(fmt::format("LOCK TABLE {}.queue_meta IN ACCESS EXCLUSIVE MODE", quoted_schema()));
  r = await(
      client, [](const metrics::Readiness& x) { return mentions(x, "a claim has not returned"); },
      seconds(20));
  locker.exec("ROLLBACK");
  ASSERT_FALSE(r.ready);
  EXPECT_TRUE(mentions(r, "queue " + q.name + ": a claim has not returned for ")) << reasons(r);
  EXPECT_FALSE(mentions(r, "database does not answer")) << reasons(r);

  r = await(client, ready, seconds(20));
  EXPECT_TRUE(r.ready) << reasons(r);
  enqueue(q.name, 1, "noop");
  EXPECT_TRUE(eventually([&] { return client.stats().completed == 1U; }, seconds(20)));
  client.stop();
}

TEST_F(ReadinessTest, AWorkerWhoseListenerIsCutOffAnswers503WithThatReason) {
  // `awa work --health-addr`: the pooled mode's direct URL carries only the LISTEN session
  // (no maintenance, so no leader lock on it), so cutting that role off breaks LISTEN alone.
  WorkerProcess worker(
      schema_, {"--queue", "listen_" + schema_, "--no-maintenance", "--no-migrate", "--pooled",
                "--direct-url", role_url(), "--health-addr", "127.0.0.1:0"});
  static const std::regex kHealth(R"(health on http://127\.0\.0\.1:(\d+)/healthz)");
  int port = 0;
  ASSERT_TRUE(eventually(
      [&] {
        std::smatch m;
        const auto log = worker.log();
        if (std::regex_search(log, m, kHealth)) port = std::stoi(m[1]);
        return port > 0;
      },
      seconds(30)));
  EXPECT_EQ(get(port, "/healthz"), std::make_pair(200, std::string("ok\n")));
  ASSERT_TRUE(eventually([&] { return get(port, "/readyz").first == 200; }, seconds(20)))
      << get(port, "/readyz").second;

  cut_off();
  std::pair<int, std::string> res;
  ASSERT_TRUE(eventually(
      [&] {
        res = get(port, "/readyz");
        return res.first == 503;
      },
      seconds(20)))
      << res.second;
  const auto body = nlohmann::json::parse(res.second);
  EXPECT_EQ(body["ready"], false);
  ASSERT_EQ(body["reasons"].size(), 1u) << res.second;
  EXPECT_NE(body["reasons"][0].get<std::string>().find("the listener is not connected"),
            std::string::npos)
      << res.second;
  EXPECT_EQ(get(port, "/healthz").first, 200) << "the process itself is alive";

  restore();
  EXPECT_TRUE(eventually(
      [&] {
        res = get(port, "/readyz");
        return res.first == 200;
      },
      seconds(30)))
      << res.second;
  EXPECT_EQ(worker.terminate(seconds(20)), 0);
}

}  // namespace
}  // namespace awa::testing
