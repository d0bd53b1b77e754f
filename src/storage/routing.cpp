// Shard routing (docs/design/engine.md, "Routing producers into shards").
#include <string>
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

std::string notify_channel(std::string_view queue) {
  // 63 bytes is PostgreSQL's identifier limit, channel names included.
  if (queue.size() + 4 <= 63) return "awa:" + std::string(queue);
  return "awa:#" + std::to_string(ordering_key_hash(queue));
}

}  // namespace awa
