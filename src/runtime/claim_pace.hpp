// A queue's pace, as its dispatchers see it (docs/runtime.md, "Prefetch"): how many jobs
// the workers start per millisecond and how long a claim takes, both smoothed, and from
// them the prefetch goal — what the workers start during one claim round trip.
//
// Not thread-safe: the runtime keeps one per queue under its mutex.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>

namespace awa::runtime {

class ClaimPace {
 public:
  using Clock = std::chrono::steady_clock;

  // Weight of the newest sample in the smoothed values.
  static constexpr double kSmoothing = 0.5;
  // A claimer claims once half of (free workers + goal) is missing, so the goal is twice
  // what the workers start during one claim: what a claim brings then lasts about as
  // long as the next claim takes.
  static constexpr double kGoalFactor = 2.0;
  // Starts are counted over windows at least this long (shorter ones are noise).
  static constexpr std::chrono::microseconds kMinWindow{2000};

  // After a claim that brought rows and took `took`; `started` = the queue's handler
  // starts so far.
  void claimed(Clock::duration took, std::uint64_t started, Clock::time_point now) {
    const double ms = std::chrono::duration<double, std::milli>(took).count();
    claim_ms_ = claim_ms_ == 0 ? ms : claim_ms_ + kSmoothing * (ms - claim_ms_);
    observe(started, now);
  }

  // Updates the start rate (also when no claim was needed for a while, so that the goal
  // of a queue whose handlers slowed down shrinks).
  void observe(std::uint64_t started, Clock::time_point now) {
    if (!since_) {
      since_ = now;
      started_since_ = started;
      return;
    }
    const auto window = now - *since_;
    if (window < kMinWindow) return;
    const double per_ms = static_cast<double>(started - started_since_) /
                          std::chrono::duration<double, std::milli>(window).count();
    per_ms_ += kSmoothing * (per_ms - per_ms_);
    since_ = now;
    started_since_ = started;
  }

  // Jobs to hold claimed ahead of free workers: at most max_prefetch.
  int goal(int max_prefetch) const {
    // Rounded down: a queue that starts less than one job per claim prefetches none.
    const double g = std::floor(kGoalFactor * per_ms_ * claim_ms_);
    return static_cast<int>(std::clamp(g, 0.0, static_cast<double>(std::max(max_prefetch, 0))));
  }

  double starts_per_ms() const { return per_ms_; }
  double claim_ms() const { return claim_ms_; }

 private:
  double per_ms_ = 0;
  double claim_ms_ = 0;
  std::optional<Clock::time_point> since_;
  std::uint64_t started_since_ = 0;
};

// How many rows a claimer should claim now, or 0 to wait (Client::Impl::claim_want):
// `room` workers could start a job now and `goal` more are wanted claimed ahead of them;
// `held` are claimed and waiting for a worker, `claiming` are in claims in flight. A
// claimer claims once what is missing reaches 1/(2 x claimers) of room + goal — so a busy
// queue claims in large batches, its claimers staggered, and an idle one for a single
// free worker — or a full claim_batch, whichever is smaller: a target of more than
// 2 x claimers batches would otherwise wait for a shortfall that no one claim can fill,
// and the queue would claim only when the pace had decayed (every poll interval).
inline int claim_size(int room, int goal, int held, int claiming, int claim_batch, int claimers) {
  const int target = room + goal;
  const int want = std::min(target - held - claiming, claim_batch);
  const int threshold = std::min(claim_batch, std::max(1, target / (2 * std::max(claimers, 1))));
  return want >= threshold ? want : 0;
}

}  // namespace awa::runtime
