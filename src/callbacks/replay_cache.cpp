// CallbackReplayCache (awa/callback.hpp): the signatures a receiver accepted, until their
// timestamps leave the window.
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_set>

#include "awa/callback.hpp"

namespace awa {

struct CallbackReplayCache::Impl {
  explicit Impl(std::size_t cap) : capacity(cap) {}

  const std::size_t capacity;
  mutable std::mutex mu;
  // Guarded by mu. Each signature once, by the end of its window; `seen` views the
  // strings in the map's nodes, which never move while the node lives.
  std::multimap<std::int64_t, std::string> by_expiry;
  std::unordered_set<std::string_view> seen;

  void drop_expired(std::int64_t now) {
    while (!by_expiry.empty() && by_expiry.begin()->first < now) {
      seen.erase(std::string_view(by_expiry.begin()->second));
      by_expiry.erase(by_expiry.begin());
    }
  }
};

CallbackReplayCache::CallbackReplayCache(std::size_t capacity)
    : impl_(std::make_unique<Impl>(capacity)) {}

CallbackReplayCache::~CallbackReplayCache() = default;

CallbackReplayCache::Admission CallbackReplayCache::admit(std::string_view signature,
                                                          std::int64_t timestamp,
                                                          std::int64_t now) {
  // The last second the receiver still accepts `timestamp` (saturating).
  constexpr std::int64_t kSkew = kCallbackMaxSkew.count();
  const std::int64_t expiry = timestamp > std::numeric_limits<std::int64_t>::max() - kSkew
                                  ? std::numeric_limits<std::int64_t>::max()
                                  : timestamp + kSkew;
  std::lock_guard lock(impl_->mu);
  impl_->drop_expired(now);
  if (impl_->seen.count(signature) != 0) return Admission::kReplayed;
  if (impl_->by_expiry.size() >= impl_->capacity) return Admission::kFull;
  const auto it = impl_->by_expiry.emplace(expiry, std::string(signature));
  impl_->seen.insert(std::string_view(it->second));
  return Admission::kAdmitted;
}

std::size_t CallbackReplayCache::size() const {
  std::lock_guard lock(impl_->mu);
  return impl_->by_expiry.size();
}

}  // namespace awa
