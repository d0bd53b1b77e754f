// Connections through PgBouncer in transaction pool mode (issue 15, "Pooler mode";
// docs/deployment.md): what breaks there — named prepared statements, session state,
// LISTEN — shown on the real pooler, and what the pooled mode does instead. The runtime
// end to end through the pooler is in pooler_runtime_pgtest.cpp.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "pg/pipeline.hpp"
#include "pooler_support.hpp"

namespace awa::testing {
namespace {

constexpr std::string_view kStatement = "SELECT $1::int + 1";

// A statement text (hence exec_cached name) of this test only: a named statement outlives
// its client on the pooler's shared server session.
std::string own_statement(const std::string& schema) {
  return std::string(kStatement) + " -- " + schema;
}

// Why pooled mode exists (regression guard for the test set-up itself): two ordinary
// connections sharing one server session through the pooler collide on exec_cached's
// named statement. If this ever passes, the pooler is not in transaction mode and the
// other tests prove nothing.
TEST_F(PoolerTest, NamedPreparedStatementsCollideThroughTransactionPooling) {
  const auto url = single_session_url(pooled_url_);
  auto a = pg::Connection::connect(pooled_connect(url, false));
  auto b = pg::Connection::connect(pooled_connect(url, false));
  const auto sql = own_statement(schema_);
  EXPECT_EQ(a.exec_cached(sql, pg::make_params(1)).get<int>(0, 0), 2);
  // b's Parse of the same name lands on the session a prepared it on.
  try {
    b.exec_cached(sql, pg::make_params(1));
    ADD_FAILURE() << "a second named prepare on the shared session succeeded: not transaction "
                     "pooling?";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(e.sqlstate(), "42P05") << e.what();  // duplicate_prepared_statement
  }
  // The statement stays on the shared session after both clients are gone: remove it.
  b.exec("DEALLOCATE " + pg::Connection::cached_statement_name(sql));
}

TEST_F(PoolerTest, PooledConnectionsPrepareNothingOnTheServer) {
  const auto url = single_session_url(pooled_url_);
  auto a = pg::Connection::connect(pooled_connect(url));
  auto b = pg::Connection::connect(pooled_connect(url));
  const auto sql = own_statement(schema_);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(a.exec_cached(sql, pg::make_params(i)).get<int>(0, 0), i + 1);
    EXPECT_EQ(b.exec_cached(sql, pg::make_params(i)).get<int>(0, 0), i + 1);
    const auto name = a.ensure_prepared(sql);
    EXPECT_EQ(b.exec_prepared(b.ensure_prepared(sql), pg::make_params(i)).get<int>(0, 0), i + 1);
    EXPECT_EQ(a.exec_prepared(name, pg::make_params(i)).get<int>(0, 0), i + 1);
  }
  // Pipelines send their cached statements unnamed too.
  auto p = a.pipeline();
  p.add_cached(sql, pg::make_params(7));
  p.sync();
  p.add_cached(sql, pg::make_params(8));
  p.sync();
  const auto results = p.run();
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(results[0].get<int>(0, 0), 8);
  EXPECT_EQ(results[1].get<int>(0, 0), 9);
  EXPECT_EQ(a.query("SELECT count(*) FROM pg_prepared_statements WHERE name = $1",
                    pg::Connection::cached_statement_name(sql))
                .get<std::int64_t>(0, 0),
            0);
}

// Producers and operators on the public awa::Connection (ConnectionOptions::pooled): two
// connections sharing one server session take turns at every enqueue form and at Admin
// calls. Without the option the second connection's first insert would Parse a named
// statement the first already left on the shared session (42P05, as above).
TEST_F(PoolerTest, PublicConnectionsEnqueueAndAdministerThroughThePooler) {
  ConnectionOptions pooled;
  pooled.pooled = true;
  const auto url = single_session_url(pooled_url_);
  auto a = Connection::connect(url, pooled);
  auto b = Connection::connect(url, pooled);
  const Admin admin(schema_);
  InsertOpts opts;
  opts.queue = "pq";
  const auto jobs = [&](int n) {
    std::vector<NewJob> out;
    for (int i = 0; i < n; ++i) out.emplace_back("noop", nlohmann::json{{"i", i}}, opts);
    return out;
  };
  InsertOpts unique = opts;
  unique.unique = UniqueOpts{};
  std::int64_t expected = 0;
  for (int round = 0; round < 3; ++round) {
    Connection& first = round % 2 == 0 ? a : b;
    Connection& second = round % 2 == 0 ? b : a;
    {
      Transaction tx(first);
      store_->insert(first, NewJob("noop", nlohmann::json{{"round", round}}, opts));
      tx.commit();
    }
    {
      Transaction tx(second);
      EXPECT_EQ(store_->insert_many(second, jobs(10)).size(), 10U);
      tx.commit();
    }
    {
      Transaction tx(first);
      EXPECT_EQ(store_->insert_many_copy(first, jobs(10)).size(), 10U);
      tx.commit();
    }
    const auto u = store_->insert_result(second, NewJob("noop", nlohmann::json{{"u", 1}}, unique));
    EXPECT_EQ(u.duplicate, round > 0);
    expected += 21 + (round == 0 ? 1 : 0);
    EXPECT_EQ(admin.queue_counts(first, "pq").available, expected);
    admin.pause_queue(second, "pq");
    EXPECT_TRUE(admin.queue_summary(first, "pq").settings.paused);
    admin.resume_queue(first, "pq");
    admin.set_enqueue_shards(second, "pq", 2 + round);
    EXPECT_EQ(admin.queue_summary(first, "pq").settings.enqueue_shards, 2 + round);
  }
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('pq')"),
            expected);
}

TEST_F(PoolerTest, PooledConnectionsKeepUtcWhileAnotherClientChangesTheZone) {
  // PgBouncer tracks TimeZone, DateStyle and client_encoding per client and sets them on
  // the server session before each of our transactions; Result's timestamp parsing needs
  // UTC and ISO whatever the other clients of the session set.
  const auto url = single_session_url(pooled_url_);
  auto ours = pg::Connection::connect(pooled_connect(url));
  auto other = pg::Connection::connect(pooled_connect(url));
  other.exec("SET TimeZone = 'America/New_York'; SET DateStyle = 'SQL, DMY'");
  for (int i = 0; i < 20; ++i) {
    const auto r = ours.exec(
        "SELECT current_setting('TimeZone'), current_setting('DateStyle'), "
        "to_char(timestamptz '2026-01-01 12:00:00+00', 'HH24')");
    EXPECT_EQ(r.get<std::string>(0, 0), "UTC");
    EXPECT_EQ(r.get<std::string>(0, 1).substr(0, 3), "ISO");
    EXPECT_EQ(r.get<std::string>(0, 2), "12");
    EXPECT_EQ(other.exec("SELECT current_setting('TimeZone')").get<std::string>(0, 0),
              "America/New_York");
  }
}

TEST_F(PoolerTest, PooledSettingsLastOneTransactionOnTheSharedSession) {
  // The pooled claimers' synchronous_commit = off (pg::ConnectOptions::settings): set in
  // each statement's own implicit transaction, never left on the shared server session.
  const auto url = single_session_url(pooled_url_);
  auto with = pooled_connect(url);
  with.settings = {{"synchronous_commit", "off"}};
  auto ours = pg::Connection::connect(with);
  auto other = pg::Connection::connect(pooled_connect(url));
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(ours.query("SELECT current_setting($1)", std::string("synchronous_commit"))
                  .get<std::string>(0, 0),
              "off");
    EXPECT_EQ(other.query("SELECT current_setting($1)", std::string("synchronous_commit"))
                  .get<std::string>(0, 0),
              "on");
  }
  EXPECT_EQ(ours.query("SELECT pg_backend_pid()").get<int>(0, 0),
            other.query("SELECT pg_backend_pid()").get<int>(0, 0));  // one shared session
}

TEST_F(PoolerTest, ListenOnAPooledConnectionMissesNotifications) {
  // What PgBouncer 1.18 does with LISTEN in transaction mode, pinned: the LISTEN runs on
  // a server session that goes back to the pool after the statement; a NOTIFY committed
  // by another client is not delivered to the listening client.
  const auto url = single_session_url(pooled_url_);
  auto listener = pg::Connection::connect(pooled_connect(url));
  auto sender = pg::Connection::connect(pooled_connect(url));
  const auto channel = fmt::format("awa-test:{}", pg::Connection::cached_statement_name(schema_));
  listener.listen(channel);
  sender.query("SELECT pg_notify($1, 'x')", channel);
  EXPECT_FALSE(listener.wait_notification(std::chrono::milliseconds(1000)).has_value());
  // The same through a direct connection arrives.
  auto direct = connect_new();
  direct.listen(channel);
  sender.query("SELECT pg_notify($1, 'y')", channel);
  const auto n = direct.wait_notification(std::chrono::milliseconds(5000));
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->payload, "y");
}

// The start-up self-test (ClientOptions::pooled) on the three set-ups it must tell apart.
TEST_F(PoolerTest, NotifySelfTestReportsSwallowedThroughTheTransactionPooler) {
  Client client(pooled_options(false));
  client.add_queue(queue("selftest", 1));
  client.start();
  EXPECT_EQ(notify_ok_gauge(schema_), 0);
  client.stop();
}

TEST_F(PoolerTest, NotifySelfTestReportsOkWithADirectUrl) {
  Client client(pooled_options(true));
  client.add_queue(queue("selftest", 1));
  client.start();
  EXPECT_EQ(notify_ok_gauge(schema_), 1);
  client.stop();
}

TEST_F(PoolerTest, NotifySelfTestReportsOkWhenThePooledUrlKeepsItsSession) {
  // `pooled` set on a URL that is in fact a direct session: LISTEN works there, and the
  // self-test says so (the runtime still polls: it cannot know the session is kept).
  ClientOptions o = options();
  o.pooled = true;
  Client client(o);
  client.add_queue(queue("selftest", 1));
  client.start();
  EXPECT_EQ(notify_ok_gauge(schema_), 1);
  client.stop();
}

TEST_F(PoolerTest, LeaseElectsOneLeaderAndHandsOverOnStop) {
  ClientOptions o = pooled_options(false);
  // Rounds of 1 s, a lease of 5 s: a hand-over within the lease shows stop() released it.
  o.maintenance_interval = seconds(1);
  auto first = std::make_unique<Client>(o);
  first->add_queue(queue("lease", 1));
  Client second(o);
  second.add_queue(queue("lease", 1));
  first->start();
  second.start();
  ASSERT_TRUE(
      eventually([&] { return first->stats().leader || second.stats().leader; }, seconds(10)));
  // Never two at once while both renew.
  const auto until = Clock::now() + milliseconds(2500);
  while (Clock::now() < until) {
    ASSERT_FALSE(first->stats().leader && second.stats().leader);
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(count("SELECT count(*) FROM leader_lease WHERE expires_at > now()"), 1);
  const bool first_led = first->stats().leader;
  Client& survivor = first_led ? second : *first;
  // The lease as the leader last renewed it, or later: it runs at least until then.
  const auto renewed = conn().exec("SELECT expires_at FROM leader_lease").get<std::string>(0, 0);
  if (first_led) {
    first->stop();
  } else {
    second.stop();
  }
  ASSERT_TRUE(eventually([&] { return survivor.stats().leader; }, seconds(20)));
  // stop() expired the lease: the survivor took it before it would have run out.
  EXPECT_EQ(
      count(fmt::format("SELECT count(*) FROM leader_lease WHERE acquired_at < '{}'", renewed)), 1);
  first.reset();
}

}  // namespace
}  // namespace awa::testing
