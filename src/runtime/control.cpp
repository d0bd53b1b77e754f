// The control thread: batched heartbeats, and the cancels the listener hands it
// (runtime/listener.cpp); the pooled mode's NOTIFY self-test.
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
using std::chrono::milliseconds;

// How long the pooled mode's NOTIFY self-test waits for its notification: on a direct
// session it arrives within milliseconds.
constexpr milliseconds kSelfTestWait{1000};

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
  auto next_beat = Clock::now() + options_.heartbeat_interval;
  // start() registered the instance; a failed registration is retried at the next beat.
  auto next_instance_beat = Clock::now() + runtime::InstanceRegistry::kBeatInterval;
  for (;;) {
    std::vector<std::string> cancels;
    {
      std::unique_lock lock(mu_);
      control_cv_.wait_until(lock, std::min(next_beat, next_instance_beat),
                             [&] { return control_stop_ || !cancels_.empty(); });
      if (control_stop_) break;
      cancels.swap(cancels_);
    }
    // From the listener. Without one (pooled without a direct URL) a cancel reaches its
    // handler at the next heartbeat, which finds the attempt closed.
    for (const auto& payload : cancels) cancel_running(payload);
    if (Clock::now() >= next_beat) {
      beat_all();
      next_beat = Clock::now() + options_.heartbeat_interval;
    }
    if (Clock::now() >= next_instance_beat) {
      beat_instance();
      next_instance_beat = Clock::now() + runtime::InstanceRegistry::kBeatInterval;
    }
  }
}

bool Client::Impl::notify_self_test() {
  // A channel nobody else uses; "awa-wake:" channels never collide with a queue's.
  const auto channel = fmt::format("awa-wake:{}:self-test", token_);
  const bool direct = !options_.direct_database_url.empty();
  auto listener = pg::Connection::connect(session_connect_options());
  listener.listen(channel);
  {
    // Sent the way producers send theirs: a statement through the pool.
    auto conn = pool_->acquire();
    conn->exec(wake_sql_, pg::make_params(channel));
  }
  bool ok = false;
  const auto deadline = Clock::now() + kSelfTestWait;
  while (!ok) {
    const auto left = until(deadline);
    if (left.count() == 0) break;
    const auto n = listener.wait_notification(left);
    if (!n) break;
    ok = n->channel == channel;
  }
  if (!direct) {
    // Through a transaction pooler the LISTEN stays registered on whichever server
    // session ran it (UNLISTEN may run on another): harmless, nothing notifies the channel
    // again. Best effort, like closing the connection.
    try {
      listener.unlisten(channel);
    } catch (const std::exception& e) {
      spdlog::debug("notify self-test: unlisten: {}", e.what());
    }
  }
  storage::metrics_registry(*store_)
      .gauge("awa_notify_ok",
             "1 when the start-up NOTIFY self-test of a pooled client (ClientOptions::pooled) "
             "saw its notification arrive where the runtime LISTENs, 0 when the pooler "
             "swallowed it; one series per schema.",
             {"schema"})
      .with({options_.schema})
      .set(ok ? 1 : 0);
  if (direct) {
    if (ok) {
      spdlog::info("notify self-test: ok (LISTEN on the direct URL, NOTIFY through the pool)");
    } else {
      spdlog::warn(
          "notify self-test: a NOTIFY sent through the pool did not reach the LISTEN on the "
          "direct URL within {} ms: do both URLs name the same database? Claimers fall back "
          "to polling every poll_interval",
          kSelfTestWait.count());
    }
  } else if (ok) {
    spdlog::info(
        "notify self-test: a LISTEN on a pooled connection received the notification, but a "
        "transaction pooler may move the session at any time; working poll-only anyway (set "
        "direct_database_url for notification wake-ups)");
  } else {
    spdlog::warn(
        "notify self-test: swallowed: a LISTEN on a pooled connection did not receive a "
        "NOTIFY within {} ms (a transaction pooler); working poll-only: pickup within each "
        "queue's poll_interval, cancels at the next heartbeat (set direct_database_url for "
        "notification wake-ups)",
        kSelfTestWait.count());
  }
  return ok;
}

}  // namespace awa
