// Cron expression parsing without a database (src/storage/cron.cpp): fields, lists,
// ranges, steps, names, the seconds field, macros, @every and the refusals naming the
// field. cron_next's walk over these sets is tested against PostgreSQL in
// tests/integration/periodic_pgtest.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "awa/error.hpp"
#include "storage/cron.hpp"

namespace awa::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int> range(int lo, int hi, int step = 1) {
  std::vector<int> out;
  for (int v = lo; v <= hi; v += step) out.push_back(v);
  return out;
}

std::string error_of(const std::string& expr) {
  try {
    parse_cron(expr);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(CronTest, FiveFieldsGetSecondZeroAndStarsAreFullSets) {
  const auto s = parse_cron("* * * * *");
  EXPECT_THAT(s.seconds, ElementsAre(0));
  EXPECT_EQ(s.minutes, range(0, 59));
  EXPECT_EQ(s.hours, range(0, 23));
  EXPECT_EQ(s.doms, range(1, 31));
  EXPECT_EQ(s.months, range(1, 12));
  EXPECT_EQ(s.dows, range(0, 6));
  EXPECT_FALSE(s.dom_restricted);
  EXPECT_FALSE(s.dow_restricted);
  EXPECT_FALSE(s.every_seconds.has_value());
}

TEST(CronTest, ListsRangesAndSteps) {
  const auto s = parse_cron("*/15 1-10/3,22 5,1,5 */5 1-5");
  EXPECT_THAT(s.minutes, ElementsAre(0, 15, 30, 45));
  EXPECT_THAT(s.hours, ElementsAre(1, 4, 7, 10, 22));
  EXPECT_THAT(s.doms, ElementsAre(1, 5));  // sorted, duplicates dropped
  EXPECT_THAT(s.months, ElementsAre(1, 6, 11));
  EXPECT_THAT(s.dows, ElementsAre(1, 2, 3, 4, 5));
  EXPECT_TRUE(s.dom_restricted);
  EXPECT_TRUE(s.dow_restricted);
}

TEST(CronTest, ValueWithStepRunsToTheFieldsMaximum) {
  EXPECT_THAT(parse_cron("5/20 * * * *").minutes, ElementsAre(5, 25, 45));
}

TEST(CronTest, SixFieldsStartWithSeconds) {
  const auto s = parse_cron("*/20 30 9 * * *");
  EXPECT_THAT(s.seconds, ElementsAre(0, 20, 40));
  EXPECT_THAT(s.minutes, ElementsAre(30));
  EXPECT_THAT(s.hours, ElementsAre(9));
}

TEST(CronTest, MonthAndDayNamesInAnyCaseAndInRanges) {
  const auto s = parse_cron("0 9 * jan,Mar-MAY mon-FRI");
  EXPECT_THAT(s.months, ElementsAre(1, 3, 4, 5));
  EXPECT_THAT(s.dows, ElementsAre(1, 2, 3, 4, 5));
  EXPECT_THAT(parse_cron("0 0 * * SUN,sat").dows, ElementsAre(0, 6));
}

TEST(CronTest, DayOfWeekSevenIsSunday) {
  EXPECT_THAT(parse_cron("0 0 * * 7").dows, ElementsAre(0));
  EXPECT_THAT(parse_cron("0 0 * * 5-7").dows, ElementsAre(0, 5, 6));
}

TEST(CronTest, RestrictionFollowsVixieCronsStarRule) {
  // Only a field starting with '*' (or '?') is unrestricted, as in Vixie cron: `*/2` too.
  auto s = parse_cron("0 0 13 * FRI");
  EXPECT_TRUE(s.dom_restricted);
  EXPECT_TRUE(s.dow_restricted);
  s = parse_cron("0 0 */2 * MON");
  EXPECT_FALSE(s.dom_restricted);
  EXPECT_TRUE(s.dow_restricted);
  s = parse_cron("0 0 ? * 1");
  EXPECT_FALSE(s.dom_restricted);
  EXPECT_EQ(s.doms, range(1, 31));
}

TEST(CronTest, MacrosExpandToTheirStandardFields) {
  const auto yearly = parse_cron("@yearly");
  EXPECT_THAT(yearly.minutes, ElementsAre(0));
  EXPECT_THAT(yearly.hours, ElementsAre(0));
  EXPECT_THAT(yearly.doms, ElementsAre(1));
  EXPECT_THAT(yearly.months, ElementsAre(1));
  EXPECT_EQ(parse_cron("@annually").months, yearly.months);
  EXPECT_THAT(parse_cron("@monthly").doms, ElementsAre(1));
  EXPECT_EQ(parse_cron("@monthly").months, range(1, 12));
  EXPECT_THAT(parse_cron("@weekly").dows, ElementsAre(0));
  EXPECT_TRUE(parse_cron("@weekly").dow_restricted);
  EXPECT_THAT(parse_cron("@daily").hours, ElementsAre(0));
  EXPECT_EQ(parse_cron("@midnight").hours, parse_cron("@daily").hours);
  EXPECT_EQ(parse_cron("@hourly").hours, range(0, 23));
  EXPECT_THAT(parse_cron("@HOURLY").minutes, ElementsAre(0));
}

TEST(CronTest, EveryTakesSecondsMinutesAndHours) {
  EXPECT_EQ(parse_cron("@every 30s").every_seconds, 30);
  EXPECT_EQ(parse_cron("@every 90m").every_seconds, 5400);
  EXPECT_EQ(parse_cron("@every 2h").every_seconds, 7200);
  EXPECT_EQ(parse_cron("  @every 1h30m5s ").every_seconds, 5405);
  EXPECT_TRUE(parse_cron("@every 1s").seconds.empty());
}

TEST(CronTest, RefusalsNameTheFieldAndTheText) {
  EXPECT_THAT(error_of("0 25 * * *"), HasSubstr("hour field \"25\": 25 is outside 0-23"));
  EXPECT_THAT(error_of("60 * * * *"), HasSubstr("minute field \"60\""));
  EXPECT_THAT(error_of("0 0 0 * *"), HasSubstr("day-of-month field \"0\": 0 is outside 1-31"));
  EXPECT_THAT(error_of("0 0 * 13 *"), HasSubstr("month field \"13\""));
  EXPECT_THAT(error_of("0 0 * * 8"), HasSubstr("day-of-week field \"8\""));
  EXPECT_THAT(error_of("0 0 * FOO *"), HasSubstr("month field \"FOO\""));
  EXPECT_THAT(error_of("0 0 * * MONDAY"), HasSubstr("day-of-week field \"MONDAY\""));
  EXPECT_THAT(error_of("*/0 * * * *"), HasSubstr("minute field \"*/0\": step must be 1-60"));
  EXPECT_THAT(error_of("1-x * * * *"), HasSubstr("\"x\" is not a number"));
  EXPECT_THAT(error_of("10-5 * * * *"), HasSubstr("runs backwards"));
  EXPECT_THAT(error_of("1,,2 * * * *"), HasSubstr("empty list item"));
  EXPECT_THAT(error_of("61 * * * * *"), HasSubstr("second field \"61\""));
  EXPECT_THAT(error_of("* * * *"), HasSubstr("4 fields; expected 5"));
  EXPECT_THAT(error_of("* * * * * * *"), HasSubstr("7 fields"));
  EXPECT_THAT(error_of(""), HasSubstr("empty"));
  EXPECT_THAT(error_of("@sometimes"), HasSubstr("unknown macro @sometimes"));
  EXPECT_THAT(error_of("@daily 5"), HasSubstr("@daily takes no fields"));
  EXPECT_THAT(error_of("@every"), HasSubstr("needs a duration"));
  EXPECT_THAT(error_of("@every 0s"), HasSubstr("at least 1s"));
  EXPECT_THAT(error_of("@every 5d"), HasSubstr("unknown unit 'd'"));
  EXPECT_THAT(error_of("@every 10"), HasSubstr("<number><unit>"));
  EXPECT_THAT(error_of("@every 9000h"), HasSubstr("at most 8784h"));
  EXPECT_THAT(error_of("0 0 25 * *x"), HasSubstr("day-of-week field"));
  // Every refusal quotes the whole expression first.
  EXPECT_THAT(error_of("0 25 * * *"), HasSubstr("cron expression \"0 25 * * *\""));
}

TEST(CronTest, ADayNoChosenMonthHasNeverFiresAndIsRefused) {
  EXPECT_THAT(error_of("0 0 30 2 *"), HasSubstr("would never fire"));
  EXPECT_THAT(error_of("0 0 31 4,6,9,11 *"), HasSubstr("would never fire"));
  // Feb 29 comes in leap years; with a restricted day of week the OR rule fires anyway.
  EXPECT_NO_THROW(parse_cron("0 0 29 2 *"));
  EXPECT_NO_THROW(parse_cron("0 0 30 2 MON"));
}

TEST(CronTest, ArrayLiteralForPostgres) {
  EXPECT_EQ(int_array_literal({}), "{}");
  EXPECT_EQ(int_array_literal({0, 15, 30}), "{0,15,30}");
}

}  // namespace
}  // namespace awa::storage
