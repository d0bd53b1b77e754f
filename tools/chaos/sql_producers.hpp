// The harness's producers in another language: tools/chaos/sql_producer.py (Python,
// psycopg2) enqueuing through insert_job_compat / insert_jobs_compat with unusual JSON, as
// child processes. Each writes JSON lines (one per job, one per producer error) that
// results() reads back into the ledger's form.
//
// Thread safety: one thread (the driver's main thread, which must outlive the children:
// processes.hpp).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "producers.hpp"

namespace chaos {

struct SqlProducerOptions {
  std::string script;  // path of sql_producer.py
  std::string url;
  std::string queue;
  int first_index = 0;  // producer numbers first_index, first_index + 1, ...
  int count = 1;
  double rate = 20.0;
  std::uint64_t seed = 1;
  bool huge_numbers = false;  // sql_producer.py --huge-numbers (1e400 in metadata)
  std::string log_dir;        // <log_dir>/sql-producer-<i>.{jsonl,log}
};

class SqlProducers {
 public:
  explicit SqlProducers(SqlProducerOptions options);
  ~SqlProducers();
  SqlProducers(const SqlProducers&) = delete;
  SqlProducers& operator=(const SqlProducers&) = delete;

  void start();
  // SIGTERM, then up to 15 s for each to finish its transaction (SIGKILL after).
  void stop();
  // After stop(): the jobs they enqueued, and their producer errors added to `stats`.
  std::vector<ProducedJob> results(ProducerStats& stats) const;

 private:
  SqlProducerOptions options_;
  std::vector<pid_t> pids_;
};

}  // namespace chaos
