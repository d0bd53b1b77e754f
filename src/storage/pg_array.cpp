#include "storage/pg_array.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace awa::storage {

std::string timestamp_literal(std::chrono::system_clock::time_point tp) {
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(tp.time_since_epoch()).count();
  const auto secs =
      std::chrono::sys_seconds(std::chrono::seconds(us / 1000000 - (us % 1000000 < 0)));
  const auto frac = ((us % 1000000) + 1000000) % 1000000;
  return fmt::format("{:%Y-%m-%d %H:%M:%S}.{:06d}+00", secs, frac);
}

void ArrayLiteral::separator() {
  if (!first_) text_.push_back(',');
  first_ = false;
}

void ArrayLiteral::add(std::string_view element) {
  separator();
  text_.push_back('"');
  for (const char c : element) {
    if (c == '"' || c == '\\') text_.push_back('\\');
    text_.push_back(c);
  }
  text_.push_back('"');
}

void ArrayLiteral::add_null() {
  separator();
  text_.append("NULL");
}

void ArrayLiteral::add(std::int64_t value) {
  separator();
  text_.append(std::to_string(value));
}

std::string bytea_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\\x";
  out.reserve(2 + 2 * bytes.size());
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xF]);
  }
  return out;
}

// add() escapes the backslash, so the element reads "\\x..." and the array parser hands
// bytea "\x...".
void ArrayLiteral::add_bytea(std::string_view bytes) { add(bytea_hex(bytes)); }

std::string ArrayLiteral::finish() && {
  text_.push_back('}');
  return std::move(text_);
}

}  // namespace awa::storage
