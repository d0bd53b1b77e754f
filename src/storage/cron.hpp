// Cron expressions of periodic jobs (docs/scheduling.md), parsed in C++ into the sets
// the SQL function cron_next (sql/functions/0100_cron.sql) walks. The parsed form is
// stored in the schedule's row, so the database never parses cron text.
//
// Accepted:
//   - 5 fields "min hour dom month dow", or 6 fields "sec min hour dom month dow";
//     each field a comma list of `*`, N, N-M, with an optional step (`*/5`, `1-10/2`,
//     `5/15` = 5 to the field's maximum every 15); month names JAN..DEC and day names
//     SUN..SAT (any case, also in ranges); day of week 0-7 with 7 = Sunday; `?` means
//     `*` in the day-of-month and day-of-week fields.
//   - day of month and day of week: when both are restricted a day matches if EITHER
//     does (Vixie cron's rule); otherwise both must. As in Vixie cron, a field that
//     starts with `*` (including `*/2`) counts as unrestricted.
//   - macros @yearly (= @annually), @monthly, @weekly, @daily (= @midnight), @hourly;
//   - `@every D`: D one or more <number><unit> groups, units s, m, h (`30s`, `90m`,
//     `1h30m`), from 1 s to 8784 h. Fires at the multiples of D since the Unix epoch
//     (UTC), so the series does not depend on when the schedule was added or fired.
// Anything else: InvalidArgument naming the field and the text.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace awa::storage {

struct CronSpec {
  // Sorted, without duplicates. Empty for an @every schedule.
  std::vector<int> seconds;  // 0-59; {0} for a 5-field expression
  std::vector<int> minutes;  // 0-59
  std::vector<int> hours;    // 0-23
  std::vector<int> doms;     // 1-31
  std::vector<int> months;   // 1-12
  std::vector<int> dows;     // 0-6, 0 = Sunday
  bool dom_restricted = false;
  bool dow_restricted = false;
  std::optional<std::int64_t> every_seconds;  // set for @every
};

// Throws InvalidArgument: `cron expression "<text>": <field> field "<item>": <why>`.
CronSpec parse_cron(std::string_view expression);

// "{0,15,30,45}": a PostgreSQL integer[] literal.
std::string int_array_literal(const std::vector<int>& values);

}  // namespace awa::storage
