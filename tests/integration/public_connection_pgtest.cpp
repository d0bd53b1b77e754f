// awa::Connection, the public connection: parameterised execute / query (values never
// spliced into the SQL text, errors with the server's SQLSTATE), and adopting a
// connection the application opened with libpq, then handing it back.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <optional>
#include <string>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/migrate.hpp"
#include "awa/queue_storage.hpp"
#include "support.hpp"

namespace awa::testing {
namespace {

class PublicConnectionTest : public PgTest {
 protected:
  void SetUpSchema() override {
    conn().exec("CREATE TABLE orders (id int PRIMARY KEY, note text, amount float8, paid bool)");
  }
  std::string table() const { return quoted_schema() + ".orders"; }
};

TEST_F(PublicConnectionTest, ExecuteBindsParametersAndNeverSplicesThem) {
  auto c = Connection::connect(database_url());
  const std::string hostile = "x'); DROP TABLE orders; --";
  EXPECT_EQ(
      c.execute("INSERT INTO " + table() + " VALUES ($1, $2, $3, $4)", {42, hostile, 2.5, true}),
      1);
  EXPECT_EQ(c.execute("UPDATE " + table() + " SET paid = $1 WHERE id = $2", {false, 42}), 1);
  const auto r = c.query("SELECT id, note, amount, paid FROM " + table() + " WHERE id = $1", {42});
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.columns, (std::vector<std::string>{"id", "note", "amount", "paid"}));
  EXPECT_EQ(r.rows[0][0], "42");
  EXPECT_EQ(r.rows[0][1], hostile);
  EXPECT_EQ(r.rows[0][2], "2.5");
  EXPECT_EQ(r.rows[0][3], "f");
}

TEST_F(PublicConnectionTest, QueryReturnsNullsAndTakesOptionals) {
  auto c = Connection::connect(database_url());
  const std::optional<int> none;
  const std::optional<std::string> some = "q";
  const auto r =
      c.query("SELECT $1::int AS a, $2::text AS b, $3::int AS c", {none, some, std::nullopt});
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.columns, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(r.rows[0][0], std::nullopt);
  EXPECT_EQ(r.rows[0][1], "q");
  EXPECT_EQ(r.rows[0][2], std::nullopt);
  EXPECT_EQ(c.query("SELECT 1 WHERE false").rows.size(), 0u);
}

TEST_F(PublicConnectionTest, AFailedStatementCarriesItsSqlstateAndLeavesTheConnectionUsable) {
  auto c = Connection::connect(database_url());
  c.execute("INSERT INTO " + table() + " (id) VALUES ($1)", {1});
  try {
    c.execute("INSERT INTO " + table() + " (id) VALUES ($1)", {1});
    FAIL() << "a duplicate key was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "23505") << e.what();
  }
  try {
    c.query("SELECT $1::int", {"not a number"});
    FAIL() << "\"not a number\" read as an int";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "22P02") << e.what();
  }
  EXPECT_EQ(c.query("SELECT count(*) FROM " + table()).rows[0][0], "1");
}

TEST_F(PublicConnectionTest, AdoptsALibpqConnectionEnqueuesInItsTransactionAndHandsItBack) {
  PGconn* raw = PQconnectdb(database_url().c_str());
  ASSERT_EQ(PQstatus(raw), CONNECTION_OK) << PQerrorMessage(raw);
  auto c = Connection::adopt(raw);
  migrate(c, schema_);
  StorageOptions so;
  so.schema = schema_;
  QueueStorage store(so);
  InsertOpts opts;
  opts.queue = "mail";
  {
    Transaction tx(c);
    c.execute("INSERT INTO " + table() + " (id, paid) VALUES ($1, $2)", {7, true});
    store.insert(c, NewJob("send_receipt", {{"order", 7}}, opts));
    tx.commit();
  }
  {
    Transaction tx(c);  // rolled back: neither the order nor its job
    c.execute("INSERT INTO " + table() + " (id, paid) VALUES ($1, $2)", {8, true});
    store.insert(c, NewJob("send_receipt", {{"order", 8}}, opts));
  }
  EXPECT_EQ(Admin(schema_).queue_counts(c, "mail").available, 1);
  EXPECT_EQ(c.query("SELECT count(*) FROM " + table()).rows[0][0], "1");

  PGconn* back = c.release();
  ASSERT_EQ(back, raw);
  PGresult* res = PQexec(back, "SELECT current_setting('TimeZone')");
  ASSERT_EQ(PQresultStatus(res), PGRES_TUPLES_OK) << PQerrorMessage(back);
  EXPECT_STREQ(PQgetvalue(res, 0, 0), "UTC");
  PQclear(res);
  PQfinish(back);  // ours again: the released awa::Connection must not finish it too
  EXPECT_THROW(c.execute("SELECT 1"), Error);
}

TEST_F(PublicConnectionTest, AdoptRefusesANullOrBusyConnectionAndLeavesItWithTheCaller) {
  EXPECT_THROW(Connection::adopt(nullptr), InvalidArgument);
  PGconn* raw = PQconnectdb(database_url().c_str());
  ASSERT_EQ(PQstatus(raw), CONNECTION_OK) << PQerrorMessage(raw);
  PQclear(PQexec(raw, "BEGIN"));
  EXPECT_THROW(Connection::adopt(raw), InvalidArgument);
  PGresult* res = PQexec(raw, "ROLLBACK");
  EXPECT_EQ(PQresultStatus(res), PGRES_COMMAND_OK) << PQerrorMessage(raw);
  PQclear(res);
  PQfinish(raw);
}

}  // namespace
}  // namespace awa::testing
