// C++ and SQL shard routing agree bit for bit: every producer routes the same key bytes to
// the same shard (docs/design/engine.md, "Routing producers into shards").
#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "awa/error.hpp"
#include "awa/queue_storage.hpp"
#include "pg/pipeline.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using namespace std::string_view_literals;

constexpr int kShardCounts[] = {1, 2, 3, 8, 64};

std::uint64_t parse_u64(std::string_view text) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    ADD_FAILURE() << "not a uint64: " << text;
  }
  return v;
}

// 2,000 keys: the edge cases first, then random bytes of random length up to the 256-byte
// limit (binary, including NUL and 0xFF), random UTF-8 text, and ASCII ids.
std::vector<std::string> sample_keys(std::uint32_t seed) {
  std::vector<std::string> keys = {
      "",
      std::string("\0"sv),
      "\xff",
      std::string("\0\xff\0"sv),
      std::string(256, '\xff'),
      std::string(256, '\0'),
      "a",
      "customer-42",
      "\xc3\xbc",                  // ü
      "\xe6\x97\xa5\xe6\x9c\xac",  // 日本
      "\xf0\x9f\x98\x80",          // 😀
  };
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<std::size_t> len(0, 256);
  const char* const kUtf8[] = {"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x8e\x89", "-", " "};
  std::uniform_int_distribution<std::size_t> pick(0, std::size(kUtf8) - 1);
  while (keys.size() < 2000) {
    std::string k;
    switch (keys.size() % 3) {
      case 0: {  // binary
        const std::size_t n = len(rng);
        for (std::size_t i = 0; i < n; ++i) k.push_back(static_cast<char>(byte(rng)));
        break;
      }
      case 1: {  // UTF-8 text, at most 256 bytes
        const std::size_t n = len(rng) / 4;
        for (std::size_t i = 0; i < n; ++i) k += kUtf8[pick(rng)];
        break;
      }
      default:
        k = "order-" + std::to_string(rng());
    }
    keys.push_back(std::move(k));
  }
  return keys;
}

class RoutingTest : public StorageTest {};

TEST_F(RoutingTest, CppAndSqlAgreeOnHashAndShardFor2000Keys) {
  // Guards bit-identity of ordering_key_hash / shard_for_ordering_key between
  // src/storage/routing.cpp and sql/functions/0010_routing.sql for S in {1,2,3,8,64}.
  const std::uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto keys = sample_keys(seed);
  ASSERT_EQ(keys.size(), 2000u);

  pg::Pipeline pipe = conn().pipeline();
  for (const auto& k : keys) {
    pg::Params p;
    p.add_bytea(k);
    pipe.add_cached(
        "SELECT ordering_key_hash($1::bytea)::text, octet_length($1::bytea),"
        " shard_for_ordering_key($1::bytea, 1), shard_for_ordering_key($1::bytea, 2),"
        " shard_for_ordering_key($1::bytea, 3), shard_for_ordering_key($1::bytea, 8),"
        " shard_for_ordering_key($1::bytea, 64)",
        p);
  }
  const auto results = pipe.run();
  ASSERT_EQ(results.size(), keys.size());

  int mismatches = 0;
  for (std::size_t i = 0; i < keys.size() && mismatches < 10; ++i) {
    const auto& r = results[i];
    const auto& k = keys[i];
    ASSERT_EQ(r.get<std::int64_t>(0, 1), static_cast<std::int64_t>(k.size()))
        << "key " << i << " did not reach the server intact";
    const std::uint64_t sql_hash = parse_u64(r.text(0, 0));
    if (sql_hash != ordering_key_hash(k)) {
      ++mismatches;
      ADD_FAILURE() << "key " << i << " (" << k.size() << " bytes): SQL hash " << sql_hash
                    << ", C++ hash " << ordering_key_hash(k);
    }
    for (std::size_t s = 0; s < std::size(kShardCounts); ++s) {
      const int sql_shard = r.get<int>(0, static_cast<int>(s) + 2);
      const int cpp_shard = shard_for_ordering_key(k, kShardCounts[s]);
      if (sql_shard != cpp_shard) {
        ++mismatches;
        ADD_FAILURE() << "key " << i << " S=" << kShardCounts[s] << ": SQL shard " << sql_shard
                      << ", C++ shard " << cpp_shard;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(RoutingTest, SqlHashMatchesTheDesignTestVectors) {
  // Guards the SQL function against the hash's published vectors directly (not only via C++).
  const auto r = conn().exec(
      "SELECT ordering_key_hash(''::bytea)::text, ordering_key_hash('a'::bytea)::text,"
      " ordering_key_hash('customer-42'::bytea)::text,"
      " shard_for_ordering_key('customer-42'::bytea, 8)");
  EXPECT_EQ(r.text(0, 0), "14695981039346656037");
  EXPECT_EQ(r.text(0, 1), "12638153115695167552");
  EXPECT_EQ(r.text(0, 2), "695220319317454988");
  EXPECT_EQ(r.get<int>(0, 3), 4);
}

TEST_F(RoutingTest, CppAndSqlAgreeOnNotifyChannels) {
  // Guards the twin of notify_channel(): the enqueue path notifies the channel the C++ side
  // computes (sql/queries/enqueue/notify.sql), while promotion, moves and unpausing notify
  // the SQL function's, and listeners listen on the C++ one. Around the 59-byte switch to
  // the hashed form, in ASCII and in two-byte UTF-8.
  std::vector<std::string> queues = {"a", "default", "emails.high-priority"};
  for (const int n : {58, 59, 60, 61, 200}) queues.emplace_back(static_cast<std::size_t>(n), 'q');
  std::string umlauts;
  while (umlauts.size() < 60) umlauts += "\xc3\xbc";  // 60 bytes, 30 characters
  queues.push_back(umlauts);
  queues.push_back(umlauts.substr(0, 58));
  for (const auto& q : queues) {
    const std::string sql(conn().query("SELECT notify_channel($1)", q).text(0, 0));
    EXPECT_EQ(sql, notify_channel(q)) << q.size() << "-byte queue name";
    EXPECT_LE(sql.size(), 63u) << "longer than a PostgreSQL identifier";
  }
}

TEST_F(RoutingTest, SqlRejectsShardCountsOutsideOneToSixtyFour) {
  // Guards the SQL side of the 1..64 range: 22023, like the C++ InvalidArgument.
  for (const int bad : {0, 65}) {
    try {
      conn().query("SELECT shard_for_ordering_key('k'::bytea, $1)", bad);
      ADD_FAILURE() << "S=" << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.sqlstate(), "22023") << e.what();
    }
  }
  EXPECT_EQ(conn().exec("SELECT shard_for_ordering_key('k'::bytea, 64)").get<int>(0, 0),
            shard_for_ordering_key("k", 64));
}

}  // namespace
}  // namespace awa::testing
