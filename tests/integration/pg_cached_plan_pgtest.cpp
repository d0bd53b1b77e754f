// Regression test: a statement exec_cached prepared stops working when a function or table
// it reads is re-created with another result type — PostgreSQL answers 0A000 "cached plan
// must not change result type" on every later EXECUTE of it in that session. exec_cached
// must prepare it again (once) and run it, as it does after a lost statement (26000).
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "support.hpp"

namespace awa::pg {
namespace {

class CachedPlanTest : public testing::PgTest {
 protected:
  std::int64_t prepared(const std::string& sql) {
    return conn()
        .query("SELECT count(*) FROM pg_prepared_statements WHERE name = $1",
               Connection::cached_statement_name(sql))
        .get<std::int64_t>(0, 0);
  }
};

TEST_F(CachedPlanTest, ExecCachedSurvivesAFunctionReCreatedWithAnotherResultType) {
  conn().exec("CREATE FUNCTION shape(p int) RETURNS TABLE (a int) LANGUAGE sql AS 'SELECT p'");
  const std::string sql = "SELECT * FROM shape($1::int)";
  EXPECT_EQ(conn().exec_cached(sql, make_params(1)).columns(), 1);
  conn().exec(
      "DROP FUNCTION shape(int); CREATE FUNCTION shape(p int) RETURNS TABLE (a int, b text) "
      "LANGUAGE sql AS 'SELECT p, ''two'''");
  const Result r = conn().exec_cached(sql, make_params(2));
  ASSERT_EQ(r.columns(), 2);
  EXPECT_EQ(r.get<std::int32_t>(0, "a"), 2);
  EXPECT_EQ(r.get<std::string>(0, "b"), "two");
  EXPECT_EQ(prepared(sql), 1) << "prepared again under the same name";
  EXPECT_EQ(conn().exec_cached(sql, make_params(3)).get<std::int32_t>(0, "a"), 3);
}

TEST_F(CachedPlanTest, ExecCachedSurvivesATableAlteredUnderIt) {
  conn().exec("CREATE TABLE shaped (a int); INSERT INTO shaped VALUES (1)");
  const std::string sql = "SELECT * FROM shaped WHERE a = $1::int";
  EXPECT_EQ(conn().exec_cached(sql, make_params(1)).columns(), 1);
  conn().exec("ALTER TABLE shaped ADD COLUMN b text DEFAULT 'two'");
  const Result r = conn().exec_cached(sql, make_params(1));
  ASSERT_EQ(r.columns(), 2);
  EXPECT_EQ(r.get<std::string>(0, "b"), "two");
}

TEST_F(CachedPlanTest, InsideATransactionTheErrorStandsAndTheNextCallRecovers) {
  // The failed EXECUTE aborted the caller's transaction: retrying inside it cannot work,
  // so the error reaches the caller; once it has rolled back, the statement runs again.
  conn().exec("CREATE FUNCTION shape(p int) RETURNS TABLE (a int) LANGUAGE sql AS 'SELECT p'");
  const std::string sql = "SELECT * FROM shape($1::int)";
  EXPECT_EQ(conn().exec_cached(sql, make_params(1)).columns(), 1);
  conn().exec(
      "DROP FUNCTION shape(int); CREATE FUNCTION shape(p int) RETURNS TABLE (a int, b text) "
      "LANGUAGE sql AS 'SELECT p, ''two'''");
  {
    Transaction tx(conn());
    try {
      (void)conn().exec_cached(sql, make_params(2));
      FAIL() << "an aborted transaction went on";
    } catch (const DatabaseError& e) {
      EXPECT_EQ(e.sqlstate(), "0A000") << e.what();
    }
  }
  EXPECT_TRUE(conn().idle());
  EXPECT_EQ(conn().exec_cached(sql, make_params(2)).columns(), 2);
  // And in a transaction from the start, too: the re-preparation happened before it.
  Transaction tx(conn());
  EXPECT_EQ(conn().exec_cached(sql, make_params(3)).get<std::int32_t>(0, "a"), 3);
  tx.commit();
}

TEST_F(CachedPlanTest, A0A000ThatPersistsIsReportedAfterOneRetry) {
  // Not a cached-plan problem: a statement that always fails with 0A000 is prepared again
  // once, then its error is the caller's.
  conn().exec(
      "CREATE TABLE calls (n int); CREATE FUNCTION refuse(p int) RETURNS int LANGUAGE plpgsql "
      "AS $f$ BEGIN INSERT INTO calls VALUES (p); "
      "RAISE EXCEPTION 'not supported' USING ERRCODE = '0A000'; END $f$");
  const std::string sql = "SELECT refuse($1::int)";
  try {
    (void)conn().exec_cached(sql, make_params(1));
    FAIL() << "refuse() succeeded";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(e.sqlstate(), "0A000") << e.what();
  }
  EXPECT_TRUE(conn().idle());
  EXPECT_EQ(conn().exec("SELECT count(*) FROM calls").get<std::int64_t>(0, 0), 0);
}

}  // namespace
}  // namespace awa::pg
