// `awa work`: runs the worker runtime (awa::Client) with a few built-in job kinds, until
// SIGINT or SIGTERM, then stops gracefully and prints a one-line summary. A second SIGINT
// or SIGTERM during the graceful stop ends the process at once with 128 + the signal (the
// shell's convention): the operator has chosen not to wait for the handlers, whose
// attempts stay open for rescue to retry.
//
// Built-in kinds:
//   noop   completes at once
//   sleep  {"ms": N}: sleeps N ms, returning early (as a retryable failure) when its stop
//          token fires (cancel, rescue elsewhere, shutdown past the grace period)
//   fail   {"mode": "retryable" | "terminal"}: fails that way (default retryable)
//   echo   logs its args and completes
//   flaky  {"fail_attempts": N, "retry_ms": M}: a retryable failure (retried after M ms)
//          on attempts 1..N, then completes (defaults 1 and 100): a retry that succeeds
//   park   {"timeout_ms": N}: parks the attempt waiting for an external callback (default
//          1 h); `awa callback complete|fail ID` or a signed POST ends it
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "awa/client.hpp"
#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

struct WorkArgs {
  std::vector<std::string> queues;
  int max_workers = 0;
  std::size_t pool_size = 8;
  std::string metrics_addr;
  std::string health_addr;
  long heartbeat_ms = 30000;
  long stale_ms = 90000;
  long maintenance_ms = 1000;
  long rotate_ms = 5000;
  long gauges_ms = 5000;
  long shutdown_timeout_ms = 10000;
  long poll_ms = 1000;
  int max_prefetch = QueueConfig{}.max_prefetch;
  bool no_maintenance = false;
  bool no_migrate = false;
  bool pooled = false;
  std::string direct_url;  // --direct-url, else $AWA_DIRECT_DATABASE_URL
};

// "name" or "name:N". Queue names may contain ':', so only an all-digit suffix after the
// last ':' is read as the worker count ("a:b" is the queue "a:b"; "a:b:4" is "a:b" with 4).
QueueConfig parse_queue(const std::string& spec) {
  QueueConfig q;
  q.name = spec;
  const auto colon = spec.rfind(':');
  if (colon != std::string::npos && colon + 1 < spec.size()) {
    const auto* first = spec.data() + colon + 1;
    const auto* last = spec.data() + spec.size();
    int n = 0;
    const auto [end, ec] = std::from_chars(first, last, n);
    if (ec == std::errc() && end == last) {
      if (n < 1) throw InvalidArgument("--queue " + spec + ": MAX_WORKERS must be at least 1");
      q.name = spec.substr(0, colon);
      q.max_workers = n;
    }
  }
  return q;
}

JobResult sleep_job(JobContext& job) {
  const auto ms = job.args().value("ms", 0L);
  // condition_variable_any's stop_token overload returns early when the token fires.
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  const bool stopped =
      cv.wait_for(lock, job.stop_token(), std::chrono::milliseconds(ms), [] { return false; });
  (void)stopped;
  if (job.stop_token().stop_requested())
    return JobResult::failed("sleep interrupted by a stop request", true);
  return JobResult::completed();
}

// Parks the attempt waiting for an external callback (args "timeout_ms", default 1 h):
// another system, or `awa callback complete ID`, ends it.
JobResult park_job(JobContext& job) {
  return JobResult::wait_for_callback(
      std::chrono::milliseconds(job.args().value("timeout_ms", 3'600'000L)));
}

JobResult fail_job(JobContext& job) {
  const auto mode = job.args().value("mode", std::string("retryable"));
  if (mode == "terminal") return JobResult::failed("fail job (terminal)", false);
  return JobResult::failed("fail job (retryable)", true);
}

JobResult flaky_job(JobContext& job) {
  const auto fail_attempts = job.args().value("fail_attempts", 1);
  const auto retry_ms = job.args().value("retry_ms", 100L);
  if (job.attempt() <= fail_attempts)
    return JobResult::retry_after(std::chrono::milliseconds(retry_ms),
                                  fmt::format("flaky job: attempt {} fails", job.attempt()));
  return JobResult::completed();
}

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

// No destructor runs: they would wait for the very handlers the operator gave up on.
[[noreturn]] void force_exit(int sig) {
  spdlog::error(
      "awa work: {} during the graceful stop; stop forced, exiting without waiting "
      "for running handlers (their attempts stay open for rescue)",
      signal_name(sig));
  spdlog::default_logger()->flush();
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(128 + sig);
}

int work(const Context& ctx, const WorkArgs& a) {
  if (a.queues.empty()) throw InvalidArgument("awa work: give at least one --queue");
  ClientOptions o;
  o.database_url = ctx.require_database_url();
  o.schema = ctx.schema;
  o.migrate = !a.no_migrate;
  o.max_workers = a.max_workers;
  o.pool_size = a.pool_size;
  o.heartbeat_interval = std::chrono::milliseconds(a.heartbeat_ms);
  o.stale_after = std::chrono::milliseconds(a.stale_ms);
  o.maintenance_interval = std::chrono::milliseconds(a.maintenance_ms);
  o.ring_rotate_interval = std::chrono::milliseconds(a.rotate_ms);
  o.queue_gauges_interval = std::chrono::milliseconds(a.gauges_ms);
  o.shutdown_timeout = std::chrono::milliseconds(a.shutdown_timeout_ms);
  o.maintenance = !a.no_maintenance;
  o.pooled = a.pooled || ctx.pooled;
  o.direct_database_url = a.direct_url;
  // Lets operators (and the fail-over test) map a backend, e.g. the leader lock's holder
  // in pg_locks, to this process.
  o.application_name = fmt::format("awa-work-{}", ::getpid());

  std::optional<metrics::ListenAddress> metrics_at;
  if (!a.metrics_addr.empty()) metrics_at = metrics::parse_listen_address(a.metrics_addr);
  std::optional<metrics::ListenAddress> health_at;
  if (!a.health_addr.empty()) health_at = metrics::parse_listen_address(a.health_addr);

  const StopSignals signals;
  Client client(o);
  client.register_worker("noop", [](JobContext&) { return JobResult::completed(); });
  client.register_worker("sleep", sleep_job);
  client.register_worker("fail", fail_job);
  client.register_worker("park", park_job);
  client.register_worker("flaky", flaky_job);
  client.register_worker("echo", [](JobContext& job) {
    spdlog::info("echo: job {} (attempt {}) args {}", job.job_id(), job.attempt(),
                 job.args().dump());
    return JobResult::completed();
  });
  for (const auto& spec : a.queues) {
    auto q = parse_queue(spec);
    q.poll_interval = std::chrono::milliseconds(a.poll_ms);
    q.max_prefetch = a.max_prefetch;
    client.add_queue(std::move(q));
  }

  // Each serves /metrics, /healthz and /readyz; the same address given twice is one server.
  std::vector<std::unique_ptr<metrics::Server>> servers;
  const auto serve = [&servers, &client](const metrics::ListenAddress& at) {
    auto& server = servers.emplace_back(std::make_unique<metrics::Server>(at.host, at.port));
    server->set_readiness([&client] { return client.readiness(); });
    server->start();
    return server.get();
  };
  if (metrics_at) {
    const auto* server = serve(*metrics_at);
    spdlog::info("metrics on http://{}:{}/metrics", server->address(), server->port());
  }
  if (health_at && !(metrics_at && metrics_at->host == health_at->host &&
                     metrics_at->port == health_at->port && health_at->port != 0)) {
    const auto* server = serve(*health_at);
    spdlog::info("health on http://{}:{}/healthz and /readyz", server->address(), server->port());
  }
  client.start();
  spdlog::info("awa work: running (pid {}); SIGINT or SIGTERM stops gracefully", ::getpid());
  const int sig = signals.wait();
  spdlog::info("awa work: {} received, stopping (a second SIGINT or SIGTERM forces the exit)",
               signal_name(sig));
  {
    // Watches for the second signal while stop() waits for the handlers. Polls so that it
    // notices the end of a graceful stop; jthread's destructor asks it to end and joins.
    std::jthread forcer([&signals](const std::stop_token& done) {
      while (!done.stop_requested()) {
        if (const auto again = signals.wait_for(std::chrono::milliseconds(100))) force_exit(*again);
      }
    });
    client.stop();
  }
  for (auto& server : servers) server->stop();
  const auto s = client.stats();
  fmt::print(
      "awa work: claimed {} completed {} retried {} failed {} snoozed {} cancelled {} stale {} "
      "rescued {} promoted {}\n",
      s.claimed, s.completed, s.retried, s.failed, s.snoozed, s.cancelled, s.stale_completions,
      s.rescued, s.promoted);
  return 0;
}

}  // namespace

void add_work(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<WorkArgs>();
  auto* cmd = app.add_subcommand(
      "work", "run workers (built-in kinds: noop, sleep, fail, echo, flaky, park)");
  cmd->add_option("--queue,-q", a->queues, "queue to work, as NAME or NAME:MAX_WORKERS (repeat)")
      ->required();
  cmd->add_option("--max-workers", a->max_workers,
                  "cap on concurrent handlers over all queues (0: sum of the queues')")
      ->capture_default_str();
  cmd->add_option("--pool-size", a->pool_size, "database connections in the pool")
      ->capture_default_str();
  cmd->add_option("--metrics-addr", a->metrics_addr,
                  "serve Prometheus metrics (GET /metrics) on [HOST:]PORT; PORT alone binds "
                  "127.0.0.1, name a host (e.g. 0.0.0.0:9464) to serve other hosts");
  cmd->add_option("--health-addr", a->health_addr,
                  "serve GET /healthz (the process answers) and GET /readyz (200 when the "
                  "database answers, the claimers and the listener work and completions "
                  "commit; 503 with the reasons in JSON) on [HOST:]PORT, as --metrics-addr; "
                  "the metrics address serves them too");
  cmd->add_option("--heartbeat-ms", a->heartbeat_ms, "heartbeat period")->capture_default_str();
  cmd->add_option("--stale-ms", a->stale_ms, "rescue attempts whose heartbeat is older")
      ->capture_default_str();
  cmd->add_option("--maintenance-ms", a->maintenance_ms, "leader's maintenance period")
      ->capture_default_str();
  cmd->add_option("--rotate-ms", a->rotate_ms,
                  "leader's storage ring rotation period (0: no rotation or prune)")
      ->capture_default_str();
  cmd->add_option("--gauges-ms", a->gauges_ms,
                  "leader's refresh period of the per-lane queue gauges on /metrics (0: off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout-ms", a->shutdown_timeout_ms,
                  "grace period for in-flight handlers at stop")
      ->capture_default_str();
  cmd->add_option("--poll-ms", a->poll_ms, "fallback poll when no notification arrives")
      ->capture_default_str();
  cmd->add_option("--max-prefetch", a->max_prefetch,
                  "per queue: jobs claimed ahead of free workers at most (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--pooled", a->pooled,
                "the database URL goes through a transaction-mode pooler (PgBouncer): no "
                "prepared statements or session state on its connections; without --direct-url "
                "the claimers poll and the leader is elected by a lease row");
  if (const char* env = std::getenv("AWA_DIRECT_DATABASE_URL")) a->direct_url = env;
  // Never capture_default_str(): the value may come from the environment and hold a password.
  cmd->add_option("--direct-url", a->direct_url,
                  "a direct (session) URL of the same database for LISTEN and the leader's "
                  "lock; implies --pooled (default: $AWA_DIRECT_DATABASE_URL)");
  cmd->add_flag("--no-maintenance", a->no_maintenance, "never run maintenance in this process");
  cmd->add_flag("--no-migrate", a->no_migrate, "do not migrate the schema at start");
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return work(ctx, *a); }; });
}

}  // namespace awa::cli
