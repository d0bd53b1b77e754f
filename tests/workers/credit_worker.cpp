// A worker process for the exactly-once test (tests/integration/exactly_once_process_pgtest.cpp):
// the real runtime through the public API, with one job kind, "credit", whose handler
// credits an account and completes its job in one transaction (JobContext::complete_in).
//
//   credit_worker SCHEMA QUEUE MAX_WORKERS DEADLINE_MS   (DATABASE_URL from the environment)
//
// The handler, for args {"account": A, "amount": N, "slow_ms": S}: BEGIN; insert a credits
// row (job, attempt, pid, claim batch, lane_seq); on the job's first attempt sleep S ms
// (longer than the deadline: the attempt is rescued meanwhile); add N to account A; then
// complete_in, a few ms more (a window for SIGKILL between the completion and the
// commit), COMMIT. An attempt found no longer current (55000) rolls back. Runs until
// SIGTERM or SIGINT; maintenance on, so this process rescues what a killed one left.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "worker_support.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: credit_worker SCHEMA QUEUE MAX_WORKERS DEADLINE_MS\n";
    return 2;
  }
  const std::string url = awa::test_workers::database_url_or_exit("credit_worker");
  const std::string schema = argv[1];

  sigset_t stop = awa::test_workers::block_stop_signals();

  awa::ClientOptions o;
  o.database_url = url;
  o.schema = schema;
  o.migrate = false;
  o.heartbeat_interval = std::chrono::milliseconds(200);
  o.stale_after = std::chrono::seconds(1);
  o.maintenance_interval = std::chrono::milliseconds(100);
  o.ring_rotate_interval = std::chrono::milliseconds(0);
  o.application_name = "awa_tests_credit_worker";
  awa::Client client(o);
  const int pid = static_cast<int>(::getpid());
  std::atomic<int> refused{0};
  client.register_worker("credit", [&](awa::JobContext& job) {
    thread_local std::mt19937 rng{std::random_device{}()};
    auto& conn = awa::test_workers::thread_connection(url);
    const auto& e = job.entry();
    awa::Transaction tx(conn);
    conn.execute(fmt::format("INSERT INTO \"{}\".credits (job_id, attempt, pid, claim_batch, "
                             "lane_seq) VALUES ($1, $2, $3, $4, $5)",
                             schema),
                 {e.job_id, e.attempt, pid, e.claim_batch, e.lane_seq});
    if (job.attempt() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(job.args().value("slow_ms", 0)));
    }
    const int amount = job.args().value("amount", 1);
    conn.execute(
        fmt::format("UPDATE \"{}\".accounts SET balance = balance + $1 WHERE id = $2", schema),
        {amount, job.args().value("account", 0)});
    try {
      job.complete_in(conn, nlohmann::json{{"credited", amount}});
    } catch (const awa::Error& err) {
      if (err.sqlstate() == "55000") refused.fetch_add(1);
      throw;  // the transaction rolls back; the runtime's failure is stale
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 4));
    tx.commit();
    return awa::JobResult::completed();
  });
  awa::QueueConfig q;
  q.name = argv[2];
  q.max_workers = std::atoi(argv[3]);
  q.deadline = std::chrono::milliseconds(std::atoi(argv[4]));
  client.add_queue(q);
  client.start();
  std::cout << "credit_worker: running (pid " << pid << ")" << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  client.stop();
  const auto s = client.stats();
  std::cout << "credit_worker: claimed " << s.claimed << " completed " << s.completed << " refused "
            << refused.load() << " stale " << s.stale_completions << std::endl;
  return 0;
}
