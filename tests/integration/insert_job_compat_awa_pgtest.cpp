// insert_job_compat takes AWA's parameter order and names (issue 12: "SQL producers
// written for AWA work unchanged"), returns a row that carries the job id, refuses what
// it does not support with SQLSTATE 0A000 and writes nothing then, and replaced the
// earlier (p_kind, p_args, p_queue, ...) signature without leaving an ambiguous overload.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "awa/error.hpp"
#include "awa/job.hpp"
#include "pg/connection.hpp"
#include "schema/migrator.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

class InsertJobCompatAwaTest : public StorageTest {
 protected:
  std::int64_t rows_written() {
    return count(
        "SELECT (SELECT count(*) FROM ready_entries) + (SELECT count(*) FROM deferred_jobs)"
        " + (SELECT count(*) FROM queue_enqueue_heads) + (SELECT count(*) FROM queue_claim_heads)");
  }
  // The SQLSTATE and message `sql` fails with; {"", ""} when it succeeds.
  std::pair<std::string, std::string> failure(const std::string& sql) {
    try {
      conn().exec(sql);
    } catch (const Error& e) {
      return {e.sqlstate(), e.what()};
    }
    return {"", ""};
  }
};

TEST_F(InsertJobCompatAwaTest, PositionalAwaCallEnqueuesAndReturnsTheJob) {
  // The call the issue quotes: (kind, queue, args).
  const auto r = conn().exec(
      "SELECT id, kind, queue, args::text, state, priority, attempt, max_attempts, "
      "enqueue_shard IS NULL, lane_seq IS NULL, run_at <= now(), created_at = now(), "
      "metadata IS NULL, "
      "tags IS NULL, ordering_key IS NULL "
      "FROM insert_job_compat('send_email', 'mail', '{\"to\": 1}')");
  ASSERT_EQ(r.rows(), 1);
  const auto id = r.get<std::int64_t>(0, 0);
  EXPECT_GT(id, 0);
  EXPECT_EQ(r.get<std::string>(0, 1), "send_email");
  EXPECT_EQ(r.get<std::string>(0, 2), "mail");
  EXPECT_EQ(r.get<std::string>(0, 3), "{\"to\": 1}");
  EXPECT_EQ(r.get<std::string>(0, 4), "available");
  EXPECT_EQ(r.get<int>(0, 5), 2);
  EXPECT_EQ(r.get<int>(0, 6), 0);
  EXPECT_EQ(r.get<int>(0, 7), 25);
  // enqueue_shard and lane_seq are assigned when the transaction commits: NULL here.
  for (int c = 8; c <= 14; ++c) EXPECT_TRUE(r.get<bool>(0, c)) << "column " << c;
  // The row it describes is the one written.
  const auto ready = conn().query(
      "SELECT kind, queue, args->>'to', priority, max_attempts, enqueue_shard, lane_seq "
      "FROM ready_entries JOIN queue_ids USING (queue_id) WHERE job_id = $1",
      id);
  ASSERT_EQ(ready.rows(), 1);
  EXPECT_EQ(ready.get<std::string>(0, 0), "send_email");
  EXPECT_EQ(ready.get<std::string>(0, 1), "mail");
  EXPECT_EQ(ready.get<std::string>(0, 2), "1");
  EXPECT_EQ(ready.get<int>(0, 3), 2);
  EXPECT_EQ(ready.get<int>(0, 4), 25);
  EXPECT_EQ(ready.get<int>(0, 5), 0);
  EXPECT_EQ(ready.get<std::int64_t>(0, 6), 1);

  // All twelve parameters positionally, typed as AWA's client sends them (smallint
  // priority and max_attempts, bit(8) unique states).
  const auto full = conn().exec(
      "SELECT id, priority, max_attempts, metadata->>'m', array_to_string(tags, ','), "
      "ordering_key, state FROM insert_job_compat('k', 'mail', '{}'::jsonb, 'available', "
      "3::smallint, 5::smallint, NULL::timestamptz, '{\"m\": \"x\"}'::jsonb, ARRAY['a', 'b'], "
      "NULL::bytea, NULL::bit(8), '\\x6b6579'::bytea)");
  ASSERT_EQ(full.rows(), 1);
  EXPECT_EQ(full.get<int>(0, 1), 3);
  EXPECT_EQ(full.get<int>(0, 2), 5);
  EXPECT_EQ(full.get<std::string>(0, 3), "x");
  EXPECT_EQ(full.get<std::string>(0, 4), "a,b");
  EXPECT_EQ(full.get<pg::Bytea>(0, 5).bytes, "key");
  EXPECT_EQ(full.get<std::string>(0, 6), "available");
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE priority = 3 AND max_attempts = 5 AND "
                  "metadata->>'m' = 'x' AND tags = ARRAY['a', 'b'] AND ordering_key = 'key'"),
            1);
}

TEST_F(InsertJobCompatAwaTest, NamedParametersInAnyOrderAndDefaults) {
  const auto named = conn().exec(
      "SELECT id, queue, priority, args->>'a' FROM insert_job_compat(p_priority => 1, "
      "p_args => '{\"a\": 7}', p_queue => 'named', p_kind => 'k')");
  EXPECT_EQ(named.get<std::string>(0, 1), "named");
  EXPECT_EQ(named.get<int>(0, 2), 1);
  EXPECT_EQ(named.get<std::string>(0, 3), "7");
  // Mixed: positional first, then named.
  EXPECT_EQ(conn()
                .exec("SELECT queue FROM insert_job_compat('k', 'mixed', p_max_attempts => 3)")
                .get<std::string>(0, 0),
            "mixed");
  // Only the kind: every default.
  const auto d = conn().exec(
      "SELECT queue, args::text, state, priority, max_attempts, metadata IS NULL, tags IS NULL "
      "FROM insert_job_compat('only_kind')");
  EXPECT_EQ(d.get<std::string>(0, 0), "default");
  EXPECT_EQ(d.get<std::string>(0, 1), "{}");
  EXPECT_EQ(d.get<std::string>(0, 2), "available");
  EXPECT_EQ(d.get<int>(0, 3), 2);
  EXPECT_EQ(d.get<int>(0, 4), 25);
  EXPECT_TRUE(d.get<bool>(0, 5));
  EXPECT_TRUE(d.get<bool>(0, 6));
  // The id is reachable without SELECT * too.
  EXPECT_GT(conn().exec("SELECT (insert_job_compat('k')).id").get<std::int64_t>(0, 0), 0);
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries"), 4);
}

TEST_F(InsertJobCompatAwaTest, PositionalKeyedCallsRouteLikeCpp) {
  // Guards cross-language routing through the AWA-order call: the key (12th parameter)
  // lands on shard_for_ordering_key(key, 8) when its transaction commits.
  set_shards("keyed", 8);
  std::set<int> covered;
  for (int i = 0; i < 48; ++i) {
    const std::string key = "tenant-" + std::to_string(i);
    const int want = shard_for_ordering_key(key, 8);
    covered.insert(want);
    pg::Params p;
    p.add_bytea(key);
    const auto r = conn().exec(
        "SELECT id FROM insert_job_compat('k', 'keyed', '{}', 'available', 2, "
        "25, NULL, NULL, NULL, NULL, NULL, $1::bytea)",
        p);
    EXPECT_EQ(conn()
                  .query("SELECT enqueue_shard FROM ready_entries WHERE job_id = $1",
                         r.get<std::int64_t>(0, 0))
                  .get<int>(0, 0),
              want)
        << key;
  }
  EXPECT_EQ(covered.size(), 8u);
}

TEST_F(InsertJobCompatAwaTest, ScheduledStateIsDeferred) {
  // p_state 'scheduled' defers the job (due now without p_run_at: the leader promotes
  // it); 'available' with a future run_at is scheduled too, as before.
  const auto s = conn().exec(
      "SELECT id, state, enqueue_shard IS NULL, lane_seq IS NULL, run_at <= now() "
      "FROM insert_job_compat('k', 'sq', p_state => 'scheduled')");
  EXPECT_EQ(s.get<std::string>(0, 1), "scheduled");
  EXPECT_TRUE(s.get<bool>(0, 2));
  EXPECT_TRUE(s.get<bool>(0, 3));
  EXPECT_TRUE(s.get<bool>(0, 4));
  const auto later = conn().exec(
      "SELECT id, state FROM insert_job_compat('k', 'sq', '{}', 'available', "
      "p_run_at => now() + interval '1 hour')");
  EXPECT_EQ(later.get<std::string>(0, 1), "scheduled");
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs WHERE reason = 'scheduled' AND queue = 'sq'"),
            2);
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries"), 0);
  // Promotion makes the due one available.
  EXPECT_EQ(count("SELECT promote_due_deferred(100)"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE job_id = " +
                  std::to_string(s.get<std::int64_t>(0, 0))),
            1);
}

TEST_F(InsertJobCompatAwaTest, UnsupportedParametersAreRefusedAndWriteNothing) {
  conn().exec("SELECT insert_job_compat('k', 'valid')");  // lanes exist; nothing may be added
  const auto before = rows_written();
  const auto ids_before = count("SELECT last_value FROM job_ids");
  struct Case {
    std::string call;
    std::string sqlstate;
    std::string names;
  };
  const std::vector<Case> cases = {
      {"p_unique_key => '\\x01'::bytea", "0A000", "p_unique_key"},
      {"p_unique_states => B'00000010'", "0A000", "p_unique_states"},
      {"p_unique_key => '\\x01'::bytea, p_unique_states => B'00000010'", "0A000", "p_unique_key"},
      {"p_state => 'running'", "0A000", "p_state 'running'"},
      {"p_state => 'retryable'", "0A000", "p_state"},
      {"p_state => 'completed'", "0A000", "p_state"},
      {"p_state => 'bogus'", "22023", "p_state 'bogus'"},
      {"p_state => NULL", "22023", "p_state NULL"},
      {"p_args => NULL", "22023", "args"},
      {"p_max_attempts => 0::smallint", "22023", "max_attempts"},
      {"p_priority => 5::smallint", "22023", "priority"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.call);
    const auto [state, message] =
        failure("SELECT * FROM insert_job_compat('k', 'valid', " + c.call + ")");
    EXPECT_EQ(state, c.sqlstate) << message;
    EXPECT_NE(message.find(c.names), std::string::npos) << message;
  }
  const auto [state, message] = failure("SELECT * FROM insert_job_compat('k', NULL)");
  EXPECT_EQ(state, "22023") << message;
  EXPECT_NE(message.find("queue"), std::string::npos) << message;
  EXPECT_EQ(rows_written(), before);
  EXPECT_EQ(count("SELECT last_value FROM job_ids"), ids_before);  // refused before an id
}

TEST_F(InsertJobCompatAwaTest, TheEarlierSignatureIsGoneEvenAfterAnUpgrade) {
  // A schema migrated before the change holds insert_job_compat(text, jsonb, text, ...):
  // re-applying the function file drops it, so named calls are not ambiguous between two
  // overloads with defaults and an old-order positional call fails instead of guessing.
  conn().exec(
      "CREATE FUNCTION insert_job_compat(p_kind text, p_args jsonb DEFAULT '{}', p_queue text "
      "DEFAULT 'default', p_priority integer DEFAULT 2, p_max_attempts integer DEFAULT 25, "
      "p_run_at timestamptz DEFAULT NULL, p_ordering_key bytea DEFAULT NULL, p_metadata jsonb "
      "DEFAULT NULL, p_tags text[] DEFAULT NULL) RETURNS bigint LANGUAGE sql AS 'SELECT "
      "-1::bigint'");
  EXPECT_EQ(failure("SELECT insert_job_compat(p_kind => 'k')").first, "42725");  // ambiguous
  conn().exec("DELETE FROM schema_functions WHERE name = '0030_insert_job_compat.sql'");
  schema::Migrator(schema_).migrate(conn());
  EXPECT_EQ(count("SELECT count(*) FROM pg_proc WHERE proname = 'insert_job_compat' AND "
                  "pronamespace = current_schema()::regnamespace"),
            1);
  EXPECT_GT(conn().exec("SELECT id FROM insert_job_compat(p_kind => 'k')").get<std::int64_t>(0, 0),
            0);
  // Re-applying again (the DROP finds nothing) changes nothing.
  conn().exec("DELETE FROM schema_functions");
  schema::Migrator(schema_).migrate(conn());
  EXPECT_EQ(count("SELECT count(*) FROM pg_proc WHERE proname = 'insert_job_compat' AND "
                  "pronamespace = current_schema()::regnamespace"),
            1);
  // The old argument order: the args text is not a queue name, nor 'p' JSON.
  EXPECT_EQ(failure("SELECT insert_job_compat('k', '{\"a\": 1}', 'p')").first, "22P02");
}

}  // namespace
}  // namespace awa::testing
