#include "storage/busy_lanes.hpp"

#include <algorithm>

namespace awa::storage {

void BusyLanes::Hold::reset() {
  if (owner_ != nullptr && !lanes_.empty()) owner_->release(lanes_);
  owner_ = nullptr;
  lanes_.clear();
}

int& BusyLanes::count(const std::string& queue, int priority, int shard) {
  auto& per_shard = writers_[{queue, priority}];
  if (per_shard.size() <= static_cast<std::size_t>(shard)) {
    per_shard.resize(static_cast<std::size_t>(shard) + 1, 0);
  }
  return per_shard[static_cast<std::size_t>(shard)];
}

int BusyLanes::pick(const std::string& queue, int priority, int shards, int start, Hold& hold) {
  std::lock_guard lock(mu_);
  int chosen = start;
  const auto it = writers_.find({queue, priority});
  if (it != writers_.end()) {
    const auto& per_shard = it->second;
    const auto busy = [&](int s) {
      return static_cast<std::size_t>(s) < per_shard.size() &&
             per_shard[static_cast<std::size_t>(s)] > 0;
    };
    for (int k = 0; k < shards; ++k) {
      const int s = (start + k) % shards;
      if (!busy(s)) {
        chosen = s;
        break;
      }
    }
  }
  ++count(queue, priority, chosen);
  hold.owner_ = this;
  hold.lanes_.push_back(Lane{queue, priority, chosen});
  return chosen;
}

void BusyLanes::add(const std::string& queue, int priority, int shard, Hold& hold) {
  std::lock_guard lock(mu_);
  ++count(queue, priority, shard);
  hold.owner_ = this;
  hold.lanes_.push_back(Lane{queue, priority, shard});
}

int BusyLanes::writers(const std::string& queue, int priority, int shard) const {
  std::lock_guard lock(mu_);
  const auto it = writers_.find({queue, priority});
  if (it == writers_.end() || it->second.size() <= static_cast<std::size_t>(shard)) return 0;
  return it->second[static_cast<std::size_t>(shard)];
}

void BusyLanes::release(const std::vector<Lane>& lanes) {
  std::lock_guard lock(mu_);
  for (const auto& l : lanes) {
    const auto it = writers_.find({l.queue, l.priority});
    if (it == writers_.end()) continue;
    auto& per_shard = it->second;
    if (static_cast<std::size_t>(l.shard) < per_shard.size()) {
      --per_shard[static_cast<std::size_t>(l.shard)];
    }
    if (std::all_of(per_shard.begin(), per_shard.end(), [](int n) { return n <= 0; })) {
      writers_.erase(it);
    }
  }
}

}  // namespace awa::storage
