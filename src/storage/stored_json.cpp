#include "storage/stored_json.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "awa/job.hpp"

namespace awa::storage {
namespace {

// Whether `text` opens more than `limit` arrays or objects inside one another. Brackets
// inside strings do not count. One pass without allocation: it runs before every decode,
// so that a value too deep to be walked safely is never built.
bool nested_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    switch (*p++) {
      case '"':
        while (p < end) {
          const char c = *p++;
          if (c == '"') break;
          if (c == '\\' && p < end) ++p;  // the escaped character, a quote included
        }
        break;
      case '[':
      case '{':
        if (++depth > limit) return true;
        break;
      case ']':
      case '}':
        --depth;
        break;
      default:
        break;
    }
  }
  return false;
}

// jsonb prints 1e400 as a 1 and 400 zeros: a message shows the number's ends and length.
std::string abbreviated(std::string_view token) {
  constexpr std::size_t kHead = 24;
  constexpr std::size_t kTail = 8;
  if (token.size() <= kHead + kTail + 8) return std::string(token);
  return fmt::format("{}...{} ({} characters)", token.substr(0, kHead),
                     token.substr(token.size() - kTail), token.size());
}

// nlohmann's message for 406 is "[json.exception.out_of_range.406] number overflow
// parsing '<token>'": the token, or the whole message if its shape ever changes.
std::string overflowing_number(const char* what) {
  const std::string_view w(what);
  const auto open = w.find("parsing '");
  if (open == std::string_view::npos || w.back() != '\'') return std::string(w);
  const auto start = open + 9;
  return abbreviated(w.substr(start, w.size() - 1 - start));
}

bool number_char(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

// RFC 8259's number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool well_formed_number(std::string_view t) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    return i > from;
  };
  if (i < t.size() && t[i] == '-') ++i;
  if (i < t.size() && t[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < t.size() && t[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == t.size();
}

}  // namespace

bool is_json_text(std::string_view text) {
  if (nlohmann::json::accept(text)) return true;
  // accept refuses a number whose double is infinite. Check every number's syntax here,
  // and the rest with accept, on a copy where each number is 0.
  std::string copy;
  copy.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {  // a string, verbatim: accept checks its escapes and UTF-8
      std::size_t j = i + 1;
      while (j < text.size() && text[j] != '"')
        j += text[j] == '\\' ? std::size_t{2} : std::size_t{1};
      j = std::min(j + 1, text.size());
      copy.append(text.substr(i, j - i));
      i = j;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t j = i;
      while (j < text.size() && number_char(text[j])) ++j;
      if (!well_formed_number(text.substr(i, j - i))) return false;
      copy.push_back('0');
      i = j;
    } else {
      copy.push_back(c);
      ++i;
    }
  }
  return nlohmann::json::accept(copy);
}

std::string decode_stored_json(std::string_view text, nlohmann::json& out) {
  out = nullptr;
  if (nested_deeper_than(text, kMaxDecodedJsonDepth)) {
    return fmt::format("nested deeper than {} levels", kMaxDecodedJsonDepth);
  }
  try {
    out = nlohmann::json::parse(text);
    return {};
  } catch (const nlohmann::json::out_of_range& e) {
    out = nullptr;
    // The parser's one out_of_range (406): a number whose double is infinite.
    return fmt::format("number {} is out of the range of a double", overflowing_number(e.what()));
  } catch (const nlohmann::json::exception& e) {
    out = nullptr;
    // Not from jsonb, whose text always parses; from a caller's own text.
    constexpr std::size_t kMaxWhat = 300;
    return fmt::format("not JSON ({})", std::string_view(e.what()).substr(0, kMaxWhat));
  }
}

}  // namespace awa::storage
