#include "storage/utf8.hpp"

#include <algorithm>

namespace awa::storage {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kEllipsis = "\xE2\x80\xA6";     // U+2026

// Length of the well-formed UTF-8 sequence at s[i], or 0 when the bytes there are not
// one (RFC 3629 table 3-7) or are a NUL.
std::size_t sequence_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const std::size_t left = s.size() - i;
  const unsigned char c = b(0);
  if (c == 0) return 0;
  if (c < 0x80) return 1;
  const auto cont = [&](std::size_t k) { return k < left && (b(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

bool is_storable_text(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto n = sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string storable_text(std::string_view s, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(s.size(), max_bytes));
  const std::size_t budget =
      max_bytes > kEllipsis.size() ? max_bytes - kEllipsis.size() : std::size_t{0};
  for (std::size_t i = 0; i < s.size();) {
    const auto n = sequence_length(s, i);
    const std::string_view piece = n == 0 ? kReplacement : s.substr(i, n);
    if (out.size() + piece.size() > budget) {
      // Cut only when the rest does not fit; a text that fits exactly is kept whole.
      if (out.size() + (s.size() - i) <= max_bytes && is_storable_text(s.substr(i))) {
        out.append(s.substr(i));
      } else if (max_bytes >= kEllipsis.size()) {
        out.append(kEllipsis);
      }
      return out;
    }
    out.append(piece);
    i += n == 0 ? 1 : n;
  }
  return out;
}

}  // namespace awa::storage
