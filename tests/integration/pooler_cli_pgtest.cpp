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
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue = 'pq'"), 4);
  EXPECT_EQ(statements_left(), 0) << "a pooled command prepared a named statement";
}

TEST_F(PoolerCliTest, MigrateRefusesPooledAndChangesNothing) {
  // migrate holds a session-level advisory lock across its transactions.
  const auto before = count("SELECT count(*) FROM schema_migrations");
  const auto r = awa("migrate");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("needs a direct connection"), std::string::npos) << r.output;
  EXPECT_EQ(count("SELECT count(*) FROM schema_migrations"), before);
}

}  // namespace
}  // namespace awa::testing
