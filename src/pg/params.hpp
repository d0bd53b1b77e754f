// Statement parameters, sent to PostgreSQL in text format.
//
// Text format keeps one code path for every type: PostgreSQL parses the text with the
// parameter's inferred type, exactly as it would a literal. bytea values are sent as
// hex ("\x..."), which is lossless for any byte string.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace awa::pg {

struct Bytea;  // result.hpp

class Params {
 public:
  Params() = default;

  Params& null();
  Params& add(std::string_view value);
  Params& add(const std::string& value) { return add(std::string_view(value)); }
  Params& add(const char* value) { return add(std::string_view(value)); }
  Params& add(std::int64_t value);
  Params& add(std::int32_t value) { return add(static_cast<std::int64_t>(value)); }
  Params& add(std::int16_t value) { return add(static_cast<std::int64_t>(value)); }
  Params& add(std::uint32_t value) { return add(static_cast<std::int64_t>(value)); }
  // Throws awa::InvalidArgument above INT64_MAX (PostgreSQL has no unsigned types).
  Params& add(std::uint64_t value);
  Params& add(double value);
  Params& add(bool value);
  // A timestamptz, sent as microseconds since the Unix epoch through to_timestamp-free
  // text ("2026-11-30 12:00:00.123456+00").
  Params& add(std::chrono::system_clock::time_point value);
  Params& add_bytea(std::span<const std::byte> value);
  Params& add_bytea(std::string_view bytes);  // raw bytes held in a string
  Params& add(const Bytea& value);
  template <class T>
  Params& add(const std::optional<T>& value) {
    return value ? add(*value) : null();
  }

  std::size_t size() const noexcept { return values_.size(); }
  // For libpq: one pointer per parameter, nullptr for NULL. Valid until the next add()
  // (rebuilt on every call, so a copied Params never points into its source).
  const char* const* values() const;
  // The text of parameter i, nullopt for NULL (for tests and error messages).
  const std::optional<std::string>& value(std::size_t i) const { return values_.at(i); }

 private:
  std::vector<std::optional<std::string>> values_;
  mutable std::vector<const char*> pointers_;
};

// Builds the parameters from a list of arguments: make_params(1, "x", std::nullopt).
template <class... Args>
Params make_params(const Args&... args) {
  Params p;
  (add_one(p, args), ...);
  return p;
}

template <class T>
void add_one(Params& p, const T& value) {
  p.add(value);
}
inline void add_one(Params& p, std::nullopt_t) { p.null(); }

}  // namespace awa::pg
