// Builds PostgreSQL array literals ('{"a","b",NULL}') for unnest()-based batch
// statements. Every element is double-quoted with backslash escapes, which is valid for
// any element text (commas, braces, quotes, backslashes, whitespace).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace awa::storage {

// A timestamptz element: "YYYY-MM-DD HH:MM:SS.ffffff+00" (UTC, microseconds).
std::string timestamp_literal(std::chrono::system_clock::time_point tp);

// bytea's hex input form of raw bytes: "\\x0a1b...".
std::string bytea_hex(std::string_view bytes);

class ArrayLiteral {
 public:
  ArrayLiteral() { text_.push_back('{'); }

  void add(std::string_view element);
  void add_null();
  void add(std::int64_t value);
  // bytea element from raw bytes (hex input form).
  void add_bytea(std::string_view bytes);

  // The literal; the builder must not be used afterwards.
  std::string finish() &&;

 private:
  void separator();
  std::string text_;
  bool first_ = true;
};

}  // namespace awa::storage
