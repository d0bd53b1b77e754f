// Signing external callbacks (docs/scheduling.md, "External callbacks").
//
// `awa serve` accepts POST /api/callbacks/{id}/complete|fail|heartbeat only when signed
// with the shared secret it was started with (--callback-secret-file):
//   X-Awa-Timestamp: <unix seconds>
//   X-Awa-Signature: sha256=<lower-case hex HMAC-SHA256(secret, "<timestamp>.<body>")>
// The timestamp is signed with the body, and one more than kCallbackMaxSkew away from the
// server's clock is refused, so a captured request cannot be replayed later (within the
// window a replay is a duplicate callback: stale, it changes nothing).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace awa {

inline constexpr const char* kCallbackTimestampHeader = "X-Awa-Timestamp";
inline constexpr const char* kCallbackSignatureHeader = "X-Awa-Signature";
inline constexpr std::chrono::seconds kCallbackMaxSkew{300};

// "sha256=" + the hex HMAC-SHA256 of "<timestamp>.<body>" under `secret`.
std::string callback_signature(std::string_view secret, std::int64_t timestamp,
                               std::string_view body);

// Whether `signature` (the X-Awa-Signature value) signs `timestamp` and `body` under
// `secret`, compared in constant time, and `timestamp` is within kCallbackMaxSkew of
// `now` (unix seconds).
bool callback_signature_valid(std::string_view secret, std::int64_t timestamp,
                              std::string_view body, std::string_view signature, std::int64_t now);

}  // namespace awa
