// HMAC-SHA256 from OpenSSL's libcrypto: a MAC is not something to write by hand.
#include "awa/callback.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <limits>

#include <fmt/format.h>

#include "awa/error.hpp"

namespace awa {

std::string callback_signature(std::string_view secret, std::int64_t timestamp,
                               std::string_view body) {
  if (secret.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw InvalidArgument("callback secret too long");
  const std::string message = fmt::format("{}.{}", timestamp, body);
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
                              std::string_view body, std::string_view signature, std::int64_t now) {
  const auto skew = now > timestamp ? now - timestamp : timestamp - now;
  if (skew > kCallbackMaxSkew.count()) return false;
  const std::string expected = callback_signature(secret, timestamp, body);
  return signature.size() == expected.size() &&
         CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) == 0;
}

}  // namespace awa
