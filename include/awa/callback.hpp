// Signing external callbacks (docs/api.md, "Signing a callback"; docs/scheduling.md,
// "External callbacks").
//
// `awa serve --callback-secret-file F` accepts POST /api/callbacks/{id}/complete|fail|
// heartbeat only when signed with the shared secret held in F (without the file the
// routes answer 404: there is no unsigned mode):
//   X-Awa-Timestamp: <unix seconds, decimal>
//   X-Awa-Signature: sha256=<lower-case hex HMAC-SHA256(secret, string to sign)>
// The string to sign (callback_string_to_sign) binds the whole request, not just its body:
//   awa-callback-v1 LF <timestamp> LF <METHOD> LF <path> LF <canonical query> LF <body>
// The path names the callback id and the action, and the query and the body carry every
// parameter the route reads, so a signature is good for one request only: sent to another
// id, as another action or with a parameter added or changed, it no longer matches.
// Within kCallbackMaxSkew of its timestamp the receiver accepts each signature once
// (CallbackReplayCache); after that the timestamp itself is refused.
//
// Senders (tests, scripts, other languages: docs/api.md spells the canonical forms out
// with a Python example) compute the header with callback_signature(). Thread safety: the
// functions are pure; CallbackReplayCache is internally synchronised.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace awa {

inline constexpr const char* kCallbackTimestampHeader = "X-Awa-Timestamp";
inline constexpr const char* kCallbackSignatureHeader = "X-Awa-Signature";
// A timestamp further than this from the receiver's clock is refused.
inline constexpr std::chrono::seconds kCallbackMaxSkew{300};
// The first line of the string to sign: a later scheme gets another name, so no signature
// of one scheme ever verifies under another.
inline constexpr std::string_view kCallbackSigningScheme = "awa-callback-v1";

// One request as the sender sends it (and as the receiver got it). It owns its bytes:
// a body is small, and views into a sender's temporaries would dangle.
struct CallbackRequest {
  std::string method = "POST";
  // The path of the request target as sent, without the query: "/api/callbacks/<id>/fail".
  // It must not hold a line feed (HTTP cannot carry one there anyway).
  std::string path;
  // The query string as sent, without the '?' ("" for none); any order, any valid
  // percent-encoding: it is signed in canonical form (callback_canonical_query).
  std::string query;
  // The body's bytes exactly as sent ("" for none).
  std::string body;
};

// The request for `target` ("path" or "path?query"; a "#fragment" is dropped).
CallbackRequest callback_request(std::string_view method, std::string_view target,
                                 std::string_view body);

// A name or value of a query parameter, decoded (bytes, not text).
using CallbackQueryParam = std::pair<std::string, std::string>;

// The parameters of a query string: split at '&' (empty pieces skipped), each at its
// first '=' (none: the value is empty), each side percent-decoded ('+' is a space; a '%'
// not followed by two hex digits stands for itself). In the order given.
std::vector<CallbackQueryParam> callback_query_params(std::string_view query);

// `params` in canonical form: each name and value percent-encoded (every byte but A-Z a-z
// 0-9 - . _ ~ as %XX, upper-case hex), the pairs sorted by encoded name then encoded
// value (byte order), joined as "name=value" with '&'. "" for none.
std::string callback_query_string(std::vector<CallbackQueryParam> params);

// callback_query_string(callback_query_params(query)): "b=2&a=x+y" -> "a=x%20y&b=2".
std::string callback_canonical_query(std::string_view query);

// The exact bytes the signature covers:
//   "awa-callback-v1\n<timestamp>\n<method>\n<path>\n<canonical query>\n<body>"
// InvalidArgument for an empty method or a method or path holding a line feed (the lines
// would no longer say which field is which).
std::string callback_string_to_sign(std::int64_t timestamp, const CallbackRequest& request);

// The X-Awa-Signature value: "sha256=" + the lower-case hex HMAC-SHA256 of
// callback_string_to_sign(timestamp, request) under `secret` (OpenSSL's libcrypto).
std::string callback_signature(std::string_view secret, std::int64_t timestamp,
                               const CallbackRequest& request);

// Whether `signature` (the X-Awa-Signature value) signs `request` at `timestamp` under
// `secret`, compared in constant time, and `timestamp` is within kCallbackMaxSkew of `now`
// (unix seconds). False, not an exception, for a request that cannot be signed. Says
// nothing about replays: a receiver also passes the signature through a
// CallbackReplayCache.
bool callback_signature_valid(std::string_view secret, std::int64_t timestamp,
                              const CallbackRequest& request, std::string_view signature,
                              std::int64_t now);

// The signatures a receiver accepted, each kept until its timestamp leaves the window
// (timestamp + kCallbackMaxSkew): a second request with a signature already seen is a
// replay. Bounded: it holds at most `capacity` signatures, and when that many are still
// inside their window it refuses new ones (kFull) rather than forget one, which would let
// that request be replayed. Only verified signatures should be admitted (otherwise anyone
// could fill it). Thread-safe: one mutex, held for O(log n) per call.
//
// One cache per receiving process: several `awa serve` behind a load balancer do not see
// each other's signatures.
class CallbackReplayCache {
 public:
  static constexpr std::size_t kDefaultCapacity = 100'000;

  enum class Admission {
    kAdmitted,  // first time seen: go ahead (it is now recorded)
    kReplayed,  // seen before, and its timestamp is still inside the window: refuse
    kFull,      // `capacity` signatures are inside their window: refuse, retry later
  };

  explicit CallbackReplayCache(std::size_t capacity = kDefaultCapacity);
  ~CallbackReplayCache();
  CallbackReplayCache(const CallbackReplayCache&) = delete;
  CallbackReplayCache& operator=(const CallbackReplayCache&) = delete;

  // Records `signature`, whose request is timestamped `timestamp`, at `now` (unix
  // seconds), first dropping every signature whose window ended before `now`.
  Admission admit(std::string_view signature, std::int64_t timestamp, std::int64_t now);
  // The signatures held.
  std::size_t size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace awa
