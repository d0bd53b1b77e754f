// The harness's parked callbacks: jobs of kind "park", whose handler in `awa work` parks
// the attempt waiting for an external callback (JobResult::wait_for_callback) with a
// timeout far beyond the run. They are healthy long-lived attempts: rescue must look past
// them to find a crashed worker's (a rescue that limits its candidates before judging
// them never gets there, and the drain then reports the crashed worker's jobs pending).
//
// start() enqueues `count` of them; then a resolver thread plays the other system: every
// turn it completes a few parked attempts through Admin::complete_external and enqueues as
// many new ones, so about `count` wait at any time while faults go on. After stop(), the
// drain calls answer_waiting() until the queue is empty, completing whatever parks. Every job is
// recorded for the ledger like a producer's (producer number `producer_index`).
//
// Thread safety: start(), stop(), answer_waiting() and results() from one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "awa/connection.hpp"
#include "producers.hpp"

namespace chaos {

struct ParkedOptions {
  std::string url;
  std::string queue;
  int count = 1000;           // parked at any time (about)
  int turnover_per_s = 20;    // completed and replaced per second during the run
  int producer_index = 1000;  // the ledger's producer number for these jobs
};

struct ParkedStats {
  std::int64_t enqueued = 0;
  std::int64_t resolved = 0;     // complete_external calls that ended a waiting attempt
  std::int64_t stale = 0;        // ... that found it ended already (rescued, say)
  std::int64_t errors = 0;       // failures the faults do not explain
  std::int64_t max_waiting = 0;  // most attempts seen parked at once
  std::vector<std::string> messages;
};

class ParkedCallbacks {
 public:
  explicit ParkedCallbacks(ParkedOptions options);
  ~ParkedCallbacks();
  ParkedCallbacks(const ParkedCallbacks&) = delete;
  ParkedCallbacks& operator=(const ParkedCallbacks&) = delete;

  // Enqueues the first `count` (one transaction) and starts the resolver.
  void start();
  // Waits (bounded) until `count` attempts are parked; false on timeout.
  bool wait_parked(std::chrono::seconds timeout);
  // Stops the resolver (joined).
  void stop();
  // After stop(): completes every attempt parked now (errors counted, never thrown).
  void answer_waiting();
  std::vector<ProducedJob> results() const { return jobs_; }
  ParkedStats stats() const { return stats_; }

 private:
  // `n` new park jobs in one transaction, recorded for the ledger.
  void enqueue(awa::Connection& conn, int n);
  // Completes up to `n` parked attempts; returns how many it found.
  int resolve(awa::Connection& conn, int n);
  std::int64_t waiting(awa::Connection& conn) const;
  // Counts a failure the faults do not explain.
  void note_error(const std::exception& e);
  void run();

  ParkedOptions options_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::int64_t seq_ = 0;
  std::vector<ProducedJob> jobs_;  // written by the resolver thread until stop()
  ParkedStats stats_;
  std::optional<awa::Connection> drain_conn_;
};

}  // namespace chaos
