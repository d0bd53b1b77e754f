// Periodic jobs in SQL (issue 14, docs/scheduling.md): cron_next against PostgreSQL's
// time zones (monthly, yearly, Feb 29, @every, seconds, zones, both DST transitions), and
// fire_due_periodic: exactly one job per occurrence under two concurrent firers, a fire
// rolled back mid-way (leader fail-over), coalesce vs catch-up after downtime, paused
// schedules, trigger, and a failing schedule that does not block the others.
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "awa/error.hpp"
#include "periodic_support.hpp"
#include "storage/cron.hpp"

namespace awa::testing {
namespace {

class CronNextTest : public PeriodicTest {
 protected:
  // cron_next(expr in tz, after) as ISO 8601 UTC ("" for NULL).
  std::string next(const std::string& expr, const std::string& after,
                   const std::string& tz = "UTC") {
    const auto s = storage::parse_cron(expr);
    const auto r = conn().query(
        "SELECT iso_utc(cron_next($1::integer[], $2::integer[], $3::integer[], $4::integer[], "
        "$5::integer[], $6::integer[], $7::boolean, $8::boolean, $9::bigint, $10, "
        "$11::timestamptz))",
        storage::int_array_literal(s.seconds), storage::int_array_literal(s.minutes),
        storage::int_array_literal(s.hours), storage::int_array_literal(s.doms),
        storage::int_array_literal(s.months), storage::int_array_literal(s.dows), s.dom_restricted,
        s.dow_restricted, s.every_seconds, tz, after);
    return r.get_opt<std::string>(0, 0).value_or("");
  }

  // The occurrences after `after`, `n` of them, in order.
  std::vector<std::string> series(const std::string& expr, std::string after, int n,
                                  const std::string& tz) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
      after = next(expr, after, tz);
      out.push_back(after);
    }
    return out;
  }
};

TEST_F(CronNextTest, MinutesHoursAndStepsInUtc) {
  EXPECT_EQ(next("*/15 * * * *", "2026-01-01 10:07:30+00"), "2026-01-01T10:15:00.000Z");
  EXPECT_EQ(next("*/15 * * * *", "2026-01-01 10:15:00+00"), "2026-01-01T10:30:00.000Z");
  EXPECT_EQ(next("0 9-17/4 * * *", "2026-01-01 13:00:00+00"), "2026-01-01T17:00:00.000Z");
  EXPECT_EQ(next("0 9-17/4 * * *", "2026-01-01 17:00:00+00"), "2026-01-02T09:00:00.000Z");
  EXPECT_EQ(next("@hourly", "2026-12-31 23:59:59+00"), "2027-01-01T00:00:00.000Z");
}

TEST_F(CronNextTest, LongIntervalsFire) {
  EXPECT_EQ(next("@monthly", "2026-01-31 12:00+00"), "2026-02-01T00:00:00.000Z");
  EXPECT_EQ(next("0 0 31 * *", "2026-04-01 00:00+00"), "2026-05-31T00:00:00.000Z");
  EXPECT_EQ(next("@yearly", "2026-06-01 00:00+00"), "2027-01-01T00:00:00.000Z");
  EXPECT_EQ(next("@weekly", "2026-01-01 00:00+00"), "2026-01-04T00:00:00.000Z");  // a Sunday
  // Feb 29: the next leap year, and across 2100 (not a leap year): 8 years.
  EXPECT_EQ(next("0 0 29 2 *", "2026-03-01 00:00+00"), "2028-02-29T00:00:00.000Z");
  EXPECT_EQ(next("0 0 29 2 *", "2096-03-01 00:00+00"), "2104-02-29T00:00:00.000Z");
}

TEST_F(CronNextTest, DayOfMonthAndDayOfWeekFollowVixieCron) {
  // Both restricted: either matches (2026-01-02 is a Friday).
  EXPECT_EQ(next("0 12 13 * FRI", "2026-01-01 00:00+00"), "2026-01-02T12:00:00.000Z");
  EXPECT_EQ(next("0 12 13 * FRI", "2026-01-12 00:00+00"), "2026-01-13T12:00:00.000Z");
  // `*/2` starts with '*': unrestricted, so both must match: an odd day that is a Friday.
  EXPECT_EQ(next("0 12 */2 * FRI", "2026-01-01 00:00+00"), "2026-01-09T12:00:00.000Z");
  EXPECT_EQ(next("0 0 * * 7", "2026-01-01 00:00+00"), "2026-01-04T00:00:00.000Z");
}

TEST_F(CronNextTest, SecondsFieldAndEvery) {
  EXPECT_EQ(next("*/20 30 9 * * *", "2026-01-01 09:30:20+00"), "2026-01-01T09:30:40.000Z");
  EXPECT_EQ(next("*/20 30 9 * * *", "2026-01-01 09:30:40+00"), "2026-01-02T09:30:00.000Z");
  // @every: multiples of the interval since the Unix epoch.
  EXPECT_EQ(next("@every 30s", "2026-01-01 10:00:29.5+00"), "2026-01-01T10:00:30.000Z");
  EXPECT_EQ(next("@every 30s", "2026-01-01 10:00:30+00"), "2026-01-01T10:01:00.000Z");
  EXPECT_EQ(next("@every 90m", "2026-01-01 01:00+00"), "2026-01-01T01:30:00.000Z");
  EXPECT_EQ(next("@every 90m", "2026-01-01 01:30+00"), "2026-01-01T03:00:00.000Z");
}

TEST_F(CronNextTest, WallClockTimesInTheSchedulesZone) {
  // 09:00 Berlin on weekdays: Friday 2026-01-02, then Monday (CET = UTC+1).
  EXPECT_EQ(next("0 9 * * MON-FRI", "2026-01-02 07:00+00", "Europe/Berlin"),
            "2026-01-02T08:00:00.000Z");
  EXPECT_EQ(next("0 9 * * MON-FRI", "2026-01-02 08:00+00", "Europe/Berlin"),
            "2026-01-05T08:00:00.000Z");
  // Summer time (CEST = UTC+2).
  EXPECT_EQ(next("0 9 * * *", "2026-07-01 00:00+00", "Europe/Berlin"), "2026-07-01T07:00:00.000Z");
  EXPECT_EQ(next("@daily", "2026-01-01 00:00+00", "Asia/Kolkata"), "2026-01-01T18:30:00.000Z");
  // The local day decides: 23:30 UTC on Jan 1 is 08:30 on Jan 2 in Tokyo (UTC+9).
  EXPECT_EQ(next("0 9 2 1 *", "2026-01-01 23:30+00", "Asia/Tokyo"), "2026-01-02T00:00:00.000Z");
  EXPECT_EQ(next("0 9 2 1 *", "2026-01-02 00:00+00", "Asia/Tokyo"), "2027-01-02T00:00:00.000Z");
}

TEST_F(CronNextTest, SpringForwardGapFiresOnceAtThePostgresMapping) {
  const std::string ny = "America/New_York";
  // 02:30 does not exist on 2026-03-08; PostgreSQL reads it as 03:30 EDT = 07:30 UTC.
  EXPECT_EQ(next("30 2 * * *", "2026-03-07 08:00+00", ny), "2026-03-08T07:30:00.000Z");
  EXPECT_EQ(next("30 2 * * *", "2026-03-08 07:30+00", ny), "2026-03-09T06:30:00.000Z");
  // Every half hour across the gap: each instant once, none skipped or repeated (02:00
  // and 03:00 local are both 07:00 UTC).
  EXPECT_EQ(series("*/30 * * * *", "2026-03-08 06:00+00", 5, ny),
            (std::vector<std::string>{"2026-03-08T06:30:00.000Z", "2026-03-08T07:00:00.000Z",
                                      "2026-03-08T07:30:00.000Z", "2026-03-08T08:00:00.000Z",
                                      "2026-03-08T08:30:00.000Z"}));
}

TEST_F(CronNextTest, FallBackOverlapFiresExactlyOnce) {
  const std::string ny = "America/New_York";
  // 01:30 happens twice on 2026-11-01; PostgreSQL reads it as standard time (EST):
  // 06:30 UTC. The first pass (01:30 EDT = 05:30 UTC) never fires.
  EXPECT_EQ(next("30 1 * * *", "2026-11-01 04:00+00", ny), "2026-11-01T06:30:00.000Z");
  EXPECT_EQ(next("30 1 * * *", "2026-11-01 05:30+00", ny), "2026-11-01T06:30:00.000Z");
  EXPECT_EQ(next("30 1 * * *", "2026-11-01 06:30+00", ny), "2026-11-02T06:30:00.000Z");
  EXPECT_EQ(series("*/30 * * * *", "2026-11-01 03:45+00", 6, ny),
            (std::vector<std::string>{"2026-11-01T04:00:00.000Z", "2026-11-01T04:30:00.000Z",
                                      "2026-11-01T06:00:00.000Z", "2026-11-01T06:30:00.000Z",
                                      "2026-11-01T07:00:00.000Z", "2026-11-01T07:30:00.000Z"}));
}

TEST_F(CronNextTest, UnknownZoneIsRefusedWith22023) {
  try {
    next("0 9 * * *", "2026-01-01 00:00+00", "Mars/Olympus_Mons");
    FAIL() << "accepted an unknown zone";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(e.sqlstate(), "22023");
  }
  PeriodicJob j = job("mars", "@every 1m");
  j.options.timezone = "Mars/Olympus_Mons";
  try {
    add(j);
    FAIL() << "accepted an unknown zone";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown time zone \"Mars/Olympus_Mons\""),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("SQLSTATE 22023"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs"), 0);
}

// Exactly once: two connections fire in a loop, released together, against schedules
// made due 20 s back; every occurrence is enqueued once and catch-up ones have no gap.
TEST_F(PeriodicTest, TwoConcurrentFirersEnqueueEachOccurrenceOnce) {
  for (int i = 0; i < 6; ++i) {
    PeriodicJob j = job("every" + std::to_string(i), "@every 1s", "q" + std::to_string(i % 3));
    j.options.catch_up = i % 2 == 0;
    add(j);
  }
  conn().exec(
      "UPDATE periodic_jobs SET next_fire_at = date_trunc('second', now()) - interval '20s'");
  const auto start =
      conn().exec("SELECT iso_utc(min(next_fire_at)) FROM periodic_jobs").get<std::string>(0, 0);
  std::latch go(2);
  std::atomic<std::int64_t> rows{0};
  auto firer = [&] {
    auto c = connect_new();
    go.arrive_and_wait();
    for (int i = 0; i < 40; ++i) rows += fire(c, 2, 3);
  };
  std::thread a(firer);
  std::thread b(firer);
  a.join();
  b.join();
  EXPECT_EQ(duplicate_occurrences(), 0);
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE metadata ? 'periodic'"), rows.load());
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs WHERE last_error IS NOT NULL"), 0);
  // Catch-up schedules: every second from the start to the last fired, once each; and
  // last_job_id is the job of last_fired_at.
  for (const char* name : {"every0", "every2", "every4"}) {
    const auto r = conn().query(
        "SELECT count(*), iso_utc(min(run_at)), "
        "       extract(epoch FROM max(run_at) - min(run_at))::bigint + 1, "
        "       (SELECT last_job_id FROM periodic_jobs WHERE name = $1), "
        "       max(job_id) FILTER (WHERE run_at = (SELECT last_fired_at FROM periodic_jobs "
        "                                            WHERE name = $1)) "
        "FROM ready_entries WHERE metadata->>'periodic' = $1",
        std::string(name));
    EXPECT_GE(r.get<std::int64_t>(0, 0), 20) << name;  // 3 per call: 40 calls x 2 firers
    EXPECT_EQ(r.get<std::string>(0, 1), start) << name;
    EXPECT_EQ(r.get<std::int64_t>(0, 0), r.get<std::int64_t>(0, 2)) << name << ": a gap";
    EXPECT_EQ(r.get<std::int64_t>(0, 3), r.get<std::int64_t>(0, 4)) << name;
  }
  // Coalesce schedules: one job for the 20 missed seconds, then one per later second at
  // most; never two for one occurrence.
  for (const char* name : {"every1", "every3", "every5"}) {
    EXPECT_GE(jobs_of(name), 1) << name;
    EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE metadata->>'periodic' = '" +
                    std::string(name) + "' AND run_at < '" + start + "'::timestamptz"),
              0);
  }
}

// A firer holding a schedule (mid-fire, uncommitted) makes the other skip it; after it
// commits, the occurrence is done; if it rolls back (a crash, a lost leader), the
// occurrence is still due and fires once elsewhere.
TEST_F(PeriodicTest, AFireIsAtomicAcrossFirersAndRollbacks) {
  add(job("hourly", "@hourly"));
  due_at("hourly", "date_trunc('hour', now())");
  auto a = connect_new();
  auto b = connect_new();
  // A firer that waited for the other's row lock would hang this test: fail instead.
  a.exec("SET lock_timeout = '5s'");
  b.exec("SET lock_timeout = '5s'");

  a.exec("BEGIN");
  EXPECT_EQ(fire(a), 1);
  EXPECT_EQ(fire(b), 0);  // locked by a: skipped, not waited for
  a.exec("ROLLBACK");
  EXPECT_EQ(jobs_of("hourly"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs WHERE next_fire_at <= now()"), 1);

  b.exec("BEGIN");
  EXPECT_EQ(fire(b), 1);
  EXPECT_EQ(fire(a), 0);
  b.exec("COMMIT");
  EXPECT_EQ(fire(a), 0);  // advanced: nothing due
  EXPECT_EQ(jobs_of("hourly"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs WHERE next_fire_at > now() AND "
                  "last_fired_at = date_trunc('hour', now()) AND last_job_id IS NOT NULL"),
            1);
}

TEST_F(PeriodicTest, CoalesceFiresOnceForTheLatestMissedOccurrence) {
  add(job("minutely", "* * * * *"));
  due_at("minutely", "date_trunc('minute', now()) - interval '3 hours'");
  EXPECT_EQ(fire(conn()), 1);
  EXPECT_EQ(jobs_of("minutely"), 1);
  // The job is for the latest occurrence <= now, and the next one is after now.
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs p JOIN ready_entries r "
                  "ON r.job_id = p.last_job_id AND r.run_at = p.last_fired_at "
                  "WHERE p.last_fired_at <= now() AND p.last_fired_at > now() - interval '1 min' "
                  "AND p.next_fire_at = p.last_fired_at + interval '1 min' "
                  "AND r.metadata->>'occurrence' = iso_utc(p.last_fired_at)"),
            1);
  EXPECT_EQ(fire(conn()), 0);
}

TEST_F(PeriodicTest, CatchUpFiresEveryMissedOccurrenceBoundedPerCall) {
  PeriodicJob j = job("minutely", "* * * * *");
  j.options.catch_up = true;
  add(j);
  due_at("minutely", "date_trunc('minute', now()) - interval '3 hours'");
  EXPECT_EQ(fire(conn(), 100, 100), 100);
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs WHERE next_fire_at = "
                  "date_trunc('minute', now()) - interval '3 hours' + interval '100 min'"),
            1);
  // The rest (81 or so, as the clock moves) in the next calls; then nothing is due.
  for (int i = 0; i < 5; ++i) fire(conn(), 100, 100);
  EXPECT_EQ(fire(conn()), 0);
  EXPECT_EQ(duplicate_occurrences(), 0);
  EXPECT_EQ(count("SELECT count(*) - (extract(epoch FROM max(run_at) - min(run_at)) / 60 + 1)"
                  "::bigint FROM ready_entries WHERE metadata->>'periodic' = 'minutely'"),
            0);
  EXPECT_GE(jobs_of("minutely"), 181);
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs WHERE next_fire_at > now() "
                  "AND last_fired_at <= now() AND last_fired_at > now() - interval '1 min'"),
            1);
}

TEST_F(PeriodicTest, PausedSchedulesDoNotFireAndResumeSkipsThePausedStretch) {
  add(job("p", "* * * * *"));
  ASSERT_TRUE(admin_->pause(*pub_, "p"));
  due_at("p", "now() - interval '1 hour'");
  EXPECT_EQ(fire(conn()), 0);
  EXPECT_EQ(jobs_of("p"), 0);
  ASSERT_TRUE(admin_->resume(*pub_, "p"));
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs WHERE next_fire_at > now()"), 1);
  EXPECT_EQ(fire(conn()), 0);
  EXPECT_FALSE(admin_->pause(*pub_, "nope"));
  EXPECT_FALSE(admin_->resume(*pub_, "nope"));
}

TEST_F(PeriodicTest, TriggerEnqueuesNowWithoutTouchingTheSeries) {
  add(job("t", "@yearly"));
  ASSERT_TRUE(admin_->pause(*pub_, "t"));
  const auto before =
      conn().exec("SELECT next_fire_at::text FROM periodic_jobs").get<std::string>(0, 0);
  const auto id = admin_->trigger(*pub_, "t");
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE job_id = " + std::to_string(*id) +
                  " AND metadata->>'periodic' = 't' AND metadata ? 'triggered_at' "
                  "AND NOT metadata ? 'occurrence' AND queue_id = queue_id_of('periodic') AND kind "
                  "= 'noop'"),
            1);
  EXPECT_EQ(conn().exec("SELECT next_fire_at::text FROM periodic_jobs").get<std::string>(0, 0),
            before);
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs WHERE last_fired_at IS NULL "
                  "AND last_job_id IS NULL"),
            1);
  EXPECT_FALSE(admin_->trigger(*pub_, "nope").has_value());
}

// A schedule whose enqueue fails is reported and left due; the others fire.
TEST_F(PeriodicTest, AFailingScheduleDoesNotBlockTheOthers) {
  add(job("bad", "* * * * *"));
  add(job("good", "* * * * *"));
  // A queue name no producer would accept: insert_job_compat refuses it (22023).
  conn().exec("UPDATE periodic_jobs SET queue = 'no spaces allowed' WHERE name = 'bad'");
  conn().exec("UPDATE periodic_jobs SET next_fire_at = now() - interval '1 min'");
  const auto r = conn().exec(
      "SELECT name, job_id IS NULL, error FROM fire_due_periodic(100, 100) ORDER BY name");
  ASSERT_EQ(r.rows(), 2);
  EXPECT_EQ(r.get<std::string>(0, 0), "bad");
  EXPECT_TRUE(r.get<bool>(0, 1));
  EXPECT_NE(r.get<std::string>(0, 2).find("invalid queue name"), std::string::npos);
  EXPECT_EQ(r.get<std::string>(1, 0), "good");
  EXPECT_FALSE(r.get<bool>(1, 1));
  EXPECT_EQ(jobs_of("good"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs WHERE name = 'bad' "
                  "AND next_fire_at <= now() AND last_error LIKE '%SQLSTATE 22023%' "
                  "AND last_fired_at IS NULL"),
            1);
  const auto listed = admin_->list(*pub_);
  ASSERT_EQ(listed.size(), 2u);
  ASSERT_TRUE(listed[0].last_error.has_value());
  EXPECT_FALSE(listed[1].last_error.has_value());
}

}  // namespace
}  // namespace awa::testing
