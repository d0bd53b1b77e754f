#include "storage/utf8.hpp"

#include <algorithm>

namespace awa::storage {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kEllipsis = "\xE2\x80\xA6";     // U+2026

}  // namespace

std::size_t utf8_sequence(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return len;
}

std::optional<std::size_t> invalid_utf8_at(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::string storable_text(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  // Room is kept for the ellipsis until the rest is known to fit without a cut.
  const std::size_t budget = max_bytes > kEllipsis.size() ? max_bytes - kEllipsis.size() : 0;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = utf8_sequence(text, i);
    if (n == 1 && text[i] == '\0') n = 0;
    const std::string_view piece = n == 0 ? kReplacement : text.substr(i, n);
    if (out.size() + piece.size() > budget) {
      const std::string_view rest = text.substr(i);
      if (out.size() + rest.size() <= max_bytes && !invalid_utf8_at(rest) &&
          rest.find('\0') == std::string_view::npos) {
        out.append(rest);  // fits exactly: no cut
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
