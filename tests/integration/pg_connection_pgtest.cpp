#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "support.hpp"

namespace awa::pg {
namespace {

using std::chrono::system_clock;
using Clock = std::chrono::steady_clock;

class ConnectionTest : public testing::PgTest {};

TEST(ConnectionConnectTest, FailureNamesTheAddressAndNeverThePassword) {
  ConnectOptions options;
  options.url = "postgresql://awa:s3cret-pw@127.0.0.1:1/awa";
  options.connect_timeout = std::chrono::seconds(2);
  const auto start = Clock::now();
  try {
    (void)Connection::connect(options);
    FAIL() << "connected to port 1";
  } catch (const ConnectionError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("127.0.0.1:1"), std::string::npos) << message;
    EXPECT_EQ(message.find("s3cret-pw"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(e.retry(), Retry::kRetryCall);
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

TEST(ConnectionConnectTest, MalformedUrlDoesNotEchoThePassword) {
  ConnectOptions options;
  options.url = "host=127.0.0.1 password=s3cret-pw garbage";
  try {
    (void)Connection::connect(options);
    FAIL() << "accepted a malformed connection string";
  } catch (const ConnectionError& e) {
    EXPECT_EQ(std::string(e.what()).find("s3cret-pw"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("garbage"), std::string::npos) << e.what();
  }
}

TEST_F(ConnectionTest, SessionIsUtcIsoUtf8) {
  const Result r = conn().exec(
      "SELECT current_setting('TimeZone') AS tz, current_setting('DateStyle') AS ds, "
      "current_setting('client_encoding') AS enc, current_setting('application_name') AS app");
  EXPECT_EQ(r.get<std::string>(0, "tz"), "UTC");
  EXPECT_EQ(r.get<std::string>(0, "ds").substr(0, 3), "ISO");
  EXPECT_EQ(r.get<std::string>(0, "enc"), "UTF8");
  EXPECT_EQ(r.get<std::string>(0, "app"), "awa_tests");
}

TEST_F(ConnectionTest, TcpKeepalivesAreOnBothSides) {
  // Regression (issue 10, defect 6): without keepalives a half-open connection lives until
  // the OS gives up (hours), and a vanished leader keeps its session advisory lock, which
  // stops promotion and rescue cluster-wide. The tests connect over TCP (127.0.0.1).
  int on = 0;
  socklen_t len = sizeof on;
  ASSERT_EQ(::getsockopt(PQsocket(conn().native()), SOL_SOCKET, SO_KEEPALIVE, &on, &len), 0);
  EXPECT_EQ(on, 1) << "client side: SO_KEEPALIVE off";
  const Result r = conn().exec(
      "SELECT current_setting('tcp_keepalives_idle'), current_setting('tcp_keepalives_count'), "
      "current_setting('tcp_user_timeout')");
  EXPECT_EQ(r.get<std::string>(0, 0), "15");
  EXPECT_EQ(r.get<std::string>(0, 1), "4");
  EXPECT_EQ(r.get<std::string>(0, 2), "60000");
}

TEST_F(ConnectionTest, UrlOptionsOverrideTheKeepaliveDefaults) {
  ConnectOptions o = testing::test_connect_options();
  o.url += std::string(o.url.find('?') == std::string::npos ? "?" : "&") +
           "keepalives=0&options=-c%20tcp_keepalives_idle%3D99";
  Connection c = Connection::connect(o);
  int on = 1;
  socklen_t len = sizeof on;
  ASSERT_EQ(::getsockopt(PQsocket(c.native()), SOL_SOCKET, SO_KEEPALIVE, &on, &len), 0);
  EXPECT_EQ(on, 0);
  EXPECT_EQ(c.exec("SELECT current_setting('tcp_keepalives_idle')").get<std::string>(0, 0), "99");
}

TEST_F(ConnectionTest, UniqueViolationIsConstraintViolationWithDetail) {
  conn().exec("CREATE TABLE t (id int PRIMARY KEY)");
  conn().query("INSERT INTO t VALUES ($1)", 1);
  try {
    conn().query("INSERT INTO t VALUES ($1)", 1);
    FAIL() << "duplicate insert succeeded";
  } catch (const ConstraintViolation& e) {
    EXPECT_EQ(e.sqlstate(), "23505");
    EXPECT_EQ(e.retry(), Retry::kDoNotRetry);
    EXPECT_EQ(e.detail(), "Key (id)=(1) already exists.");
    EXPECT_NE(std::string(e.what()).find("INSERT INTO t"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(conn().idle());
}

TEST_F(ConnectionTest, SyntaxErrorIsDatabaseErrorNotRetried) {
  try {
    conn().exec("SELEC 1");
    FAIL();
  } catch (const DatabaseError& e) {
    EXPECT_EQ(e.sqlstate(), "42601");
    EXPECT_EQ(e.retry(), Retry::kDoNotRetry);
  }
}

TEST_F(ConnectionTest, StatementTimeoutIsQueryCanceled) {
  conn().exec("SET statement_timeout = '50ms'");
  try {
    conn().exec("SELECT pg_sleep(5)");
    FAIL();
  } catch (const QueryCanceled& e) {
    EXPECT_EQ(e.sqlstate(), "57014");
    EXPECT_EQ(e.retry(), Retry::kRetryCall);
  }
}

TEST_F(ConnectionTest, TypedAccessorsReadEveryType) {
  const Result r = conn().exec(
      "SELECT 'hello'::text AS s, true AS yes, false AS no, (-32768)::int2 AS i16, "
      "2147483647::int4 AS i32, (-9223372036854775808)::int8 AS i64min, "
      "9223372036854775807::int8 AS i64max, 0.1::float8 AS d, "
      "'2026-11-30 04:45:01.123456+00'::timestamptz AS ts, "
      "'2026-11-30 04:45:01+00'::timestamptz AS ts_whole, '\\x00ff'::bytea AS b, "
      "NULL::text AS n, 'Infinity'::float8 AS inf");
  EXPECT_EQ(r.rows(), 1);
  EXPECT_EQ(r.get<std::string>(0, "s"), "hello");
  EXPECT_EQ(r.get<std::string_view>(0, "s"), "hello");
  EXPECT_TRUE(r.get<bool>(0, "yes"));
  EXPECT_FALSE(r.get<bool>(0, "no"));
  EXPECT_EQ(r.get<std::int16_t>(0, "i16"), std::numeric_limits<std::int16_t>::min());
  EXPECT_EQ(r.get<std::int32_t>(0, "i32"), std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ(r.get<std::int64_t>(0, "i64min"), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(r.get<std::int64_t>(0, "i64max"), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(r.get<double>(0, "d"), 0.1);
  EXPECT_EQ(r.get<double>(0, "inf"), std::numeric_limits<double>::infinity());
  using namespace std::chrono;
  const auto expected = sys_days{year{2026} / 11 / 30} + hours{4} + minutes{45} + seconds{1};
  EXPECT_EQ(r.get<system_clock::time_point>(0, "ts"), expected + microseconds{123456});
  EXPECT_EQ(r.get<system_clock::time_point>(0, "ts_whole"), expected);
  EXPECT_EQ(r.get<Bytea>(0, "b").bytes, std::string("\0\xff", 2));
  EXPECT_TRUE(r.is_null(0, r.column("n")));
  EXPECT_EQ(r.get_opt<std::string>(0, "n"), std::nullopt);
  EXPECT_EQ(r.get_opt<std::string>(0, "s"), "hello");
  EXPECT_EQ(r.text(0, r.column("n")), "");
}

TEST_F(ConnectionTest, AccessorErrorsNameTheColumnAndTheText) {
  const Result r = conn().exec("SELECT NULL::int AS missing, 'abc'::text AS word, 70000 AS big");
  try {
    (void)r.get<std::int32_t>(0, "missing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
  try {
    (void)r.get<std::int64_t>(0, "word");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("word"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"abc\""), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)r.get<std::int16_t>(0, "big"), Error);  // out of range
  EXPECT_THROW((void)r.get<bool>(0, "word"), Error);
  EXPECT_THROW((void)r.column("nope"), Error);
  EXPECT_THROW((void)r.text(1, 0), Error);
}

TEST_F(ConnectionTest, ParametersRoundTripThroughTheServer) {
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes += static_cast<char>(i);
  const auto now = std::chrono::floor<std::chrono::microseconds>(system_clock::now());
  const Result r = conn().query(
      "SELECT $1::bytea AS b, $2::timestamptz AS ts, $3::float8 AS d, $4::int8 AS lo, "
      "$5::int8 AS hi, $6::text AS n, $7::bool AS yes, $8::text AS uni",
      Bytea{all_bytes}, system_clock::time_point(now), 1.0 / 3.0,
      std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(),
      std::nullopt, true, std::string("näive 🎉"));
  EXPECT_EQ(r.get<Bytea>(0, "b").bytes, all_bytes);
  EXPECT_EQ(r.get<system_clock::time_point>(0, "ts"), now);
  EXPECT_EQ(r.get<double>(0, "d"), 1.0 / 3.0);
  EXPECT_EQ(r.get<std::int64_t>(0, "lo"), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(r.get<std::int64_t>(0, "hi"), std::numeric_limits<std::int64_t>::max());
  EXPECT_FALSE(r.get_opt<std::string>(0, "n").has_value());
  EXPECT_TRUE(r.get<bool>(0, "yes"));
  EXPECT_EQ(r.get<std::string>(0, "uni"), "näive 🎉");
}

TEST_F(ConnectionTest, AffectedRowsCountsTheStatement) {
  conn().exec("CREATE TABLE t (id int)");
  EXPECT_EQ(conn().exec("INSERT INTO t SELECT generate_series(1, 5)").affected_rows(), 5);
  EXPECT_EQ(conn().exec("DELETE FROM t WHERE id > 3").affected_rows(), 2);
  EXPECT_EQ(conn().exec("SELECT 1").affected_rows(), 1);
}

TEST_F(ConnectionTest, TransactionRollsBackUnlessCommitted) {
  conn().exec("CREATE TABLE t (id int)");
  {
    Transaction tx(conn());
    tx.conn().exec("INSERT INTO t VALUES (1)");
    EXPECT_TRUE(conn().in_transaction());
  }
  EXPECT_FALSE(conn().in_transaction());
  EXPECT_EQ(conn().exec("SELECT count(*) FROM t").get<std::int64_t>(0, 0), 0);
  {
    Transaction tx(conn(), "BEGIN ISOLATION LEVEL REPEATABLE READ");
    tx.conn().exec("INSERT INTO t VALUES (2)");
    tx.commit();
  }
  EXPECT_EQ(conn().exec("SELECT count(*) FROM t").get<std::int64_t>(0, 0), 1);
  {
    Transaction tx(conn());
    tx.conn().exec("INSERT INTO t VALUES (3)");
    tx.rollback();
    EXPECT_FALSE(conn().in_transaction());
  }
  EXPECT_EQ(conn().exec("SELECT count(*) FROM t").get<std::int64_t>(0, 0), 1);
}

TEST_F(ConnectionTest, CommitOfAFailedTransactionThrows) {
  conn().exec("CREATE TABLE t (id int PRIMARY KEY)");
  Transaction tx(conn());
  tx.conn().exec("INSERT INTO t VALUES (1)");
  EXPECT_THROW(tx.conn().exec("INSERT INTO t VALUES (1)"), ConstraintViolation);
  try {
    tx.commit();
    FAIL() << "commit of an aborted transaction succeeded";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(e.sqlstate(), "25P02");
  }
  EXPECT_TRUE(conn().idle());
  EXPECT_EQ(conn().exec("SELECT count(*) FROM t").get<std::int64_t>(0, 0), 0);
}

TEST_F(ConnectionTest, ExecCachedReusesThePreparedStatement) {
  const std::string sql = "SELECT $1::int + 1 AS n";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(conn().exec_cached(sql, make_params(i)).get<std::int32_t>(0, "n"), i + 1);
  }
  const std::string name = Connection::cached_statement_name(sql);
  EXPECT_EQ(name.rfind("awa_", 0), 0u);
  const Result r = conn().query(
      "SELECT count(*) AS statements, sum(generic_plans + custom_plans) AS executions "
      "FROM pg_prepared_statements WHERE name = $1 AND statement = $2",
      name, sql);
  EXPECT_EQ(r.get<std::int64_t>(0, "statements"), 1);
  EXPECT_EQ(r.get<std::int64_t>(0, "executions"), 3);
}

TEST_F(ConnectionTest, ExecCachedRecoversFromDeallocate) {
  const std::string sql = "SELECT $1::int * 2 AS n";
  EXPECT_EQ(conn().exec_cached(sql, make_params(2)).get<std::int32_t>(0, "n"), 4);
  conn().exec("DEALLOCATE ALL");
  EXPECT_EQ(conn().exec_cached(sql, make_params(3)).get<std::int32_t>(0, "n"), 6);
}

TEST_F(ConnectionTest, QuoteIdentifierQuotesOddNames) {
  EXPECT_EQ(conn().quote_identifier("a\"b"), "\"a\"\"b\"");
  EXPECT_EQ(conn().quote_identifier("Mixed Case"), "\"Mixed Case\"");
}

TEST_F(ConnectionTest, ExecWithoutCopyInRefusesCopyAndStaysUsable) {
  conn().exec("CREATE TABLE t (id int)");
  EXPECT_THROW(conn().exec("COPY t FROM STDIN"), Error);
  EXPECT_TRUE(conn().idle());
  EXPECT_EQ(conn().exec("SELECT count(*) FROM t").get<std::int64_t>(0, 0), 0);
}

}  // namespace
}  // namespace awa::pg
