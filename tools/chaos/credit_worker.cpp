// awa_chaos_credit: the fault harness's exactly-once worker (docs/reliability.md). It works
// one queue whose "credit" jobs each write a credit row and complete the job in the same
// transaction of the handler's own (JobContext::complete_in), so a credit commits if and
// only if its job completes. The harness kills, stops and restarts it like the `awa work`
// processes; the ledger check (credits_not_once.sql) counts the credits per job.
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "sql_files.hpp"

namespace {

struct Options {
  std::string url;
  std::string queue;
  int slots = 4;
  int heartbeat_ms = 200;
  int stale_ms = 2000;
};

// How long a handler holds its transaction open after the credit, so that a SIGKILL or a
// rescue can land between the credit and the commit: the window the check is about.
constexpr auto kHold = std::chrono::milliseconds(30);

awa::JobResult credit(awa::JobContext& job, const std::string& url) {
  // One connection per worker thread, reopened after a failure.
  thread_local std::optional<awa::Connection> conn;
  if (!conn) conn.emplace(awa::Connection::connect(url, std::chrono::seconds(2)));
  try {
    awa::Transaction tx(*conn);
    conn->execute(chaos::sql::file("credit/credit.sql"), {job.job_id(), job.entry().run_lease});
    std::this_thread::sleep_for(kHold);
    job.complete_in(*conn);
    tx.commit();
  } catch (const awa::Error& e) {
    // 55000: the attempt is no longer current (rescued, cancelled): nothing of this
    // transaction applied. Anything else (a broken connection): start afresh next time.
    if (e.sqlstate() != "55000") conn.reset();
    throw;
  }
  return awa::JobResult::completed();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("awa_chaos_credit: the fault harness's exactly-once worker (run by awa_chaos)");
  app.add_option("--url", o.url, "DATABASE_URL")->required();
  app.add_option("--queue", o.queue, "the queue of the credit jobs")->required();
  app.add_option("--slots", o.slots, "worker threads");
  app.add_option("--heartbeat-ms", o.heartbeat_ms, "heartbeat interval");
  app.add_option("--stale-ms", o.stale_ms, "stale timeout");
  CLI11_PARSE(app, argc, argv);

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before any thread starts: they inherit it

  awa::ClientOptions c;
  c.database_url = o.url;
  c.migrate = false;
  c.max_workers = o.slots;
  c.pool_size = 4;
  c.heartbeat_interval = std::chrono::milliseconds(o.heartbeat_ms);
  c.stale_after = std::chrono::milliseconds(o.stale_ms);
  c.maintenance_interval = std::chrono::milliseconds(250);
  c.ring_rotate_interval = std::chrono::milliseconds(0);  // the ledger needs every record
  c.shutdown_timeout = std::chrono::milliseconds(3000);
  c.application_name = fmt::format("awa-chaos-credit-{}", ::getpid());
  awa::Client client(c);
  client.register_worker("credit", [&](awa::JobContext& job) { return credit(job, o.url); });
  awa::QueueConfig q;
  q.name = o.queue;
  q.max_workers = o.slots;
  q.poll_interval = std::chrono::milliseconds(250);
  client.add_queue(q);
  client.start();
  std::printf("awa_chaos_credit: working %s (pid %d)\n", o.queue.c_str(), ::getpid());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  client.stop();
  return 0;
}
