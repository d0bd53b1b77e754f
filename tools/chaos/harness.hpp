// The fault harness's driver (chaos.cpp), shared with the fault injection (faults.cpp):
// its options, the worker slots and the Harness that runs a whole run.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "otlp_sink.hpp"
#include "pg/connection.hpp"
#include "schedule.hpp"

namespace chaos {

using Clock = std::chrono::steady_clock;
using Wall = std::chrono::system_clock;

struct Options {
  std::string url;
  std::string awa;
  std::string pg_script;
  std::string log_dir;
  std::string json;
  std::string queue = "chaos";
  // The exactly-once worker (awa_chaos_credit) and the queue of its "credit" jobs, served
  // by one more worker process beside the `awa work` ones. Empty: no credit jobs.
  std::string credit_worker;
  std::string credit_queue = "chaos-credit";
  int seconds = 60;
  std::uint64_t seed = 1;
  int workers = 3;
  // Handlers per worker process. The offered load (about 300 jobs/s with the defaults,
  // 13 % of them sleeping 0.1-5 s) must stay below what the workers can run, or a backlog
  // grows for the whole run and a long run cannot drain within --drain-seconds: with 4
  // slots a process, 12 in all, the workers ran about 210 jobs/s.
  int worker_slots = 16;
  int producers = 3;
  int sql_producers = 1;
  std::string sql_producer_script;
  bool huge_numbers = true;
  int parked = 1000;
  bool reshard = true;
  double rate = 20.0;
  int max_faults = 40;
  int drain_seconds = 60;
  long heartbeat_ms = 300;
  long stale_ms = 2000;
  bool no_restart = false;
  bool check_only = false;
};

struct Slot {
  pid_t pid = 0;
  bool expected_exit = false;  // we killed it
  std::optional<Clock::time_point> respawn_at;
  std::optional<Clock::time_point> cont_at;  // SIGSTOPped until then
  int spawns = 0;
};

class Harness {
 public:
  explicit Harness(Options o) : o_(std::move(o)), rng_(o_.seed) {}

  int run();

 private:
  awa::pg::Connection& admin();
  void say(const std::string& line) const;
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - started_).count(); }
  void spawn_worker(std::size_t i);
  void tend_workers();
  void inject(FaultKind kind);
  bool kill_worker();
  bool stop_worker();
  bool terminate_backends();
  bool terminate_leader();
  bool restart_server();
  void stop_workers();
  int sanitizer_reports() const;

  Options o_;
  std::mt19937_64 rng_;
  Clock::time_point started_ = Clock::now();
  std::optional<awa::pg::Connection> admin_;
  std::vector<Slot> slots_;
  std::optional<pid_t> restart_pid_;
  std::size_t restart_fault_ = 0;  // its index in fault_times_
  std::vector<Wall::time_point> fault_times_;
  std::vector<std::string> fault_lines_;
  std::unique_ptr<OtlpSink> otlp_;  // made before the first worker starts
  int unexpected_exits_ = 0;
  int stop_timeouts_ = 0;
};

}  // namespace chaos
