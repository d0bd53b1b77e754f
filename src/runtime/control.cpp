// The control thread: batched heartbeats, and the "awa:cancel" listener.
#include "runtime/client_impl.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include <spdlog/spdlog.h>

#include "awa/error.hpp"
#include "storage/store_access.hpp"

namespace awa {
namespace {

using Clock = std::chrono::steady_clock;
using client_detail::kMaxBackoff;
using client_detail::kMinBackoff;
using std::chrono::milliseconds;

constexpr std::string_view kCancelChannel = "awa:cancel";
constexpr milliseconds kControlPoll{1000};

milliseconds until(Clock::time_point t) {
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(t - Clock::now()));
}

}  // namespace

void Client::Impl::beat_one(Job& job, std::optional<std::string> progress) {
  try {
    auto conn = pool_->acquire();
    const auto beat = QueueStorage::Heartbeat::of(job.entry(), std::move(progress));
    if (storage::consumer(*store_).heartbeat(*conn, std::span(&beat, 1)).empty())
      job.request_stop();
  } catch (const Error& e) {
    // Progress is best effort; the periodic heartbeat keeps the attempt alive.
    spdlog::warn("job {}: heartbeat failed: {}", job.job_id(), e.what());
  }
}

void Client::Impl::beat_all() {
  std::vector<QueueStorage::Heartbeat> beats;
  {
    std::lock_guard lock(mu_);
    beats.reserve(running_.size());
    for (const auto& [key, job] : running_)
      beats.push_back(QueueStorage::Heartbeat::of(job->entry()));
  }
  if (!beats.empty()) stop_closed(beats, "closed elsewhere (cancelled or rescued)");
}

void Client::Impl::stop_closed(const std::vector<QueueStorage::Heartbeat>& beats,
                               std::string_view why) {
  try {
    auto conn = pool_->acquire();
    const auto open = storage::consumer(*store_).heartbeat(*conn, beats);
    const std::set<std::pair<JobId, std::int64_t>> still(open.begin(), open.end());
    std::lock_guard lock(mu_);
    for (const auto& b : beats) {
      const std::pair key{b.job_id, b.run_lease};
      if (still.contains(key)) continue;
      // A job that finished just now is gone from running_ and needs nothing.
      if (const auto it = running_.find(key); it != running_.end()) {
        spdlog::info("job {}: attempt {} {}; stopping its handler", b.job_id, b.run_lease, why);
        it->second->request_stop();
      }
    }
  } catch (const Error& e) {
    spdlog::warn("heartbeat of {} attempts failed: {}", beats.size(), e.what());
  }
}

void Client::Impl::cancel_running(std::string_view payload) {
  JobId id = 0;
  const auto* last = payload.data() + payload.size();
  const auto [end, ec] = std::from_chars(payload.data(), last, id);
  if (ec != std::errc() || end != last) return;
  std::vector<QueueStorage::Heartbeat> beats;
  {
    std::lock_guard lock(mu_);
    for (auto it = running_.lower_bound({id, INT64_MIN});
         it != running_.end() && it->first.first == id; ++it) {
      beats.push_back(QueueStorage::Heartbeat::of(it->second->entry()));
    }
  }
  if (!beats.empty()) stop_closed(beats, "cancelled");
}

void Client::Impl::beat_instance() {
  try {
    auto conn = pool_->acquire();
    instance_->beat(*conn);
    if (instance_failing_)
      spdlog::info("runtime_instances: instance {} seen again", instance_->id());
    instance_failing_ = false;
  } catch (const std::exception& e) {
    // Only `awa health` loses sight of this worker; never stop working for it.
    if (!instance_failing_)
      spdlog::warn("runtime_instances: cannot register instance {}: {}", instance_->id(), e.what());
    instance_failing_ = true;
  }
}

void Client::Impl::control() {
  std::optional<pg::Connection> conn;
  auto backoff = kMinBackoff;
  auto next_connect = Clock::now();
  auto next_beat = Clock::now() + options_.heartbeat_interval;
  // start() registered the instance; a failed registration is retried at the next beat.
  auto next_instance_beat = Clock::now() + runtime::InstanceRegistry::kBeatInterval;
  const auto wake_channel = control_wake_channel();
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (control_stop_) break;
    }
    if (Clock::now() >= next_beat) {
      beat_all();
      next_beat = Clock::now() + options_.heartbeat_interval;
    }
    if (Clock::now() >= next_instance_beat) {
      beat_instance();
      next_instance_beat = Clock::now() + runtime::InstanceRegistry::kBeatInterval;
    }
    if (!conn && Clock::now() >= next_connect) {
      try {
        conn.emplace(pg::Connection::connect(connect_options()));
        conn->listen(kCancelChannel);
        conn->listen(wake_channel);
        backoff = kMinBackoff;
      } catch (const std::exception& e) {
        spdlog::warn("cancel listener: {} (retrying in {} ms)", e.what(), backoff.count());
        conn.reset();
        next_connect = Clock::now() + backoff;
        backoff = std::min(backoff * 2, kMaxBackoff);
      }
    }
    if (conn) {
      try {
        // A cancel missed while disconnected is caught by the next heartbeat, which
        // finds the attempt closed.
        // Capped so that stop() is noticed even if its wake notification is lost.
        if (auto n = conn->wait_notification(std::min(until(next_beat), kControlPoll))) {
          if (n->channel == kCancelChannel) cancel_running(n->payload);
        }
      } catch (const std::exception& e) {
        spdlog::warn("cancel listener: {}", e.what());
        conn.reset();
        next_connect = Clock::now() + backoff;
      }
    } else {
      std::unique_lock lock(mu_);
      control_cv_.wait_until(lock, std::min({next_beat, next_connect, next_instance_beat}),
                             [&] { return control_stop_; });
    }
  }
}

}  // namespace awa
