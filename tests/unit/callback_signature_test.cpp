// The callback signature of awa serve's POST /api/callbacks/... (awa/callback.hpp): the
// canonical query, the string to sign, the HMAC, and the replay cache.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "awa/callback.hpp"
#include "awa/error.hpp"

namespace awa {
namespace {

constexpr const char* kSecret = "0123456789abcdef-secret";
constexpr const char* kPath = "/api/callbacks/6f1c1a52-8d0e-4d3b-9b2a-0c5e7f3a9d10";
constexpr std::int64_t kTs = 1700000000;

TEST(CallbackSignatureTest, CanonicalQueryDecodesSortsAndReencodes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", ""},
      {"b=2&a=x+y", "a=x%20y&b=2"},
      {"a=%7e&a=%41", "a=A&a=~"},  // sorted by encoded value when names tie
      {"flag", "flag="},
      {"&&x=1&", "x=1"},
      {"e=%zz", "e=%25zz"},  // a '%' without two hex digits stands for itself
      {"x=%u0041", "x=%25u0041"},
      {"k=a%26b%3Dc", "k=a%26b%3Dc"},
      {"n=%C3%A9", "n=%C3%A9"},
      {"n=%c3%a9", "n=%C3%A9"},
      {"a=1=2", "a=1%3D2"},            // split at the first '='
      {"Z=1&a=1&_=1", "Z=1&_=1&a=1"},  // byte order of the encoded names
      {"s=a%20b+c", "s=a%20b%20c"},
      {"p=/x?y", "p=%2Fx%3Fy"},
  };
  // The expectations are what docs/api.md's Python canonical_query() answers.
  for (const auto& [query, canonical] : cases)
    EXPECT_EQ(callback_canonical_query(query), canonical) << query;
  EXPECT_EQ(callback_query_string({{"timeout_s", "7200"}, {"error", "a b&c"}}),
            "error=a%20b%26c&timeout_s=7200");
  // Canonical in, the same out.
  EXPECT_EQ(callback_canonical_query("error=a%20b%26c&timeout_s=7200"),
            "error=a%20b%26c&timeout_s=7200");
  // Bytes, not text: a NUL and a high byte survive the round trip.
  const std::string raw = std::string("a\0b", 3) + "\xff";
  const auto q = callback_query_string({{"v", raw}});
  EXPECT_EQ(q, "v=a%00b%FF");
  const auto back = callback_query_params(q);
  ASSERT_EQ(back.size(), 1U);
  EXPECT_EQ(back[0].second, raw);
}

TEST(CallbackSignatureTest, TheStringToSignNamesEveryPartOfTheRequest) {
  // The request views its target: the string must outlive it.
  const std::string target = std::string(kPath) + "/heartbeat?b=2&a=1#frag";
  const auto r = callback_request("POST", target, "{}");
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, std::string(kPath) + "/heartbeat");
  EXPECT_EQ(r.query, "b=2&a=1");
  EXPECT_EQ(r.body, "{}");
  EXPECT_EQ(callback_string_to_sign(kTs, r),
            "awa-callback-v1\n1700000000\nPOST\n" + std::string(kPath) + "/heartbeat\na=1&b=2\n{}");
  // No query, no body: the lines are still there.
  EXPECT_EQ(callback_string_to_sign(kTs, callback_request("POST", "/p", "")),
            "awa-callback-v1\n1700000000\nPOST\n/p\n\n");
  // A line feed would let one field pass for another.
  CallbackRequest bad;
  bad.path = "/p\nx";
  EXPECT_THROW(callback_string_to_sign(kTs, bad), InvalidArgument);
  bad.path = "/p";
  bad.method = "";
  EXPECT_THROW(callback_string_to_sign(kTs, bad), InvalidArgument);
  EXPECT_FALSE(callback_signature_valid(kSecret, kTs, bad, "sha256=00", kTs));
}

// Independent HMAC-SHA256s (Python's hmac module, and `openssl dgst -sha256 -hmac`) of the
// strings docs/api.md gives as examples.
TEST(CallbackSignatureTest, MatchesAnIndependentHmac) {
  const std::string fail = std::string(kPath) + "/fail";
  EXPECT_EQ(callback_signature(
                kSecret, kTs,
                callback_request("POST", fail, R"({"error":"declined","retryable":false})")),
            "sha256=03e71a3e764fe608cc6f1cb5f08545dd27b0f05cef766c182aec8a355079ec77");
  const std::string heartbeat = std::string(kPath) + "/heartbeat?timeout_s=7200";
  EXPECT_EQ(callback_signature(kSecret, kTs, callback_request("POST", heartbeat, "")),
            "sha256=52c2ebefeb2ba2037eec9aebf5fb1e5fa0a19f5982ad8ad9bddd241e96bc4768");
}

// Issue 31: the signature covered "<ts>.<body>" only; now any change to the request
// (another id, another action, a query parameter added or changed, another method) makes
// it fail, as do another body, timestamp or secret, and a timestamp outside the window.
TEST(CallbackSignatureTest, ASignatureIsGoodForItsOwnRequestOnly) {
  const std::string body = R"({"timeout_s":60})";
  const std::string target = std::string(kPath) + "/heartbeat";
  const auto r = callback_request("POST", target, body);
  const std::string sig = callback_signature(kSecret, kTs, r);
  EXPECT_TRUE(callback_signature_valid(kSecret, kTs, r, sig, kTs));
  EXPECT_TRUE(callback_signature_valid(kSecret, kTs, r, sig, kTs + 300));
  EXPECT_TRUE(callback_signature_valid(kSecret, kTs, r, sig, kTs - 300));
  EXPECT_FALSE(callback_signature_valid(kSecret, kTs, r, sig, kTs + 301));
  EXPECT_FALSE(callback_signature_valid(kSecret, kTs, r, sig, kTs - 301));

  const auto refused = [&](const CallbackRequest& other) {
    return !callback_signature_valid(kSecret, kTs, other, sig, kTs);
  };
  EXPECT_TRUE(refused(callback_request(
      "POST", "/api/callbacks/00000000-0000-4000-8000-000000000000/heartbeat", body)));
  EXPECT_TRUE(refused(callback_request("POST", std::string(kPath) + "/fail", body)));
  EXPECT_TRUE(refused(callback_request("POST", std::string(kPath) + "/complete", body)));
  EXPECT_TRUE(refused(callback_request("POST", target + "?timeout_s=1", body)));
  EXPECT_FALSE(refused(callback_request("POST", target + "?", body))) << "an empty query";
  EXPECT_TRUE(refused(callback_request("PUT", target, body)));
  EXPECT_TRUE(refused(callback_request("POST", target, body + " ")));
  EXPECT_TRUE(refused(callback_request("POST", target, "")));
  EXPECT_FALSE(callback_signature_valid(kSecret, kTs + 1, r, sig, kTs));
  EXPECT_FALSE(callback_signature_valid("another-secret-0123", kTs, r, sig, kTs));
  EXPECT_FALSE(callback_signature_valid(kSecret, kTs, r, sig.substr(0, 20), kTs));
  EXPECT_FALSE(callback_signature_valid(kSecret, kTs, r, "", kTs));

  // The query is signed in canonical form: order and spelling do not matter, values do.
  const auto q = callback_request("POST", target + "?retryable=false&error=a%20b", "");
  const std::string qsig = callback_signature(kSecret, kTs, q);
  EXPECT_TRUE(callback_signature_valid(
      kSecret, kTs, callback_request("POST", target + "?error=a+b&retryable=false", ""), qsig,
      kTs));
  EXPECT_FALSE(callback_signature_valid(
      kSecret, kTs, callback_request("POST", target + "?error=a+b&retryable=true", ""), qsig, kTs));
  EXPECT_FALSE(callback_signature_valid(
      kSecret, kTs, callback_request("POST", target + "?error=a+b", ""), qsig, kTs));
  // The parameter moved from the query into the body: another request.
  EXPECT_FALSE(callback_signature_valid(
      kSecret, kTs, callback_request("POST", target, "retryable=false"), qsig, kTs));
}

TEST(CallbackReplayCacheTest, AdmitsASignatureOnceWhileItsTimestampIsInTheWindow) {
  CallbackReplayCache cache;
  EXPECT_EQ(cache.admit("sha256=aa", kTs, kTs), CallbackReplayCache::Admission::kAdmitted);
  EXPECT_EQ(cache.admit("sha256=aa", kTs, kTs + 1), CallbackReplayCache::Admission::kReplayed);
  EXPECT_EQ(cache.admit("sha256=bb", kTs, kTs + 1), CallbackReplayCache::Admission::kAdmitted);
  // The last second the receiver accepts kTs: still a replay.
  EXPECT_EQ(cache.admit("sha256=aa", kTs, kTs + 300), CallbackReplayCache::Admission::kReplayed);
  EXPECT_EQ(cache.size(), 2U);
  // After it the receiver refuses the timestamp anyway; the cache forgets both.
  EXPECT_EQ(cache.admit("sha256=cc", kTs + 301, kTs + 301),
            CallbackReplayCache::Admission::kAdmitted);
  EXPECT_EQ(cache.size(), 1U);
  // A timestamp ahead of the clock is kept until its own window ends.
  EXPECT_EQ(cache.admit("sha256=dd", kTs + 601, kTs + 301),
            CallbackReplayCache::Admission::kAdmitted);
  EXPECT_EQ(cache.admit("sha256=dd", kTs + 601, kTs + 900),
            CallbackReplayCache::Admission::kReplayed);
  EXPECT_EQ(cache.size(), 1U);
}

TEST(CallbackReplayCacheTest, WhenFullItRefusesRatherThanForgetsALiveSignature) {
  CallbackReplayCache cache(2);
  EXPECT_EQ(cache.admit("a", kTs, kTs), CallbackReplayCache::Admission::kAdmitted);
  EXPECT_EQ(cache.admit("b", kTs + 10, kTs), CallbackReplayCache::Admission::kAdmitted);
  EXPECT_EQ(cache.admit("c", kTs, kTs), CallbackReplayCache::Admission::kFull);
  // Full, yet a replay is still told apart.
  EXPECT_EQ(cache.admit("a", kTs, kTs), CallbackReplayCache::Admission::kReplayed);
  EXPECT_EQ(cache.size(), 2U);
  // Once "a"'s window is over there is room again; "b"'s is not.
  EXPECT_EQ(cache.admit("c", kTs + 301, kTs + 301), CallbackReplayCache::Admission::kAdmitted);
  EXPECT_EQ(cache.admit("b", kTs + 10, kTs + 301), CallbackReplayCache::Admission::kReplayed);
  EXPECT_EQ(cache.size(), 2U);
}

// The server's threads share one cache: of many threads admitting the same signatures at
// once, exactly one wins each.
TEST(CallbackReplayCacheTest, ConcurrentAdmissionsOfOneSignatureAdmitOne) {
  constexpr int kThreads = 8;
  constexpr int kSignatures = 500;
  CallbackReplayCache cache;
  std::atomic<int> admitted{0};
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int s = 0; s < kSignatures; ++s) {
        if (cache.admit("sig-" + std::to_string(s), kTs, kTs) ==
            CallbackReplayCache::Admission::kAdmitted)
          admitted.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), kSignatures);
  EXPECT_EQ(cache.size(), static_cast<std::size_t>(kSignatures));
}

}  // namespace
}  // namespace awa
