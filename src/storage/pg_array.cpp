#include "storage/pg_array.hpp"

namespace awa::storage {

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
