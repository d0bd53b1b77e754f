#include "pg/result.hpp"

#include <libpq-fe.h>

#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "awa/error.hpp"

namespace awa::pg {
namespace {

using TimePoint = std::chrono::system_clock::time_point;

template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, std::string>) return "text";
  if constexpr (std::is_same_v<T, std::string_view>) return "text";
  if constexpr (std::is_same_v<T, bool>) return "boolean";
  if constexpr (std::is_same_v<T, std::int16_t>) return "smallint";
  if constexpr (std::is_same_v<T, std::int32_t>) return "integer";
  if constexpr (std::is_same_v<T, std::int64_t>) return "bigint";
  if constexpr (std::is_same_v<T, double>) return "double precision";
  if constexpr (std::is_same_v<T, TimePoint>) return "timestamptz";
  if constexpr (std::is_same_v<T, Bytea>) return "bytea";
  return "?";
}

template <class Int>
bool parse_int(std::string_view text, Int& out) {
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, out);
  return r.ec == std::errc() && r.ptr == end;
}

bool parse_double(std::string_view text, double& out) {
  // PostgreSQL's spellings of the special values.
  if (text == "NaN") {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (text == "Infinity") {
    out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (text == "-Infinity") {
    out = -std::numeric_limits<double>::infinity();
    return true;
  }
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, out);
  return r.ec == std::errc() && r.ptr == end;
}

// A cursor over ISO timestamp text.
class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}
  bool done() const { return i_ == s_.size(); }
  bool peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++i_;
    return true;
  }
  // Reads between min and max digits; returns their count (0 on failure).
  int digits(int min, int max, long long& value) {
    value = 0;
    int n = 0;
    while (n < max && i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      value = value * 10 + (s_[i_] - '0');
      ++i_;
      ++n;
    }
    return n >= min ? n : 0;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

// Parses "YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM[:SS]]]" (DateStyle ISO). Without an offset
// (a `timestamp` column) the value is taken as UTC.
bool parse_timestamp(std::string_view text, TimePoint& out) {
  using namespace std::chrono;
  if (text == "infinity") {
    out = TimePoint::max();
    return true;
  }
  if (text == "-infinity") {
    out = TimePoint::min();
    return true;
  }
  Scanner sc(text);
  long long y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!sc.digits(4, 6, y) || !sc.eat('-') || !sc.digits(2, 2, mo) || !sc.eat('-') ||
      !sc.digits(2, 2, d)) {
    return false;
  }
  if (!sc.eat(' ') && !sc.eat('T')) return false;
  if (!sc.digits(2, 2, h) || !sc.eat(':') || !sc.digits(2, 2, mi) || !sc.eat(':') ||
      !sc.digits(2, 2, s)) {
    return false;
  }
  long long frac_micros = 0;
  if (sc.eat('.')) {
    long long frac = 0;
    const int n = sc.digits(1, 6, frac);
    if (n == 0) return false;
    frac_micros = frac;
    for (int k = n; k < 6; ++k) frac_micros *= 10;
  }
  long long offset_seconds = 0;
  if (sc.peek('+') || sc.peek('-')) {
    const bool negative = sc.peek('-');
    sc.eat(negative ? '-' : '+');
    long long oh = 0, om = 0, os = 0;
    if (!sc.digits(2, 2, oh)) return false;
    if (sc.eat(':') && !sc.digits(2, 2, om)) return false;
    if (sc.eat(':') && !sc.digits(2, 2, os)) return false;
    offset_seconds = (oh * 3600 + om * 60 + os) * (negative ? -1 : 1);
  } else {
    sc.eat('Z');
  }
  if (!sc.done()) return false;  // e.g. " BC"
  // system_clock counts nanoseconds in 64 bits: roughly years 1678..2261.
  if (y < 1678 || y > 2261) return false;
  const year_month_day ymd{year{static_cast<int>(y)}, month{static_cast<unsigned>(mo)},
                           day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 60) return false;
  const auto tp = sys_days(ymd) + hours(h) + minutes(mi) + seconds(s) + microseconds(frac_micros) -
                  seconds(offset_seconds);
  out = time_point_cast<TimePoint::duration>(tp);
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// bytea_output = hex ("\x0102") or, if a session changed it, escape ("\\001\002a").
bool parse_bytea(std::string_view text, Bytea& out) {
  out.bytes.clear();
  if (text.size() >= 2 && text[0] == '\\' && text[1] == 'x') {
    if (text.size() % 2 != 0) return false;
    out.bytes.reserve((text.size() - 2) / 2);
    for (std::size_t i = 2; i < text.size(); i += 2) {
      const int hi = hex_value(text[i]);
      const int lo = hex_value(text[i + 1]);
      if (hi < 0 || lo < 0) return false;
      out.bytes += static_cast<char>((hi << 4) | lo);
    }
    return true;
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out.bytes += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == '\\') {
      out.bytes += '\\';
      ++i;
    } else if (i + 3 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '3') {
      int v = 0;
      for (std::size_t k = 1; k <= 3; ++k) {
        const char c = text[i + k];
        if (c < '0' || c > '7') return false;
        v = v * 8 + (c - '0');
      }
      out.bytes += static_cast<char>(v);
      i += 3;
    } else {
      return false;
    }
  }
  return true;
}

// Type OIDs of the binary formats read here (pg_type.dat; stable across releases).
constexpr Oid kBoolOid = 16;
constexpr Oid kByteaOid = 17;
constexpr Oid kNameOid = 19;
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt2Oid = 21;
constexpr Oid kInt4Oid = 23;
constexpr Oid kTextOid = 25;
constexpr Oid kJsonOid = 114;
constexpr Oid kFloat4Oid = 700;
constexpr Oid kFloat8Oid = 701;
constexpr Oid kBpcharOid = 1042;
constexpr Oid kVarcharOid = 1043;
constexpr Oid kTimestampOid = 1114;
constexpr Oid kTimestamptzOid = 1184;
constexpr Oid kJsonbOid = 3802;

// A big-endian two's-complement integer (the send format). REQUIRES: b.size() is 2, 4 or
// 8 — every caller checks the width against the column's type first.
std::int64_t read_be(std::string_view b) {
  std::uint64_t u = 0;
  for (const char c : b) u = (u << 8) | static_cast<unsigned char>(c);
  // Sign-extend from the value's width.
  const int shift = 64 - 8 * static_cast<int>(b.size());
  return static_cast<std::int64_t>(u << shift) >> shift;
}

// The text of a binary value of a textual type; nullopt for any other type. jsonb's send
// format is a version byte (1) and the text.
std::optional<std::string_view> binary_text(Oid type, std::string_view b) {
  switch (type) {
    case kTextOid:
    case kVarcharOid:
    case kBpcharOid:
    case kNameOid:
    case kJsonOid:
      return b;
    case kJsonbOid:
      if (b.empty() || b[0] != 1) return std::nullopt;
      return b.substr(1);
    default:
      return std::nullopt;
  }
}

// timestamp[tz] send format: microseconds since 2000-01-01 00:00 UTC, INT64_MAX/MIN for
// infinity. system_clock counts nanoseconds in 64 bits, so its range (about 1678..2261,
// as for text) is checked before the conversion.
bool binary_timestamp(std::int64_t micros_2000, TimePoint& out) {
  if (micros_2000 == std::numeric_limits<std::int64_t>::max()) {
    out = TimePoint::max();
    return true;
  }
  if (micros_2000 == std::numeric_limits<std::int64_t>::min()) {
    out = TimePoint::min();
    return true;
  }
  constexpr std::int64_t kEpochShift = 946'684'800'000'000;  // 1970 -> 2000, microseconds
  constexpr std::int64_t kLimit =
      std::chrono::duration_cast<std::chrono::microseconds>(TimePoint::duration::max()).count();
  if (micros_2000 > kLimit - kEpochShift || micros_2000 < -kLimit - kEpochShift) return false;
  out = TimePoint(std::chrono::duration_cast<TimePoint::duration>(
      std::chrono::microseconds(micros_2000 + kEpochShift)));
  return true;
}

}  // namespace

void ResultDeleter::operator()(pg_result* r) const noexcept { PQclear(r); }

Result::Result(pg_result* res) : res_(res) {}

int Result::rows() const { return res_ ? PQntuples(res_.get()) : 0; }

int Result::columns() const { return res_ ? PQnfields(res_.get()) : 0; }

std::int64_t Result::affected_rows() const {
  if (!res_) return 0;
  const std::string_view tuples = PQcmdTuples(res_.get());
  std::int64_t n = 0;
  if (tuples.empty() || !parse_int(tuples, n)) return 0;
  return n;
}

std::string_view Result::column_name(int col) const {
  if (col < 0 || col >= columns()) {
    throw Error("result has no column " + std::to_string(col));
  }
  return PQfname(res_.get(), col);
}

std::string_view Result::command_status() const {
  return res_ ? std::string_view(PQcmdStatus(res_.get())) : std::string_view();
}

int Result::column(std::string_view name) const {
  // Exact match: PQfnumber would fold unquoted names to lower case.
  const int n = columns();
  for (int c = 0; c < n; ++c) {
    if (name == PQfname(res_.get(), c)) return c;
  }
  throw Error("result has no column \"" + std::string(name) + "\"");
}

bool Result::is_null(int row, int col) const {
  if (row < 0 || row >= rows() || col < 0 || col >= columns()) {
    throw Error("result has no cell (" + std::to_string(row) + ", " + std::to_string(col) +
                "): it has " + std::to_string(rows()) + " rows and " + std::to_string(columns()) +
                " columns");
  }
  return PQgetisnull(res_.get(), row, col) != 0;
}

bool Result::binary(int col) const {
  if (col < 0 || col >= columns()) throw Error("result has no column " + std::to_string(col));
  return PQfformat(res_.get(), col) == 1;
}

std::string_view Result::text(int row, int col) const {
  if (is_null(row, col)) return {};
  const std::string_view raw{PQgetvalue(res_.get(), row, col),
                             static_cast<std::size_t>(PQgetlength(res_.get(), row, col))};
  if (PQfformat(res_.get(), col) != 1) return raw;
  if (const auto t = binary_text(PQftype(res_.get(), col), raw)) return *t;
  throw Error("column \"" + std::string(column_name(col)) + "\" (row " + std::to_string(row) +
              ") is binary and not text (type OID " + std::to_string(PQftype(res_.get(), col)) +
              "); read it with get<T>");
}

template <class T>
T Result::get(int row, int col) const {
  if (is_null(row, col)) {
    throw Error("column \"" + std::string(column_name(col)) + "\" (row " + std::to_string(row) +
                ") is NULL; read it with get_opt");
  }
  if (PQfformat(res_.get(), col) == 1) return get_binary<T>(row, col);
  const std::string_view t = text(row, col);
  const auto bad = [&]() {
    return Error("column \"" + std::string(column_name(col)) + "\" (row " + std::to_string(row) +
                 "): cannot read \"" + std::string(t.substr(0, 100)) + "\" as " + type_name<T>());
  };
  if constexpr (std::is_same_v<T, std::string>) {
    return std::string(t);
  } else if constexpr (std::is_same_v<T, std::string_view>) {
    return t;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (t == "t" || t == "true") return true;
    if (t == "f" || t == "false") return false;
    throw bad();
  } else if constexpr (std::is_same_v<T, double>) {
    double v = 0;
    if (!parse_double(t, v)) throw bad();
    return v;
  } else if constexpr (std::is_integral_v<T>) {
    T v = 0;
    if (!parse_int(t, v)) throw bad();
    return v;
  } else if constexpr (std::is_same_v<T, TimePoint>) {
    TimePoint v{};
    if (!parse_timestamp(t, v)) throw bad();
    return v;
  } else if constexpr (std::is_same_v<T, Bytea>) {
    Bytea v;
    if (!parse_bytea(t, v)) throw bad();
    return v;
  } else {
    static_assert(sizeof(T) == 0, "unsupported type for Result::get");
  }
}

// REQUIRES: the cell is not NULL and its column is binary.
template <class T>
T Result::get_binary(int row, int col) const {
  const Oid type = PQftype(res_.get(), col);
  const std::string_view b{PQgetvalue(res_.get(), row, col),
                           static_cast<std::size_t>(PQgetlength(res_.get(), row, col))};
  const auto bad = [&]() {
    return Error("column \"" + std::string(column_name(col)) + "\" (row " + std::to_string(row) +
                 "): cannot read a binary value of type OID " + std::to_string(type) + " (" +
                 std::to_string(b.size()) + " bytes) as " + type_name<T>());
  };
  if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view>) {
    const auto t = binary_text(type, b);
    if (!t) throw bad();
    return T(*t);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (type != kBoolOid || b.size() != 1) throw bad();
    return b[0] != 0;
  } else if constexpr (std::is_same_v<T, double>) {
    if (type == kFloat8Oid && b.size() == 8) {
      return std::bit_cast<double>(static_cast<std::uint64_t>(read_be(b)));
    }
    if (type == kFloat4Oid && b.size() == 4) {
      return std::bit_cast<float>(static_cast<std::uint32_t>(read_be(b)));
    }
    throw bad();
  } else if constexpr (std::is_integral_v<T>) {
    const bool width_ok = (type == kInt2Oid && b.size() == 2) ||
                          (type == kInt4Oid && b.size() == 4) ||
                          (type == kInt8Oid && b.size() == 8);
    if (!width_ok) throw bad();
    const std::int64_t v = read_be(b);
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) throw bad();
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, TimePoint>) {
    TimePoint tp{};
    if ((type != kTimestamptzOid && type != kTimestampOid) || b.size() != 8 ||
        !binary_timestamp(read_be(b), tp)) {
      throw bad();
    }
    return tp;
  } else if constexpr (std::is_same_v<T, Bytea>) {
    if (type != kByteaOid) throw bad();
    return Bytea{std::string(b)};
  } else {
    static_assert(sizeof(T) == 0, "unsupported type for Result::get");
  }
}

template std::string Result::get<std::string>(int, int) const;
template std::string_view Result::get<std::string_view>(int, int) const;
template bool Result::get<bool>(int, int) const;
template std::int16_t Result::get<std::int16_t>(int, int) const;
template std::int32_t Result::get<std::int32_t>(int, int) const;
template std::int64_t Result::get<std::int64_t>(int, int) const;
template double Result::get<double>(int, int) const;
template TimePoint Result::get<TimePoint>(int, int) const;
template Bytea Result::get<Bytea>(int, int) const;

}  // namespace awa::pg
