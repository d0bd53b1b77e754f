// The fault harness's faults (docs/reliability.md, "Fault classes"): each picks its
// target among the processes and sessions the driver started, acts, and records a line;
// inject() logs it and notes the time for the recovery measure.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "awa/error.hpp"
#include "harness.hpp"
#include "processes.hpp"
#include "sql_files.hpp"

namespace chaos {

using std::chrono::milliseconds;

bool Harness::kill_worker() {
  std::vector<std::size_t> live;
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].pid != 0 && !slots_[i].cont_at) live.push_back(i);
  if (live.empty()) return false;
  const auto i = live[rng_() % live.size()];
  ::kill(slots_[i].pid, SIGKILL);
  slots_[i].expected_exit = true;
  fault_lines_.push_back(fmt::format("SIGKILL worker {} (pid {})", i, slots_[i].pid));
  return true;
}

bool Harness::stop_worker() {
  std::vector<std::size_t> live;
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].pid != 0 && !slots_[i].cont_at) live.push_back(i);
  if (live.empty()) return false;
  const auto i = live[rng_() % live.size()];
  const auto ms = o_.stale_ms + 1000 + static_cast<long>(rng_() % 1000);
  ::kill(slots_[i].pid, SIGSTOP);
  slots_[i].cont_at = Clock::now() + milliseconds(ms);
  fault_lines_.push_back(fmt::format("SIGSTOP worker {} (pid {}) for {} ms", i, slots_[i].pid, ms));
  return true;
}

bool Harness::terminate_backends() {
  // Workers name their sessions awa-work-<pid>; producers' public connections are "awa".
  const auto rows = admin().query(sql::file("faults/awa_sessions.sql"));
  if (rows.empty()) return false;
  std::vector<std::pair<std::string, std::string>> pool;  // (pid, application_name)
  for (int i = 0; i < rows.rows(); ++i)
    pool.emplace_back(rows.get<std::string>(i, 0), rows.get_opt<std::string>(i, 1).value_or(""));
  std::shuffle(pool.begin(), pool.end(), rng_);
  const auto n = std::min<std::size_t>(pool.size(), 1 + rng_() % 4);
  std::string what;
  for (std::size_t k = 0; k < n; ++k) {
    admin().query(sql::file("faults/terminate_backend.sql"), pool[k].first);
    what += fmt::format(" {}({})", pool[k].first, pool[k].second);
  }
  fault_lines_.push_back(
      fmt::format("pg_terminate_backend of {} of {} awa sessions:{}", n, pool.size(), what));
  return true;
}

bool Harness::terminate_leader() {
  // docs/runtime.md: the leader holds advisory lock (hashtext(schema), 1279607108).
  const auto rows = admin().query(sql::file("faults/maintenance_leader.sql"));
  if (rows.empty()) {
    fault_lines_.push_back("terminate leader: no leader holds the lock right now (skipped)");
    return false;
  }
  const auto pid = rows.get<std::string>(0, 0);
  admin().query(sql::file("faults/terminate_backend.sql"), pid);
  fault_lines_.push_back(fmt::format("pg_terminate_backend of the maintenance leader {} ({})", pid,
                                     rows.get_opt<std::string>(0, 1).value_or("")));
  return true;
}

bool Harness::restart_server() {
  if (restart_pid_) return false;
  admin_.reset();
  restart_pid_ = spawn({o_.pg_script, "restart-immediate"}, o_.log_dir + "/restart.log");
  fault_lines_.push_back("pg_ctl restart -m immediate");
  return true;
}

void Harness::inject(FaultKind kind) {
  const auto at = Wall::now();
  bool done = false;
  try {
    switch (kind) {
      case FaultKind::kKillWorker:
        done = kill_worker();
        break;
      case FaultKind::kStopWorker:
        done = stop_worker();
        break;
      case FaultKind::kTerminateBackends:
        done = terminate_backends();
        break;
      case FaultKind::kTerminateLeader:
        done = terminate_leader();
        break;
      case FaultKind::kRestart:
        done = restart_server();
        break;
    }
  } catch (const awa::Error& e) {
    fault_lines_.push_back(fmt::format("{} failed: {}", name(kind), e.what()));
  }
  say(fmt::format("fault {}: {}", name(kind), fault_lines_.empty() ? "" : fault_lines_.back()));
  if (done) {
    if (kind == FaultKind::kRestart) restart_fault_ = fault_times_.size();
    fault_times_.push_back(at);
  }
}

}  // namespace chaos
