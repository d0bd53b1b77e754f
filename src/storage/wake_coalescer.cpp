#include "storage/wake_coalescer.hpp"

namespace awa::storage {

std::vector<std::string> WakeCoalescer::carry(const std::vector<std::string>& queues,
                                              Clock::time_point now) {
  std::vector<std::string> out;
  std::lock_guard lock(mu_);
  for (const auto& q : queues) {
    auto& last = last_sent_[q];
    if (last == Clock::time_point{} || now - last >= kWindow) {
      last = now;
      out.push_back(q);
    }
  }
  return out;
}

std::vector<std::string> WakeCoalescer::after_commit(const std::vector<std::string>& queues,
                                                     Clock::time_point acked) {
  std::vector<std::string> out;
  std::lock_guard lock(mu_);
  for (const auto& q : queues) {
    auto& last = last_sent_[q];
    if (last == Clock::time_point{} || acked - last > kWindow) {
      last = acked;
      out.push_back(q);
    }
  }
  return out;
}

void WakeCoalescer::forget(const std::vector<std::string>& queues) {
  std::lock_guard lock(mu_);
  for (const auto& q : queues) last_sent_.erase(q);
}

}  // namespace awa::storage
