// Values the statements that close or extend attempts share (consume.cpp, callbacks.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include <fmt/format.h>

namespace awa::storage {

// An error message (a handler's, or an external system's through a callback) is kept on
// the job (errors[]) for every attempt; beyond this it is cut, so that a huge text cannot
// bloat the row.
inline constexpr std::size_t kMaxErrorBytes = 8192;

// A duration as a PostgreSQL interval ("1500 milliseconds"), for $n::interval parameters.
inline std::string interval(std::chrono::milliseconds ms) {
  return fmt::format("{} milliseconds", ms.count());
}

}  // namespace awa::storage
