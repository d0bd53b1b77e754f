// The listener thread: the Client's one LISTEN session.
//
// On every NOTIFY, PostgreSQL signals every backend of the database that LISTENs (on any
// channel), and each signalled backend runs a transaction to read the notification queue.
// A session per queue would multiply that cost by the number of queues (and by the
// cancel listener): one session per Client LISTENs on every channel the Client cares
// about, and routes each notification to the thread that acts on it.
#include "runtime/client_impl.hpp"

#include <spdlog/spdlog.h>

namespace awa {
namespace {

using client_detail::kMaxBackoff;
using client_detail::kMinBackoff;
using std::chrono::milliseconds;

constexpr std::string_view kCancelChannel = "awa:cancel";
// Capped so that stop() is noticed even if its wake notification is lost.
constexpr milliseconds kListenPoll{1000};

}  // namespace

void Client::Impl::notify_all_queues() {
  {
    std::lock_guard lock(mu_);
    for (auto& q : queues_) q->notified = true;
  }
  slot_cv_.notify_all();
}

void Client::Impl::route_notification(const pg::Notification& n) {
  if (n.channel == kCancelChannel) {
    {
      std::lock_guard lock(mu_);
      cancels_.push_back(n.payload);
    }
    control_cv_.notify_all();
    return;
  }
  bool any = false;
  {
    std::lock_guard lock(mu_);
    // Names over 59 bytes share hashed channels: every queue on the channel claims.
    for (auto& q : queues_) {
      if (q->channel != n.channel) continue;
      q->notified = true;
      any = true;
    }
  }
  if (any) slot_cv_.notify_all();
}

void Client::Impl::listen_loop() {
  std::optional<pg::Connection> conn;
  auto backoff = kMinBackoff;
  const auto wake_channel = listener_wake_channel();
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (listener_stop_) break;
    }
    if (!conn) {
      try {
        auto fresh = pg::Connection::connect(session_connect_options());
        fresh.listen(kCancelChannel);
        fresh.listen(wake_channel);
        for (const auto& q : queues_) fresh.listen(q->channel);
        conn.emplace(std::move(fresh));
        listening_.store(true);
        backoff = kMinBackoff;
        spdlog::debug("listener: listening on {} queue channels", queues_.size());
      } catch (const std::exception& e) {
        spdlog::warn("listener: {} (retrying in {} ms)", e.what(), backoff.count());
        std::unique_lock lock(mu_);
        control_cv_.wait_for(lock, backoff, [&] { return listener_stop_; });
        backoff = std::min(backoff * 2, kMaxBackoff);
        continue;
      }
      // A notification sent while nothing listened is lost: every queue claims once.
      // A cancel missed meanwhile is caught by the next heartbeat, which finds the
      // attempt closed.
      notify_all_queues();
    }
    try {
      if (auto n = conn->wait_notification(kListenPoll)) route_notification(*n);
    } catch (const std::exception& e) {
      spdlog::warn("listener: {}", e.what());
      listening_.store(false);
      conn.reset();
    }
  }
  listening_.store(false);
  spdlog::debug("listener: stopped");
}

}  // namespace awa
