#include "schedule.hpp"

#include <algorithm>
#include <array>

namespace chaos {
namespace {

constexpr std::array kAllFaults = {FaultKind::kKillWorker, FaultKind::kStopWorker,
                                   FaultKind::kTerminateBackends, FaultKind::kTerminateLeader,
                                   FaultKind::kRestart};

}  // namespace

const char* name(FaultKind k) {
  switch (k) {
    case FaultKind::kKillWorker:
      return "kill-worker";
    case FaultKind::kStopWorker:
      return "stop-worker";
    case FaultKind::kTerminateBackends:
      return "terminate-backends";
    case FaultKind::kTerminateLeader:
      return "terminate-leader";
    case FaultKind::kRestart:
      return "restart-immediate";
  }
  return "?";
}

std::vector<PlannedFault> plan(const ScheduleOptions& o, std::mt19937_64& rng) {
  using std::chrono::milliseconds;
  std::vector<PlannedFault> out;
  std::vector<FaultKind> first(kAllFaults.begin(), kAllFaults.end());
  if (o.no_restart) std::erase(first, FaultKind::kRestart);
  std::shuffle(first.begin(), first.end(), rng);
  std::discrete_distribution<int> weighted({3.0, 2.0, 3.0, 2.0, o.no_restart ? 0.0 : 1.0});
  const auto end = milliseconds(std::max(0, o.seconds - 8) * 1000L);
  auto t = milliseconds(4000 + static_cast<long>(rng() % 1000));
  while (t <= end && static_cast<int>(out.size()) < o.max_faults) {
    const auto kind = out.size() < first.size()
                          ? first[out.size()]
                          : kAllFaults[static_cast<std::size_t>(weighted(rng))];
    out.push_back({t, kind});
    long gap = 2000 + static_cast<long>(rng() % 3000);
    if (kind == FaultKind::kRestart) gap += 8000;
    if (kind == FaultKind::kStopWorker) gap = std::max(gap, o.stale_ms + 3000);
    t += milliseconds(gap);
  }
  return out;
}

}  // namespace chaos
