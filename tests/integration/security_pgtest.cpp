// Hardening that is not about roles: every function's fixed search_path, the metrics
// endpoint's loopback default, and passwords kept out of the CLI's output.
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "schema/migrator.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

// The fixed search_path (src/schema/migrator.cpp, sql/security/function_settings.sql).
class FunctionSettingsTest : public StorageTest {};

TEST_F(FunctionSettingsTest, EveryFunctionButInlinedSqlOnesHasAFixedSearchPath) {
  const auto rows =
      conn().exec(fmt::format("SELECT p.proname, l.lanname, p.provolatile::text, p.prosecdef, "
                              "coalesce(array_to_string(p.proconfig, ';'), '') "
                              "FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
                              "WHERE p.pronamespace = '{}'::regnamespace ORDER BY 1",
                              quoted_schema()));
  ASSERT_GT(rows.rows(), 20);
  for (int r = 0; r < rows.rows(); ++r) {
    const auto name = rows.get<std::string>(r, 0);
    const auto config = rows.get<std::string>(r, 4);
    const bool pinned = config.find("search_path=pg_catalog, pg_temp") != std::string::npos;
    const bool inlinable = rows.get<std::string>(r, 1) == "sql" &&
                           rows.get<std::string>(r, 2) != "v" && !rows.get<bool>(r, 3) &&
                           config.empty();
    EXPECT_TRUE(pinned || inlinable) << name << ": " << config;
    EXPECT_EQ(rows.get<bool>(r, 3), name == "ensure_lane" || name == "reserve_lane_range" ||
                                        name == "claim_unique_key" ||
                                        name == "set_unique_key_holders" ||
                                        name == "place_staged_jobs" || name == "shard_fence_now" ||
                                        name == "enqueue_after" || name == "add_batch_members")
        << name;
  }
  // Settings the function files declare survive.
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM pg_proc WHERE pronamespace = "
                              "'{}'::regnamespace AND proname = 'claim_ready_runtime' AND "
                              "'plan_cache_mode=force_generic_plan' = ANY(proconfig)",
                              quoted_schema())),
            1);
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM pg_proc WHERE pronamespace = "
                              "'{}'::regnamespace AND proname = 'close_attempts' AND "
                              "'jit=off' = ANY(proconfig)",
                              quoted_schema())),
            1);
  // The claim's helpers stay inlinable.
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM pg_proc WHERE pronamespace = "
                              "'{}'::regnamespace AND proname IN ('lane_heads_in_slot', "
                              "'effective_priority') AND proconfig IS NULL",
                              quoted_schema())),
            2);
}

TEST_F(FunctionSettingsTest, FunctionsIgnoreTheCallersSearchPath) {
  // A caller whose search_path finds nothing of the schema (and puts a hostile temporary
  // table first) gets the same behaviour.
  conn().exec("CREATE TEMP TABLE ready_entries (x int)");
  conn().exec("SET search_path TO pg_temp, public");
  const auto id = conn()
                      .exec(fmt::format("SELECT id FROM {}.insert_job_compat('k', 'sp', '{{}}')",
                                        quoted_schema()))
                      .get<std::int64_t>(0, 0);
  EXPECT_GT(id, 0);
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM {}.ready_entries WHERE job_id = {}",
                              quoted_schema(), id)),
            1);
  EXPECT_EQ(count("SELECT count(*) FROM pg_temp.ready_entries"), 0);
  // A no-op migrate changes no function (nothing to re-apply, no ALTER).
  const auto before = count(fmt::format(
      "SELECT sum(xmin::text::bigint) FROM pg_proc WHERE pronamespace = '{}'::regnamespace",
      quoted_schema()));
  conn().exec(fmt::format("SET search_path TO {}", quoted_schema()));
  schema::Migrator(schema_).migrate(conn());
  EXPECT_EQ(count(fmt::format("SELECT sum(xmin::text::bigint) FROM pg_proc WHERE pronamespace = "
                              "'{}'::regnamespace",
                              quoted_schema())),
            before);
}

// The metrics endpoint binds to loopback unless a host is named.
class CliMetricsTest : public PgTest {
 protected:
  // Runs `awa work` with --metrics-addr for a moment; returns its log.
  std::string work_log(const std::string& addr) {
    return run_cli(fmt::format("--schema {} work --queue m --rotate-ms 0 --metrics-addr {} 2>&1 "
                               "& pid=$!; sleep 2; kill -TERM $pid; wait $pid",
                               schema_, addr))
        .output;
  }
};

TEST_F(CliMetricsTest, APortAloneBindsLoopbackAndAHostIsHonoured) {
  const auto loopback = work_log("0");
  EXPECT_NE(loopback.find("metrics on http://127.0.0.1:"), std::string::npos) << loopback;
  const auto any = work_log("0.0.0.0:0");
  EXPECT_NE(any.find("metrics on http://0.0.0.0:"), std::string::npos) << any;
  const auto bad = run_cli(fmt::format("--schema {} work --queue m --metrics-addr host:", schema_));
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("metrics address 'host:'"), std::string::npos) << bad.output;
}

// Passwords in connection strings never reach the CLI's output.
TEST(CliRedaction, PasswordsNeverAppearInErrorsOrHelp) {
  const std::string secret = "Sup3rS3cretPw";
  const std::string real_url = database_url();
  // The child processes inherit it: --help must not show it.
  struct RestoreEnv {
    std::string url;
    ~RestoreEnv() { ::setenv("DATABASE_URL", url.c_str(), 1); }
  } restore{real_url};
  ::setenv("DATABASE_URL", ("postgresql://awa:" + secret + "@127.0.0.1:1/awa").c_str(), 1);
  const std::string cases[] = {
      // Unreachable host (connection refused).
      "--database-url 'postgresql://awa:" + secret + "@127.0.0.1:1/awa' migrate",
      // A host that does not resolve.
      "--database-url 'postgresql://awa:" + secret + "@no-such-host.invalid/awa' migrate",
      // Reachable server, wrong database: the server's own error.
      "--database-url '" + real_url + "_no_such_db?password=" + secret + "' migrate",
      // From the environment.
      "storage status",
      // key=value form, bad port.
      "--database-url 'host=127.0.0.1 port=1 user=awa password=" + secret + "' storage status",
      // Malformed.
      "--database-url 'postgresql://awa:" + secret + "@127.0.0.1:notaport/awa' migrate",
      // A URL where an argument was expected: CLI11 echoes it.
      "migrate 'postgresql://awa:" + secret + "@127.0.0.1/awa'",
      // Help, with the secret in DATABASE_URL.
      "--help",
      "work --help",
      "roles setup --help",
  };
  for (const auto& args : cases) {
    const auto r = run_cli("--schema awa_redact_test " + args);
    EXPECT_EQ(r.output.find(secret), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(r.output.empty()) << args;
  }
  const auto help = run_cli("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("roles"), std::string::npos) << help.output;
}

}  // namespace
}  // namespace awa::testing
