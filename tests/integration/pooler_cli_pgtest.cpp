// The `awa` admin commands through PgBouncer in transaction pool mode (`awa --pooled`).
// Every run goes through the pooler's single-session database, so each process lands on
// the server session the previous one used: a command that left a named prepared
// statement there would make the next one fail with 42P05.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "pooler_support.hpp"

namespace awa::testing {
namespace {

class PoolerCliTest : public PoolerTest {
 protected:
  // `awa --pooled ARGS` through the single-session pool database.
  CliResult awa(const std::string& args) {
    return run_cli("--database-url '" + single_session_url(pooled_url_) + "' --schema " + schema_ +
                   " --pooled " + args);
  }

  // Prepared statements of awa's on the pooler's one shared server session.
  std::int64_t statements_left() {
    auto c = pg::Connection::connect(pooled_connect(single_session_url(pooled_url_)));
    return c.query("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'awa_%'")
        .get<std::int64_t>(0, 0);
  }
};

TEST_F(PoolerCliTest, AdminCommandsWorkThroughTransactionPoolingWithPooled) {
  const auto enq = awa("enqueue noop --queue pq --count 3");
  ASSERT_EQ(enq.exit_code, 0) << enq.output;
  const auto first_id = enq.output.substr(0, enq.output.find('\n'));
  // Each command twice: the second run shares the first one's server session.
  for (int round = 0; round < 2; ++round) {
    const std::vector<std::string> commands = {
        "queue list",     "queue stats pq",  "queue shards pq",
        "queue pause pq", "queue resume pq", "job show " + first_id,
        "job list",       "dlq list",        "cron list"};
    for (const auto& cmd : commands) {
      const auto r = awa(cmd);
      EXPECT_EQ(r.exit_code, 0) << "awa --pooled " << cmd << " (round " << round
                                << "): " << r.output;
    }
  }
  const auto again = awa("enqueue noop --queue pq");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('pq')"), 4);
  EXPECT_EQ(statements_left(), 0) << "a pooled command prepared a named statement";
}

TEST_F(PoolerCliTest, MigrateRunsThroughTransactionPoolingWithPooled) {
  // The migration is one transaction under a transaction-scoped advisory lock, so a
  // transaction pooler keeps it on one server session from BEGIN to COMMIT. A fresh
  // schema: everything is created through the pooler, then a second run finds it current.
  // The fixture's schema name's unique tail, within the 63-byte limit.
  const std::string fresh = "m_" + schema_.substr(schema_.size() > 40 ? schema_.size() - 40 : 0);
  const auto run = [&] {
    return run_cli("--database-url '" + single_session_url(pooled_url_) + "' --schema " + fresh +
                   " --pooled migrate");
  };
  const auto first = run();
  EXPECT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("applied migration"), std::string::npos) << first.output;
  const auto second = run();
  EXPECT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("is up to date"), std::string::npos) << second.output;
  // The schema works: a pooled enqueue lands a ready row in it.
  const auto enq = run_cli("--database-url '" + single_session_url(pooled_url_) + "' --schema " +
                           fresh + " --pooled enqueue noop --queue pq");
  EXPECT_EQ(enq.exit_code, 0) << enq.output;
  EXPECT_EQ(count("SELECT count(*) FROM \"" + fresh + "\".ready_entries"), 1);
  EXPECT_EQ(statements_left(), 0) << "a pooled migrate prepared a named statement";
  conn().exec("DROP SCHEMA \"" + fresh + "\" CASCADE");
}

}  // namespace
}  // namespace awa::testing
