#include "awa/url.hpp"

#include <libpq-fe.h>

#include <cctype>
#include <cstring>
#include <memory>
#include <vector>

namespace awa {
namespace {

bool is_uri(std::string_view s) {
  return s.rfind("postgresql://", 0) == 0 || s.rfind("postgres://", 0) == 0;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

// URI form: the userinfo password (between the first ':' and the last '@' of the
// authority) and every password=... query parameter.
std::string redact_uri(std::string_view s) {
  const auto scheme_end = s.find("://") + 3;
  const auto authority_end = std::min(s.find_first_of("/?", scheme_end), s.size());
  std::string out(s.substr(0, scheme_end));
  const std::string_view authority = s.substr(scheme_end, authority_end - scheme_end);
  const auto at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    const auto colon = userinfo.find(':');
    if (colon != std::string_view::npos) {
      out.append(userinfo.substr(0, colon + 1));
      out.append(kRedacted);
    } else {
      out.append(userinfo);
    }
    out.append(authority.substr(at));
  } else {
    out.append(authority);
  }
  std::string_view rest = s.substr(authority_end);
  const auto q = rest.find('?');
  if (q == std::string_view::npos) {
    out.append(rest);
    return out;
  }
  out.append(rest.substr(0, q + 1));
  std::string_view query = rest.substr(q + 1);
  bool first = true;
  while (true) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    if (!first) out.push_back('&');
    first = false;
    const auto eq = param.find('=');
    if (eq != std::string_view::npos && iequals(param.substr(0, eq), "password")) {
      out.append(param.substr(0, eq + 1));
      out.append(kRedacted);
    } else {
      out.append(param);
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return out;
}

// key = value form, as libpq reads it: values are single-quoted (with \' and \\ escapes)
// or run to the next whitespace.
std::string redact_keywords(std::string_view s) {
  std::string out;
  std::size_t i = 0;
  const auto space = [&](std::size_t k) {
    return k < s.size() && std::isspace(static_cast<unsigned char>(s[k])) != 0;
  };
  while (i < s.size()) {
    if (space(i)) {
      out.push_back(s[i++]);
      continue;
    }
    const std::size_t key_start = i;
    while (i < s.size() && s[i] != '=' && !space(i)) ++i;
    const std::string_view key = s.substr(key_start, i - key_start);
    out.append(key);
    while (space(i)) out.push_back(s[i++]);
    if (i >= s.size() || s[i] != '=') continue;  // malformed: keep going, copy as is
    out.push_back(s[i++]);
    while (space(i)) out.push_back(s[i++]);
    const std::size_t value_start = i;
    if (i < s.size() && s[i] == '\'') {
      ++i;
      while (i < s.size() && s[i] != '\'')
        i += (s[i] == '\\' && i + 1 < s.size()) ? std::size_t{2} : std::size_t{1};
      if (i < s.size()) ++i;  // closing quote
    } else {
      while (i < s.size() && !space(i))
        i += (s[i] == '\\' && i + 1 < s.size()) ? std::size_t{2} : std::size_t{1};
    }
    if (iequals(key, "password")) {
      out.append(kRedacted);
    } else {
      out.append(s.substr(value_start, i - value_start));
    }
  }
  return out;
}

void replace_all(std::string& text, std::string_view what, std::string_view with) {
  if (what.empty() || what == with) return;
  for (auto pos = text.find(what); pos != std::string::npos;
       pos = text.find(what, pos + with.size())) {
    text.replace(pos, what.size(), with);
  }
}

// The password as libpq decodes it (percent-decoded in a URI, unquoted in key=value).
std::string parsed_password(std::string_view conninfo) {
  const std::string text(conninfo);
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(text.c_str(), &err);
  if (err != nullptr) PQfreemem(err);
  if (opts == nullptr) return {};
  std::string password;
  for (auto* o = opts; o->keyword != nullptr; ++o) {
    if (std::strcmp(o->keyword, "password") == 0 && o->val != nullptr) password = o->val;
  }
  PQconninfoFree(opts);
  return password;
}

// Every postgres:// or postgresql:// URI inside free text (up to whitespace or a quote),
// and every password=VALUE, masked.
std::string redact_embedded(std::string_view text) {
  std::string out;
  std::size_t i = 0;
  const auto stop = [&](std::size_t k) {
    const char c = text[k];
    return std::isspace(static_cast<unsigned char>(c)) != 0 || c == '"' || c == '\'' || c == '<' ||
           c == '>';
  };
  while (i < text.size()) {
    const std::string_view rest = text.substr(i);
    if (rest.rfind("postgresql://", 0) == 0 || rest.rfind("postgres://", 0) == 0) {
      std::size_t end = i;
      while (end < text.size() && !stop(end)) ++end;
      out.append(redact_uri(text.substr(i, end - i)));
      i = end;
      continue;
    }
    constexpr std::string_view kKey = "password=";
    if (rest.size() > kKey.size() && iequals(rest.substr(0, kKey.size()), kKey) &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1])))) {
      out.append(rest.substr(0, kKey.size()));
      out.append(kRedacted);
      i += kKey.size();
      if (i < text.size() && text[i] == '\'') {
        ++i;
        while (i < text.size() && text[i] != '\'')
          i += (text[i] == '\\' && i + 1 < text.size()) ? std::size_t{2} : std::size_t{1};
        if (i < text.size()) ++i;
      } else {
        while (i < text.size() && !stop(i) && text[i] != '&') ++i;
      }
      continue;
    }
    out.push_back(text[i++]);
  }
  return out;
}

}  // namespace

std::string redact_url(std::string_view conninfo) {
  return is_uri(conninfo) ? redact_uri(conninfo) : redact_keywords(conninfo);
}

std::string scrub_password(std::string text, std::string_view conninfo) {
  text = redact_embedded(text);
  if (conninfo.empty()) return text;
  const std::string redacted = redact_url(conninfo);
  replace_all(text, conninfo, redacted);
  // Secrets too short to be told from ordinary text ("a") are still replaced: a message
  // made unreadable is the lesser harm.
  replace_all(text, parsed_password(conninfo), kRedacted);
  // The password as written in the string (percent-encoded, quoted): whatever redact_url
  // masked. Found by lining the two up: equal prefix and suffix, the middle differs.
  if (redacted != conninfo) {
    std::size_t pre = 0;
    while (pre < redacted.size() && pre < conninfo.size() && redacted[pre] == conninfo[pre]) ++pre;
    std::size_t suf = 0;
    while (suf < redacted.size() - pre && suf < conninfo.size() - pre &&
           redacted[redacted.size() - 1 - suf] == conninfo[conninfo.size() - 1 - suf])
      ++suf;
    const std::string_view written = conninfo.substr(pre, conninfo.size() - pre - suf);
    // Only when exactly one password was masked (the middle is then that password).
    if (redacted.substr(pre, redacted.size() - pre - suf) == kRedacted) {
      replace_all(text, written, kRedacted);
    }
  }
  return text;
}

}  // namespace awa
