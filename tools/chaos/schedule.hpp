// The fault harness's fault schedule (docs/reliability.md, "Fault harness"): which fault
// when, drawn from the run's seed so that a run can be repeated.
#pragma once

#include <chrono>
#include <random>
#include <vector>

namespace chaos {

enum class FaultKind { kKillWorker, kStopWorker, kTerminateBackends, kTerminateLeader, kRestart };

// The name a fault has in the harness's output ("kill-worker", ...).
const char* name(FaultKind k);

struct PlannedFault {
  std::chrono::milliseconds at;  // from the start of the fault phase
  FaultKind kind;
};

struct ScheduleOptions {
  int seconds = 60;  // length of the fault phase
  int max_faults = 40;
  long stale_ms = 2000;  // the workers' stale timeout: a stopped worker outlasts it
  bool no_restart = false;
};

// Every kind once (shuffled) first, then weighted random picks; gaps leave each fault time
// to play out (a restart takes seconds, a stop lasts past the stale timeout). Bounded by
// max_faults and by the window [4 s, seconds - 8 s].
std::vector<PlannedFault> plan(const ScheduleOptions& o, std::mt19937_64& rng);

}  // namespace chaos
