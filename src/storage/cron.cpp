#include "storage/cron.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>

#include "awa/error.hpp"
#include "storage/validate.hpp"

namespace awa::storage {
namespace {

constexpr std::int64_t kMaxEverySeconds = 8784LL * 3600;  // a leap year

struct Field {
  const char* name;
  int lo;
  int hi;
  // Three-letter names of lo, lo+1, ...; nullptr when the field has none.
  const std::array<const char*, 12>* names;
  int names_base;
  int names_count;
  bool question_mark;  // `?` accepted as `*`
};

constexpr std::array<const char*, 12> kMonthNames = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                     "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<const char*, 12> kDayNames = {"SUN", "MON", "TUE", "WED", "THU", "FRI",
                                                   "SAT", "",    "",    "",    "",    ""};

constexpr Field kSecond{"second", 0, 59, nullptr, 0, 0, false};
constexpr Field kMinute{"minute", 0, 59, nullptr, 0, 0, false};
constexpr Field kHour{"hour", 0, 23, nullptr, 0, 0, false};
constexpr Field kDom{"day-of-month", 1, 31, nullptr, 0, 0, true};
constexpr Field kMonth{"month", 1, 12, &kMonthNames, 1, 12, false};
// 7 is Sunday too; folded into 0 after parsing.
constexpr Field kDow{"day-of-week", 0, 7, &kDayNames, 0, 7, true};

// Days in each month at most (February: 29, in leap years).
constexpr std::array<int, 12> kMonthDays = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

class Parser {
 public:
  explicit Parser(std::string_view expression) : expression_(expression) {}

  [[noreturn]] void fail(std::string_view field, std::string_view text,
                         std::string_view why) const {
    throw InvalidArgument(fmt::format("cron expression \"{}\": {} field \"{}\": {}",
                                      printable(expression_, 200), field, printable(text, 100),
                                      why));
  }

  [[noreturn]] void fail(std::string_view why) const {
    throw InvalidArgument(
        fmt::format("cron expression \"{}\": {}", printable(expression_, 200), why));
  }

  int value(const Field& f, std::string_view item, std::string_view text) const {
    if (text.empty()) fail(f.name, item, "missing a number");
    if (std::isdigit(static_cast<unsigned char>(text.front()))) {
      if (text.size() > 4 || !std::all_of(text.begin(), text.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c));
          })) {
        fail(f.name, item, fmt::format("\"{}\" is not a number", printable(text)));
      }
      int v = 0;
      for (const char c : text) v = v * 10 + (c - '0');
      if (v < f.lo || v > f.hi) {
        fail(f.name, item, fmt::format("{} is outside {}-{}", v, f.lo, f.hi));
      }
      return v;
    }
    if (f.names != nullptr && text.size() == 3) {
      std::string upper(text);
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      for (int i = 0; i < f.names_count; ++i) {
        if (upper == (*f.names)[static_cast<std::size_t>(i)]) return f.names_base + i;
      }
    }
    fail(f.name, item,
         f.names != nullptr
             ? fmt::format("\"{}\" is neither a number nor a {} name", printable(text),
                           f.names == &kMonthNames ? "month (JAN-DEC)" : "day (SUN-SAT)")
             : fmt::format("\"{}\" is not a number", printable(text)));
  }

  // The set of values of one field.
  std::vector<int> field(const Field& f, std::string_view text) const {
    std::vector<bool> set(static_cast<std::size_t>(f.hi + 1), false);
    std::size_t pos = 0;
    for (;;) {
      const auto comma = text.find(',', pos);
      const std::string_view item =
          text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
      this->item(f, item, set);
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    std::vector<int> out;
    for (int v = f.lo; v <= f.hi; ++v) {
      if (!set[static_cast<std::size_t>(v)]) continue;
      const int folded = (&f == &kDow && v == 7) ? 0 : v;
      if (std::find(out.begin(), out.end(), folded) == out.end()) out.push_back(folded);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  void item(const Field& f, std::string_view item, std::vector<bool>& set) const {
    if (item.empty()) fail(f.name, item, "empty list item (two commas, or a trailing comma?)");
    const auto slash = item.find('/');
    const std::string_view range = item.substr(0, slash);
    int step = 1;
    if (slash != std::string_view::npos) {
      const std::string_view step_text = item.substr(slash + 1);
      const int span = f.hi - f.lo + 1;
      if (step_text.empty() || step_text.size() > 4 ||
          !std::all_of(step_text.begin(), step_text.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        fail(f.name, item, "the step after '/' must be a number");
      }
      step = 0;
      for (const char c : step_text) step = step * 10 + (c - '0');
      if (step < 1 || step > span) fail(f.name, item, fmt::format("step must be 1-{}", span));
    }
    int first = 0;
    int last = 0;
    if (range == "*" || (f.question_mark && range == "?")) {
      first = f.lo;
      last = &f == &kDow ? 6 : f.hi;  // `*` is each day once
    } else if (const auto dash = range.find('-'); dash != std::string_view::npos) {
      first = value(f, item, range.substr(0, dash));
      last = value(f, item, range.substr(dash + 1));
      if (first > last) {
        fail(f.name, item,
             fmt::format("range {}-{} runs backwards (write it as two ranges)", first, last));
      }
    } else {
      first = value(f, item, range);
      last = slash != std::string_view::npos ? f.hi : first;
    }
    for (int v = first; v <= last; v += step) set[static_cast<std::size_t>(v)] = true;
  }

  std::string_view expression_;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_fields(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    const std::size_t start = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::int64_t parse_every(const Parser& p, std::string_view text) {
  if (text.empty()) p.fail("@every", text, "needs a duration such as 30s, 90m or 1h30m");
  std::int64_t total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == start || i - start > 9 || i == text.size()) {
      p.fail("@every", text, "use <number><unit> groups with units s, m or h (30s, 90m, 1h30m)");
    }
    std::int64_t n = 0;
    for (std::size_t k = start; k < i; ++k) n = n * 10 + (text[k] - '0');
    switch (std::tolower(static_cast<unsigned char>(text[i]))) {
      case 's':
        break;
      case 'm':
        n *= 60;
        break;
      case 'h':
        n *= 3600;
        break;
      default:
        p.fail("@every", text,
               fmt::format("unknown unit '{}': use s, m or h", printable(text.substr(i, 1))));
    }
    ++i;
    total += n;
    if (total > kMaxEverySeconds) p.fail("@every", text, "the interval must be at most 8784h");
  }
  if (total < 1) p.fail("@every", text, "the interval must be at least 1s");
  return total;
}

}  // namespace

CronSpec parse_cron(std::string_view expression) {
  const Parser p(expression);
  std::string_view text = trim(expression);
  if (text.empty()) p.fail("empty; expected 5 or 6 fields, a macro such as @daily, or @every 30s");
  if (text.front() == '@') {
    const auto space = text.find_first_of(" \t");
    const std::string macro = lower(text.substr(0, space));
    const std::string_view rest =
        space == std::string_view::npos ? std::string_view() : trim(text.substr(space));
    if (macro == "@every") {
      CronSpec spec;
      spec.every_seconds = parse_every(p, rest);
      return spec;
    }
    std::string_view expanded;
    if (macro == "@yearly" || macro == "@annually") {
      expanded = "0 0 1 1 *";
    } else if (macro == "@monthly") {
      expanded = "0 0 1 * *";
    } else if (macro == "@weekly") {
      expanded = "0 0 * * 0";
    } else if (macro == "@daily" || macro == "@midnight") {
      expanded = "0 0 * * *";
    } else if (macro == "@hourly") {
      expanded = "0 * * * *";
    } else {
      p.fail(fmt::format(
          "unknown macro {}: use @yearly, @annually, @monthly, @weekly, @daily, @midnight, "
          "@hourly or @every <duration>",
          printable(macro)));
    }
    if (!rest.empty()) p.fail(fmt::format("{} takes no fields", macro));
    text = expanded;
  }
  auto fields = split_fields(text);
  if (fields.size() != 5 && fields.size() != 6) {
    p.fail(fmt::format(
        "{} fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (a seconds "
        "field first)",
        fields.size()));
  }
  CronSpec spec;
  std::size_t i = 0;
  if (fields.size() == 6) {
    spec.seconds = p.field(kSecond, fields[i++]);
  } else {
    spec.seconds = {0};
  }
  spec.minutes = p.field(kMinute, fields[i++]);
  spec.hours = p.field(kHour, fields[i++]);
  const std::string_view dom = fields[i++];
  spec.doms = p.field(kDom, dom);
  spec.months = p.field(kMonth, fields[i++]);
  const std::string_view dow = fields[i++];
  spec.dows = p.field(kDow, dow);
  spec.dom_restricted = dom.front() != '*' && dom.front() != '?';
  spec.dow_restricted = dow.front() != '*' && dow.front() != '?';

  // A day of month no chosen month has (Feb 30, Apr 31) never comes; with the OR rule
  // the day of week can still match.
  if (!(spec.dom_restricted && spec.dow_restricted)) {
    const bool possible = std::any_of(spec.months.begin(), spec.months.end(), [&](int m) {
      return spec.doms.front() <= kMonthDays[static_cast<std::size_t>(m - 1)];
    });
    if (!possible) {
      p.fail("day-of-month", dom,
             "no month of the month field has such a day: it would never fire");
    }
  }
  return spec;
}

std::string int_array_literal(const std::vector<int>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  out += '}';
  return out;
}

}  // namespace awa::storage
