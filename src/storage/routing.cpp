// Shard routing (ADR-025 "Routing producers into shards").
#include <string_view>

#include "awa/error.hpp"
#include "awa/queue_storage.hpp"

namespace awa {

std::uint64_t ordering_key_hash(std::string_view key) {
  // Multiply, then add (not FNV-1a): the order matters for bit-identity with the SQL
  // function ordering_key_hash. Unsigned arithmetic wraps modulo 2^64 by definition.
  std::uint64_t h = 14695981039346656037ULL;
  for (const char c : key) {
    h = h * 1099511628211ULL + static_cast<unsigned char>(c);
  }
  return h;
}

int shard_for_ordering_key(std::string_view key, int shards) {
  if (shards < 1 || shards > 64) {
    throw InvalidArgument("shard count " + std::to_string(shards) +
                          " is outside the allowed range 1..64");
  }
  return static_cast<int>(ordering_key_hash(key) % static_cast<std::uint64_t>(shards));
}

}  // namespace awa
