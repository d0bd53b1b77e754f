// The ordering-key hash and shard routing (docs/design/engine.md), without a database.
// The SQL side is compared against this in tests/integration/routing_pgtest.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "awa/error.hpp"
#include "awa/queue_storage.hpp"

namespace awa {
namespace {

using namespace std::string_view_literals;

TEST(RoutingTest, HashMatchesTheDesignTestVectors) {
  // Guards bit-identity with the hash's published vectors (shared with the SQL and
  // any other-language producer).
  EXPECT_EQ(ordering_key_hash(""), 14695981039346656037ULL);
  EXPECT_EQ(ordering_key_hash("a"), 12638153115695167552ULL);
  EXPECT_EQ(ordering_key_hash("customer-42"), 695220319317454988ULL);
  EXPECT_EQ(shard_for_ordering_key("customer-42", 8), 4);
}

TEST(RoutingTest, HashTreatsBytesAsUnsigned) {
  // Guards against sign-extending bytes >= 0x80 (char is signed on x86): the hash is
  // defined over unsigned bytes. Expected values computed independently (Python).
  EXPECT_EQ(ordering_key_hash("\x00"sv), 12638153115695167455ULL);
  EXPECT_EQ(ordering_key_hash("\xff"sv), 12638153115695167710ULL);
  EXPECT_EQ(ordering_key_hash("\x00\xff"sv), 590684067820433644ULL);
  EXPECT_EQ(ordering_key_hash("\xc3\xbc"sv), 590898472587934722ULL);  // "ü" in UTF-8
  EXPECT_EQ(shard_for_ordering_key("\xff"sv, 64), 30);
  EXPECT_EQ(shard_for_ordering_key("\x00\xff"sv, 64), 44);
}

TEST(RoutingTest, HashIsMultiplyThenAddNotFnv1a) {
  // Guards the documented formula h = h * P + b against the look-alike FNV-1a
  // (h = (h ^ b) * P), which agrees on nothing but the empty key.
  constexpr std::uint64_t kOffset = 14695981039346656037ULL;
  constexpr std::uint64_t kPrime = 1099511628211ULL;
  EXPECT_EQ(ordering_key_hash("a"), kOffset * kPrime + 'a');
  EXPECT_NE(ordering_key_hash("a"), (kOffset ^ 'a') * kPrime);
}

TEST(RoutingTest, EmbeddedNulBytesAreHashed) {
  // Guards against treating the key as a C string: "a\0b" and "a" must differ.
  EXPECT_NE(ordering_key_hash("a\0b"sv), ordering_key_hash("a"));
  EXPECT_NE(ordering_key_hash("\0"sv), ordering_key_hash(""));
}

TEST(RoutingTest, OneShardAlwaysRoutesToShardZero) {
  // Guards the S = 1 contract: the key is ignored.
  for (const auto key : {""sv, "a"sv, "customer-42"sv, "\xff\x00"sv}) {
    EXPECT_EQ(shard_for_ordering_key(key, 1), 0);
  }
}

TEST(RoutingTest, ShardIsHashModuloShardCount) {
  // Guards shard = h mod S for every allowed S.
  const std::string key = "order-\x01\x02\xfe";
  const std::uint64_t h = ordering_key_hash(key);
  for (int s = 1; s <= 64; ++s) {
    EXPECT_EQ(shard_for_ordering_key(key, s), static_cast<int>(h % static_cast<std::uint64_t>(s)))
        << "S=" << s;
  }
}

TEST(RoutingTest, RejectsShardCountsOutsideOneToSixtyFour) {
  // Guards the 1..64 REQUIRES of shard_for_ordering_key (the queue_meta CHECK range).
  for (const int bad : {0, 65, -1}) {
    try {
      shard_for_ordering_key("k", bad);
      ADD_FAILURE() << "S=" << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.sqlstate(), "22023");
      EXPECT_EQ(e.retry(), Retry::kDoNotRetry);
    }
  }
  EXPECT_NO_THROW(shard_for_ordering_key("k", 64));
}

}  // namespace
}  // namespace awa
