// The callback signature (awa/callback.hpp). HMAC-SHA256 from OpenSSL's libcrypto: a MAC
// is not something to write by hand.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "awa/callback.hpp"
#include "awa/error.hpp"

namespace awa {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding of a query name or value ('+' is a space).
std::string decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else if (s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

// RFC 3986 unreserved characters stay; every other byte is %XX. One spelling per byte
// string, none holding '&', '=' or a line feed: the canonical query is unambiguous.
std::string encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4U];
      out += kHex[c & 0x0fU];
    }
  }
  return out;
}

bool signable(const CallbackRequest& r) {
  return !r.method.empty() && r.method.find('\n') == std::string_view::npos &&
         r.path.find('\n') == std::string_view::npos;
}

}  // namespace

CallbackRequest callback_request(std::string_view method, std::string_view target,
                                 std::string_view body) {
  target = target.substr(0, target.find('#'));
  const auto q = target.find('?');
  CallbackRequest r;
  r.method = std::string(method);
  r.path = std::string(target.substr(0, q));
  r.query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
  r.body = std::string(body);
  return r;
}

std::vector<CallbackQueryParam> callback_query_params(std::string_view query) {
  std::vector<CallbackQueryParam> params;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view piece = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (piece.empty()) continue;
    const auto eq = piece.find('=');
    params.emplace_back(decode(piece.substr(0, eq)), eq == std::string_view::npos
                                                         ? std::string()
                                                         : decode(piece.substr(eq + 1)));
  }
  return params;
}

std::string callback_query_string(std::vector<CallbackQueryParam> params) {
  for (auto& [name, value] : params) {
    name = encode(name);
    value = encode(value);
  }
  // Sorted encoded: ASCII, so every language's string order agrees on it.
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

std::string callback_canonical_query(std::string_view query) {
  return callback_query_string(callback_query_params(query));
}

std::string callback_string_to_sign(std::int64_t timestamp, const CallbackRequest& request) {
  if (request.method.empty()) throw InvalidArgument("callback request: the method is empty");
  if (!signable(request))
    throw InvalidArgument("callback request: a line feed in the method or the path");
  std::string out =
      fmt::format("{}\n{}\n{}\n{}\n{}\n", kCallbackSigningScheme, timestamp, request.method,
                  request.path, callback_canonical_query(request.query));
  out.append(request.body);
  return out;
}

std::string callback_signature(std::string_view secret, std::int64_t timestamp,
                               const CallbackRequest& request) {
  if (secret.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw InvalidArgument("callback secret too long");
  const std::string message = callback_string_to_sign(timestamp, request);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac,
           &mac_len) == nullptr) {
    throw Error("HMAC-SHA256 failed (OpenSSL)");
  }
  std::string out = "sha256=";
  out.reserve(out.size() + 2 * mac_len);
  for (unsigned int i = 0; i < mac_len; ++i) out += fmt::format("{:02x}", mac[i]);
  return out;
}

bool callback_signature_valid(std::string_view secret, std::int64_t timestamp,
                              const CallbackRequest& request, std::string_view signature,
                              std::int64_t now) {
  // Unsigned arithmetic: no overflow whatever the timestamp.
  const auto skew = now > timestamp
                        ? static_cast<std::uint64_t>(now) - static_cast<std::uint64_t>(timestamp)
                        : static_cast<std::uint64_t>(timestamp) - static_cast<std::uint64_t>(now);
  if (skew > static_cast<std::uint64_t>(kCallbackMaxSkew.count())) return false;
  if (!signable(request)) return false;
  const std::string expected = callback_signature(secret, timestamp, request);
  return signature.size() == expected.size() &&
         CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) == 0;
}

}  // namespace awa
