#include "pg/params.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "awa/error.hpp"
#include "pg/result.hpp"

namespace awa::pg {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string hex_bytea(const unsigned char* data, std::size_t size) {
  std::string out;
  out.reserve(2 + 2 * size);
  out += "\\x";
  for (std::size_t i = 0; i < size; ++i) {
    out += kHex[data[i] >> 4];
    out += kHex[data[i] & 0x0f];
  }
  return out;
}

}  // namespace

Params& Params::null() {
  values_.emplace_back(std::nullopt);
  return *this;
}

Params& Params::add(std::string_view value) {
  // Text-format parameters travel as C strings: an embedded NUL would silently truncate
  // the value, so reject it (PostgreSQL text cannot hold NUL anyway; use bytea).
  if (value.find('\0') != std::string_view::npos) {
    throw InvalidArgument("a text parameter contains a NUL byte; send it as bytea");
  }
  values_.emplace_back(std::string(value));
  return *this;
}

Params& Params::add(std::int64_t value) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  values_.emplace_back(std::string(buf, r.ptr));
  return *this;
}

Params& Params::add(std::uint64_t value) {
  if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    throw InvalidArgument("parameter " + std::to_string(value) + " does not fit in a bigint");
  }
  return add(static_cast<std::int64_t>(value));
}

Params& Params::add(double value) {
  // PostgreSQL's spellings; to_chars would produce "inf"/"nan".
  if (std::isnan(value)) {
    values_.emplace_back("NaN");
  } else if (std::isinf(value)) {
    values_.emplace_back(value > 0 ? "Infinity" : "-Infinity");
  } else {
    // Shortest representation that parses back to the same double: full precision.
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, value);
    values_.emplace_back(std::string(buf, r.ptr));
  }
  return *this;
}

Params& Params::add(bool value) {
  values_.emplace_back(value ? "true" : "false");
  return *this;
}

Params& Params::add(std::chrono::system_clock::time_point value) {
  using namespace std::chrono;
  const auto micros = floor<microseconds>(value);
  const auto day = floor<days>(micros);
  const year_month_day ymd{day};
  const hh_mm_ss<microseconds> tod{micros - day};
  char buf[48];
  const int n = std::snprintf(
      buf, sizeof buf, "%04d-%02u-%02u %02d:%02d:%02d.%06lld+00", static_cast<int>(ymd.year()),
      static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
      static_cast<int>(tod.hours().count()), static_cast<int>(tod.minutes().count()),
      static_cast<int>(tod.seconds().count()), static_cast<long long>(tod.subseconds().count()));
  values_.emplace_back(std::string(buf, static_cast<std::size_t>(n)));
  return *this;
}

Params& Params::add_bytea(std::span<const std::byte> value) {
  values_.emplace_back(
      hex_bytea(reinterpret_cast<const unsigned char*>(value.data()), value.size()));
  return *this;
}

Params& Params::add_bytea(std::string_view bytes) {
  values_.emplace_back(
      hex_bytea(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));
  return *this;
}

Params& Params::add(const Bytea& value) { return add_bytea(std::string_view(value.bytes)); }

const char* const* Params::values() const {
  pointers_.clear();
  pointers_.reserve(values_.size());
  for (const auto& v : values_) pointers_.push_back(v ? v->c_str() : nullptr);
  return pointers_.data();
}

}  // namespace awa::pg
