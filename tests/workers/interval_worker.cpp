// A worker process for the cross-process limit tests (tests/integration/
// queue_limits_process_pgtest.cpp): the real runtime, through the public API only, with
// one job kind, "interval", that records when its handler runs by the database server's
// clock (one clock for every process), then sleeps {"ms": N}.
//
//   interval_worker SCHEMA QUEUE MAX_WORKERS   (DATABASE_URL from the environment)
//
// Each handler writes (job_id, attempt, pid, started_at) to SCHEMA.limit_intervals before
// its work and ended_at after it, so a recorded interval lies inside its attempt (claimed
// before the first write, closed after the second). Runs until SIGTERM or SIGINT.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "worker_support.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: interval_worker SCHEMA QUEUE MAX_WORKERS\n";
    return 2;
  }
  const std::string url = awa::test_workers::database_url_or_exit("interval_worker");
  const std::string schema = argv[1];
  const std::string table = fmt::format("\"{}\".limit_intervals", schema);

  sigset_t stop = awa::test_workers::block_stop_signals();

  awa::ClientOptions o;
  o.database_url = url;
  o.schema = schema;
  o.migrate = false;
  o.maintenance = false;
  o.ring_rotate_interval = std::chrono::milliseconds(0);
  o.application_name = "awa_tests_interval_worker";
  awa::Client client(o);
  const int pid = static_cast<int>(::getpid());
  client.register_worker("interval", [&](awa::JobContext& job) {
    auto& conn = awa::test_workers::thread_connection(url);
    conn.execute(fmt::format(
        "INSERT INTO {} (job_id, attempt, pid, started_at) VALUES ({}, {}, {}, clock_timestamp())",
        table, job.job_id(), job.attempt(), pid));
    std::this_thread::sleep_for(std::chrono::milliseconds(job.args().value("ms", 0L)));
    conn.execute(
        fmt::format("UPDATE {} SET ended_at = clock_timestamp() WHERE job_id = {} AND attempt = {}",
                    table, job.job_id(), job.attempt()));
    return awa::JobResult::completed();
  });
  awa::QueueConfig q;
  q.name = argv[2];
  q.max_workers = std::atoi(argv[3]);
  q.poll_interval = std::chrono::milliseconds(1000);
  client.add_queue(q);
  client.start();
  std::cout << "interval_worker: running (pid " << pid << ")" << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  client.stop();
  const auto s = client.stats();
  std::cout << "interval_worker: claimed " << s.claimed << " completed " << s.completed
            << std::endl;
  return 0;
}
