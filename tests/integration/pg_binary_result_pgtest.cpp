// Result's binary format (Format::kBinary, the claim's): every type get<T> reads decodes to
// the same value as its text form, on the plain, the prepared and the pipelined paths.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/pipeline.hpp"
#include "support.hpp"

namespace awa::pg {
namespace {

using std::chrono::system_clock;

class BinaryResultTest : public testing::PgTest {};

// Every type the claim returns and a few more, with their edge values.
constexpr const char* kValues =
    "SELECT 'hello'::text AS s, 'v'::varchar AS vc, true AS yes, false AS no, "
    "(-32768)::int2 AS i16, (-2147483648)::int4 AS i32, "
    "(-9223372036854775808)::int8 AS i64min, 9223372036854775807::int8 AS i64max, "
    "7::int2 AS small, 0.1::float8 AS d, 1.5::float4 AS f, '-Infinity'::float8 AS ninf, "
    "'2026-11-30 04:45:01.123456+00'::timestamptz AS ts, "
    "'1999-12-31 23:59:59.999999+00'::timestamptz AS ts_before_2000, "
    "'infinity'::timestamptz AS ts_inf, '2026-11-30 04:45:01'::timestamp AS ts_plain, "
    "'\\x00ff'::bytea AS b, '{\"a\": [1, \"x\"]}'::jsonb AS jb, '{\"a\":1}'::json AS j, "
    "'{a,\"b c\"}'::text[]::text AS tags, NULL::int8 AS n";

void expect_same_values(const Result& text, const Result& bin) {
  ASSERT_EQ(bin.rows(), 1);
  ASSERT_FALSE(text.binary(0));
  ASSERT_TRUE(bin.binary(0));
  for (const char* col : {"s", "vc", "jb", "j", "tags"}) {
    EXPECT_EQ(bin.get<std::string>(0, col), text.get<std::string>(0, col)) << col;
    EXPECT_EQ(bin.text(0, bin.column(col)), text.text(0, text.column(col))) << col;
  }
  EXPECT_EQ(bin.get<std::string_view>(0, "s"), "hello");
  EXPECT_TRUE(bin.get<bool>(0, "yes"));
  EXPECT_FALSE(bin.get<bool>(0, "no"));
  EXPECT_EQ(bin.get<std::int16_t>(0, "i16"), std::numeric_limits<std::int16_t>::min());
  EXPECT_EQ(bin.get<std::int32_t>(0, "i32"), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(bin.get<std::int64_t>(0, "i32"), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(bin.get<std::int64_t>(0, "i64min"), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(bin.get<std::int64_t>(0, "i64max"), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(bin.get<std::int16_t>(0, "small"), 7);
  EXPECT_EQ(bin.get<std::int64_t>(0, "small"), 7);
  EXPECT_EQ(bin.get<double>(0, "d"), text.get<double>(0, "d"));
  EXPECT_EQ(bin.get<double>(0, "f"), 1.5);
  EXPECT_EQ(bin.get<double>(0, "ninf"), -std::numeric_limits<double>::infinity());
  for (const char* col : {"ts", "ts_before_2000", "ts_inf", "ts_plain"}) {
    EXPECT_EQ(bin.get<system_clock::time_point>(0, col), text.get<system_clock::time_point>(0, col))
        << col;
  }
  using namespace std::chrono;
  EXPECT_EQ(
      bin.get<system_clock::time_point>(0, "ts"),
      sys_days{year{2026} / 11 / 30} + hours{4} + minutes{45} + seconds{1} + microseconds{123456});
  EXPECT_EQ(bin.get<system_clock::time_point>(0, "ts_inf"), system_clock::time_point::max());
  EXPECT_EQ(bin.get<Bytea>(0, "b").bytes, std::string("\0\xff", 2));
  EXPECT_EQ(bin.get<std::string>(0, "jb"), R"({"a": [1, "x"]})");
  EXPECT_TRUE(bin.is_null(0, bin.column("n")));
  EXPECT_EQ(bin.get_opt<std::int64_t>(0, "n"), std::nullopt);
  EXPECT_EQ(bin.text(0, bin.column("n")), "");
}

TEST_F(BinaryResultTest, EveryTypeReadsAsItsTextFormDoes) {
  const Result text = conn().exec(kValues, Params{});
  expect_same_values(text, conn().exec(kValues, Params{}, Format::kBinary));
  // Prepared (the claim's path), twice: the second run executes the cached statement.
  for (int i = 0; i < 2; ++i) {
    expect_same_values(text, conn().exec_cached(kValues, Params{}, Format::kBinary));
  }
  auto p = conn().pipeline();
  p.add(kValues, Params{}, Format::kBinary);
  p.add(kValues, Params{});
  const auto results = p.run();
  expect_same_values(results[1], results[0]);
}

TEST_F(BinaryResultTest, MismatchedTypesAreErrorsNamingTheColumnAndTheType) {
  const Result r = conn().exec(
      "SELECT 70000::int4 AS big, 'abc'::text AS word, now() AS ts, '\\x01'::bytea AS b, "
      "1::int8 AS one",
      Params{}, Format::kBinary);
  try {
    (void)r.get<std::int16_t>(0, "big");  // out of range
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"big\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("OID 23"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)r.get<std::int64_t>(0, "word"), Error);
  EXPECT_THROW((void)r.get<system_clock::time_point>(0, "one"), Error);
  EXPECT_THROW((void)r.get<bool>(0, "one"), Error);
  EXPECT_THROW((void)r.get<double>(0, "one"), Error);
  EXPECT_THROW((void)r.get<Bytea>(0, "word"), Error);
  EXPECT_THROW((void)r.get<std::string>(0, "ts"), Error);
  // A binary value has no text unless its type is textual.
  try {
    (void)r.text(0, r.column("b"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("binary"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)r.binary(9), Error);
}

TEST_F(BinaryResultTest, TimestampsOutsideTheClocksRangeAreErrors) {
  // system_clock's nanoseconds end in 2262: the text path refuses these too.
  const Result r = conn().exec(
      "SELECT '2300-01-01 00:00:00+00'::timestamptz AS late, "
      "'1600-01-01 00:00:00+00'::timestamptz AS early",
      Params{}, Format::kBinary);
  EXPECT_THROW((void)r.get<system_clock::time_point>(0, "late"), Error);
  EXPECT_THROW((void)r.get<system_clock::time_point>(0, "early"), Error);
}

}  // namespace
}  // namespace awa::pg
