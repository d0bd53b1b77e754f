#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/copy.hpp"
#include "pg/result.hpp"
#include "support.hpp"

namespace awa::pg {
namespace {

class CopyTest : public testing::PgTest {
 protected:
  std::int64_t count(const std::string& table) {
    return conn().exec("SELECT count(*) FROM " + table).get<std::int64_t>(0, 0);
  }
};

// Row i's text: every awkward case, and enough variety that an escaping slip shows up.
std::optional<std::string> awkward(int i) {
  static const std::array<const char*, 12> kPieces = {"plain",
                                                      "tab\there",
                                                      "new\nline",
                                                      "carriage\rreturn",
                                                      "back\\slash",
                                                      "\\N",
                                                      "ends with backslash\\",
                                                      "\x01\x02\x1f\x7f controls",
                                                      "non-ASCII: grüße, 日本語",
                                                      "emoji 🎉👩‍💻",
                                                      "",
                                                      "\\.\n\\."};
  if (i % 13 == 12) return std::nullopt;
  return std::string(kPieces[static_cast<std::size_t>(i % 12)]) + "#" + std::to_string(i);
}

TEST_F(CopyTest, TextCopyRoundTripsAwkwardTextExactly) {
  conn().exec("CREATE TABLE t (id int PRIMARY KEY, v text)");
  constexpr int kRows = 100'000;
  CopyWriter w = conn().copy_in("COPY t (id, v) FROM STDIN");
  EXPECT_EQ(w.format(), CopyWriter::Format::kText);
  for (int i = 0; i < kRows; ++i) {
    const std::string id = std::to_string(i);
    const std::optional<std::string> v = awkward(i);
    const std::array<std::optional<std::string_view>, 2> fields{
        id, v ? std::optional<std::string_view>(*v) : std::nullopt};
    w.row(fields);
  }
  EXPECT_EQ(w.finish(), kRows);

  const Result r = conn().exec("SELECT id, v FROM t ORDER BY id");
  ASSERT_EQ(r.rows(), kRows);
  for (int i = 0; i < kRows; ++i) {
    ASSERT_EQ(r.get<std::int32_t>(i, 0), i);
    ASSERT_EQ(r.get_opt<std::string>(i, 1), awkward(i)) << "row " << i;
  }
}

TEST_F(CopyTest, BinaryCopyRoundTripsMixedTypes) {
  conn().exec(
      "CREATE TABLE m (a int2, b int4, c int8, d text, e bytea, f jsonb, g timestamptz, "
      "h bool)");
  CopyWriter w = conn().copy_in("COPY m FROM STDIN (FORMAT binary)");
  ASSERT_EQ(w.format(), CopyWriter::Format::kBinary);
  const std::string bytes("\0\x01\xff\\x", 5);
  // 2026-11-30 04:45:01.123456 UTC
  const std::int64_t micros = 1'796'013'901'123'456;
  w.begin_row(8);
  w.binary_int16(-32768);
  w.binary_int32(2147483647);
  w.binary_int64(-9223372036854775807 - 1);
  w.binary_text("tab\t \\N 🎉");
  w.binary_bytea(bytes);
  w.binary_jsonb(R"({"b": [1, 2], "a": "x"})");
  w.binary_timestamptz(micros);
  w.binary_bool(true);
  w.begin_row(8);
  for (int i = 0; i < 8; ++i) w.binary_null();
  w.begin_row(8);
  w.binary_int16(7);
  w.binary_int32(-1);
  w.binary_int64(0);
  w.binary_text("");
  w.binary_bytea("");
  w.binary_jsonb("null");
  w.binary_timestamptz(-1);  // just before 1970
  w.binary_bool(false);
  EXPECT_EQ(w.finish(), 3);

  const Result r = conn().exec("SELECT * FROM m ORDER BY a NULLS LAST");
  ASSERT_EQ(r.rows(), 3);
  EXPECT_EQ(r.get<std::int16_t>(0, "a"), -32768);
  EXPECT_EQ(r.get<std::int32_t>(0, "b"), 2147483647);
  EXPECT_EQ(r.get<std::int64_t>(0, "c"), -9223372036854775807 - 1);
  EXPECT_EQ(r.get<std::string>(0, "d"), "tab\t \\N 🎉");
  EXPECT_EQ(r.get<Bytea>(0, "e").bytes, bytes);
  EXPECT_EQ(r.get<std::string>(0, "f"), R"({"a": "x", "b": [1, 2]})");
  using std::chrono::system_clock;
  EXPECT_EQ(r.get<system_clock::time_point>(0, "g"),
            system_clock::time_point(std::chrono::microseconds(micros)));
  EXPECT_TRUE(r.get<bool>(0, "h"));

  EXPECT_EQ(r.get<std::int16_t>(1, "a"), 7);
  EXPECT_EQ(r.get<std::string>(1, "d"), "");
  EXPECT_EQ(r.get<Bytea>(1, "e").bytes, "");
  EXPECT_EQ(r.get<std::string>(1, "f"), "null");
  EXPECT_EQ(r.get<std::string>(1, "g"), "1969-12-31 23:59:59.999999+00");
  EXPECT_FALSE(r.get<bool>(1, "h"));

  for (int c = 0; c < 8; ++c) EXPECT_TRUE(r.is_null(2, c)) << "column " << c;
}

TEST_F(CopyTest, ScriptFeedsEachCopyWhenTheServerAsksAndCommitsOnce) {
  // Guards run_script, the COPY enqueue's transport: COPYs run between other statements
  // of one simple query, each gets its data when the server reaches it (after the results
  // before it), and without BEGIN everything is one implicit transaction.
  conn().exec("CREATE TABLE t (id int PRIMARY KEY, v text)");
  std::vector<std::string> seen;
  const auto late = run_script(
      conn(), "SELECT 10 AS base; COPY t (id, v) FROM STDIN; SELECT 20 AS base; COPY t FROM STDIN",
      4,
      [&](std::size_t i) {
        seen.push_back("copy " + std::to_string(i));
        const std::string base = i == 1 ? "10" : "20";
        return base + "\tfrom " + std::to_string(i) + "\n" + base + "1\tx\n";
      },
      [&](std::size_t i, Result&& r) {
        seen.push_back("result " + std::to_string(i) +
                       (r.rows() > 0 ? " " + std::string(r.text(0, 0)) : ""));
      });
  EXPECT_FALSE(late);
  EXPECT_EQ(seen, (std::vector<std::string>{"result 0 10", "copy 1", "result 1", "result 2 20",
                                            "copy 3", "result 3"}));
  EXPECT_EQ(count("t"), 4);
  EXPECT_TRUE(conn().idle());
}

TEST_F(CopyTest, ScriptThrowsStrictFailuresAndReturnsLaterOnes) {
  conn().exec("CREATE TABLE t (id int PRIMARY KEY)");
  const auto data = [](std::size_t) { return std::string("1\n"); };
  const auto ignore = [](std::size_t, Result&&) {};
  // A failing COPY (duplicate key) inside the strict part: thrown, nothing committed.
  try {
    run_script(conn(), "COPY t FROM STDIN; COPY t FROM STDIN", 2, data, ignore);
    FAIL() << "the script did not fail";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(e.sqlstate(), "23505");
  }
  EXPECT_EQ(count("t"), 0);
  EXPECT_TRUE(conn().idle());
  // After an explicit COMMIT, a failure is only reported.
  const auto late =
      run_script(conn(), "BEGIN; COPY t FROM STDIN; COMMIT; SELECT 1 / 0", 3, data, ignore);
  ASSERT_TRUE(late);
  EXPECT_NE(late->find("division by zero"), std::string::npos);
  EXPECT_EQ(count("t"), 1);
  EXPECT_TRUE(conn().idle());
  // copy_data throwing aborts its COPY and the rest of the script.
  EXPECT_THROW(
      run_script(
          conn(), "COPY t FROM STDIN; INSERT INTO t VALUES (7)", 2,
          [](std::size_t) -> std::string { throw InvalidArgument("client gave up"); }, ignore),
      InvalidArgument);
  EXPECT_EQ(count("t"), 1);
  EXPECT_TRUE(conn().idle());
}

TEST_F(CopyTest, CopyViolatingAConstraintThrowsAndStoresNothing) {
  conn().exec("CREATE TABLE t (id int PRIMARY KEY)");
  CopyWriter w = conn().copy_in("COPY t FROM STDIN");
  for (int i = 0; i < 1000; ++i) {
    const std::string id = std::to_string(i == 999 ? 3 : i);
    const std::array<std::optional<std::string_view>, 1> fields{id};
    w.row(fields);
  }
  try {
    w.finish();
    FAIL() << "COPY with a duplicate key succeeded";
  } catch (const ConstraintViolation& e) {
    EXPECT_EQ(e.sqlstate(), "23505");
  }
  EXPECT_TRUE(conn().idle());
  EXPECT_EQ(count("t"), 0);
}

TEST_F(CopyTest, ErrorInTheMiddleOfALargeCopySurfacesTheServerError) {
  // The server rejects row 1 while megabytes are still being sent.
  conn().exec("CREATE TABLE t (id int NOT NULL, v text)");
  const std::string filler(1000, 'f');
  try {
    CopyWriter w = conn().copy_in("COPY t FROM STDIN");
    for (int i = 0; i < 20'000; ++i) {
      const std::string id = std::to_string(i);
      const std::array<std::optional<std::string_view>, 2> fields{
          i == 1 ? std::nullopt : std::optional<std::string_view>(id), filler};
      w.row(fields);
    }
    w.finish();
    FAIL() << "COPY of a NULL into a NOT NULL column succeeded";
  } catch (const ConstraintViolation& e) {
    EXPECT_EQ(e.sqlstate(), "23502");
  }
  EXPECT_TRUE(conn().idle());
  EXPECT_EQ(count("t"), 0);
}

TEST_F(CopyTest, UnfinishedCopyIsAbortedAndStoresNothing) {
  conn().exec("CREATE TABLE t (id int)");
  {
    CopyWriter w = conn().copy_in("COPY t FROM STDIN");
    const std::array<std::optional<std::string_view>, 1> fields{"1"};
    w.row(fields);
  }
  EXPECT_TRUE(conn().idle());
  EXPECT_EQ(count("t"), 0);
}

TEST_F(CopyTest, CopyOfAMissingTableThrowsTheServerError) {
  try {
    CopyWriter w = conn().copy_in("COPY nope FROM STDIN");
    FAIL();
  } catch (const DatabaseError& e) {
    EXPECT_EQ(e.sqlstate(), "42P01");
  }
  EXPECT_TRUE(conn().idle());
}

}  // namespace
}  // namespace awa::pg
