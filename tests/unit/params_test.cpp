#include "pg/params.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>

#include "awa/error.hpp"
#include "pg/result.hpp"

namespace awa::pg {
namespace {

using std::chrono::system_clock;

std::string at(const Params& p, std::size_t i) { return p.value(i).value(); }

TEST(ParamsTest, EncodesByteaAsHex) {
  const std::array<std::byte, 4> bytes{std::byte{0x00}, std::byte{0x7f}, std::byte{0x80},
                                       std::byte{0xff}};
  Params p;
  p.add_bytea(bytes).add_bytea(std::string_view("\\\0a", 3)).add_bytea(std::string_view());
  EXPECT_EQ(at(p, 0), "\\x007f80ff");
  EXPECT_EQ(at(p, 1), "\\x5c0061");
  EXPECT_EQ(at(p, 2), "\\x");
  p.add(Bytea{"AB"});
  EXPECT_EQ(at(p, 3), "\\x4142");
}

TEST(ParamsTest, EncodesTimePointAsUtcWithMicroseconds) {
  using namespace std::chrono;
  const auto tp = sys_days{year{2026} / 11 / 30} + hours{4} + minutes{45} + seconds{1} +
                  microseconds{123456} + nanoseconds{789};
  Params p;
  p.add(time_point_cast<system_clock::duration>(tp));
  p.add(system_clock::time_point{});
  // Before 1970: floor, not truncation toward zero.
  p.add(system_clock::time_point{} - microseconds{1});
  EXPECT_EQ(at(p, 0), "2026-11-30 04:45:01.123456+00");
  EXPECT_EQ(at(p, 1), "1970-01-01 00:00:00.000000+00");
  EXPECT_EQ(at(p, 2), "1969-12-31 23:59:59.999999+00");
}

TEST(ParamsTest, EncodesDoubleWithFullPrecision) {
  Params p;
  p.add(0.1).add(1.0 / 3.0).add(-2.5e-300).add(std::numeric_limits<double>::infinity());
  p.add(-std::numeric_limits<double>::infinity()).add(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(at(p, 0), "0.1");
  EXPECT_EQ(std::stod(at(p, 1)), 1.0 / 3.0);
  EXPECT_EQ(at(p, 1), "0.3333333333333333");
  EXPECT_EQ(at(p, 2), "-2.5e-300");
  EXPECT_EQ(at(p, 3), "Infinity");
  EXPECT_EQ(at(p, 4), "-Infinity");
  EXPECT_EQ(at(p, 5), "NaN");
}

TEST(ParamsTest, EncodesNullAsNullPointer) {
  Params p = make_params(1, std::nullopt, "x", std::optional<std::int64_t>{},
                         std::optional<std::int64_t>{5});
  ASSERT_EQ(p.size(), 5u);
  const char* const* v = p.values();
  EXPECT_STREQ(v[0], "1");
  EXPECT_EQ(v[1], nullptr);
  EXPECT_STREQ(v[2], "x");
  EXPECT_EQ(v[3], nullptr);
  EXPECT_STREQ(v[4], "5");
}

TEST(ParamsTest, EncodesIntegersAndBooleans) {
  Params p;
  p.add(std::numeric_limits<std::int64_t>::min())
      .add(std::numeric_limits<std::int64_t>::max())
      .add(std::int16_t{-7})
      .add(true)
      .add(false);
  EXPECT_EQ(at(p, 0), "-9223372036854775808");
  EXPECT_EQ(at(p, 1), "9223372036854775807");
  EXPECT_EQ(at(p, 2), "-7");
  EXPECT_EQ(at(p, 3), "true");
  EXPECT_EQ(at(p, 4), "false");
  EXPECT_THROW(p.add(std::numeric_limits<std::uint64_t>::max()), InvalidArgument);
}

TEST(ParamsTest, RejectsTextWithNulByte) {
  Params p;
  EXPECT_THROW(p.add(std::string_view("a\0b", 3)), InvalidArgument);
  EXPECT_EQ(p.size(), 0u);
}

TEST(ParamsTest, CopiedParamsPointAtTheirOwnStorage) {
  Params a;
  a.add("hello");
  (void)a.values();
  Params b = a;
  a = Params();
  EXPECT_STREQ(b.values()[0], "hello");
}

}  // namespace
}  // namespace awa::pg
