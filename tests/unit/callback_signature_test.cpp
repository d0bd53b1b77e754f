// The callback signature of awa serve's POST /api/callbacks/... (awa/callback.hpp).
#include <gtest/gtest.h>

#include <string>

#include "awa/callback.hpp"

namespace awa {
namespace {

// An independent HMAC-SHA256 of "1700000000.{"error":"x"}" under the key
// "0123456789abcdef-secret" (Python's hmac module).
TEST(CallbackSignatureTest, MatchesAnIndependentHmacAndChecksTheWindow) {
  const std::string secret = "0123456789abcdef-secret";
  const std::string body = R"({"error":"x"})";
  const std::string sig = callback_signature(secret, 1700000000, body);
  EXPECT_EQ(sig, "sha256=fde0664100f6dc954a559a99085e1246cdf513215708d28d56f0098e2872880b");
  EXPECT_TRUE(callback_signature_valid(secret, 1700000000, body, sig, 1700000000 + 299));
  EXPECT_FALSE(callback_signature_valid(secret, 1700000000, body, sig, 1700000000 + 301));
  EXPECT_FALSE(callback_signature_valid(secret, 1700000000, body, sig, 1700000000 - 301));
  EXPECT_FALSE(callback_signature_valid(secret, 1700000000, body + " ", sig, 1700000000));
  EXPECT_FALSE(callback_signature_valid(secret, 1700000001, body, sig, 1700000000));
  EXPECT_FALSE(callback_signature_valid("another-secret-0123", 1700000000, body, sig, 1700000000));
  EXPECT_FALSE(callback_signature_valid(secret, 1700000000, body, sig.substr(0, 20), 1700000000));
}

}  // namespace
}  // namespace awa
