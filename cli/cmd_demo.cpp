// `awa demo` (`make demo`): the whole engine on a real workload. Migrates, sets the demo
// queue to 4 shards with a DLQ, enqueues a mixed workload — unkeyed and keyed jobs, some
// that fail once and are retried, some that fail for good, some scheduled a second
// ahead — and works it with the embedded runtime (awa::Client), drawing a progress bar.
// Ends with a summary: outcomes, throughput, pickup latency, per-shard counts. Beside it,
// on queues of their own: a periodic job (@every 1s) fired by the maintenance leader, and
// a job that waits for an external callback with its worker slot freed, then completed
// by the callback (docs/scheduling.md). With --serve it then keeps working a trickle of
// new jobs and serves the dashboard (awa serve) on the same schema until SIGINT or SIGTERM:
// successes, retries, a failure now and then, the periodic job, and a job parked on a
// callback every few seconds that the demo answers a while later, so the dashboard's
// counts and charts move. `--jobs 0 --serve` skips the batch and only does that
// (scripts/dashboard start --demo, what `make demo` leaves running).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "awa/admin.hpp"
#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "awa/metrics.hpp"
#include "awa/migrate.hpp"
#include "awa/periodic.hpp"
#include "awa/serve.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

using Clock = std::chrono::system_clock;

constexpr const char* kQueue = "demo";
constexpr const char* kSideQueue = "demo-side";  // the periodic and the callback job
constexpr const char* kPeriodic = "demo-tick";
constexpr auto kGiveUp = std::chrono::seconds(60);

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch())
      .count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

struct DemoArgs {
  bool serve = false;
  std::string addr = "127.0.0.1:8080";
  int jobs = 2000;
};

// The callback ids of parked jobs, handed from the handler (a worker thread) to whoever
// answers them: the side show once, then the trickle.
class ParkedCallbacks {
 public:
  void add(std::string id) {
    {
      std::lock_guard lock(mu_);
      parked_.push_back({std::move(id), std::chrono::steady_clock::now()});
    }
    cv_.notify_all();
  }
  // The oldest parked id, waiting until `deadline` for one; nullopt if none came.
  std::optional<std::string> wait_first(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return !parked_.empty(); })) return std::nullopt;
    auto id = std::move(parked_.front().id);
    parked_.pop_front();
    return id;
  }
  // Ids parked for at least `age`, removed from the list.
  std::vector<std::string> take_older_than(std::chrono::steady_clock::duration age) {
    std::vector<std::string> out;
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    while (!parked_.empty() && now - parked_.front().at >= age) {
      out.push_back(std::move(parked_.front().id));
      parked_.pop_front();
    }
    return out;
  }

 private:
  struct Parked {
    std::string id;
    std::chrono::steady_clock::time_point at;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Parked> parked_;  // guarded by mu_
};

// While the dashboard is up: a few jobs every half second (one in ten retried once, one
// in 40 doomed), and every 5 s a job that parks on a callback, answered 8 s later (one in
// three with a failure), so the dashboard always has a parked job and its charts and
// per-shard claims have something to show.
void trickle(Client& client, const Admin& admin, const std::string& url, Connection& conn,
             ParkedCallbacks& parked, const std::atomic<bool>& stop) {
  int answered = 0;
  for (int round = 0; !stop.load(); ++round) {
    std::vector<NewJob> batch;
    for (int i = 0; i < 10; ++i) {
      const int n = round * 10 + i;
      InsertOpts o;
      o.queue = kQueue;
      o.max_attempts = 3;
      if (n % 4 == 0) o.ordering_key = fmt::format("customer-{}", n % 40);
      const char* kind = n % 40 == 17 ? "doomed" : n % 10 == 3 ? "flaky" : "greet";
      batch.emplace_back(kind, nlohmann::json{{"n", n}, {"sent_us", now_us()}}, o);
    }
    if (round % 10 == 0) {
      InsertOpts o;
      o.queue = kSideQueue;
      batch.emplace_back("await_approval", nlohmann::json{{"order", round}}, o);
    }
    // The dashboard outlives a failed call or a database restart: say so, connect anew and
    // go on with the next round (a job whose answer failed stays parked until its callback
    // times out).
    try {
      client.insert_many(batch);
      for (const auto& id : parked.take_older_than(std::chrono::seconds(8))) {
        const bool refuse = answered % 3 == 2;
        const auto r =
            refuse ? admin.fail_external(conn, id, "demo: approval refused")
                   : admin.complete_external(conn, id, nlohmann::json{{"approved", true}}.dump());
        ++answered;
        fmt::print("callback {} {}: job {}\n", id, refuse ? "refused" : "approved",
                   r.stale() ? "stale" : r.state);
        std::fflush(stdout);
      }
    } catch (const std::exception& e) {
      fmt::print(stderr, "demo: trickle round {} failed: {}\n", round, e.what());
      try {
        conn = Connection::connect(url);
      } catch (const std::exception&) {
        // Still down: the next round tries again.
      }
    }
    for (int t = 0; t < 5 && !stop.load(); ++t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

// The periodic job fired (and ran) at least once, and the callback job waited with its
// slot freed until the callback completed it. False (and why on stderr) otherwise.
bool side_show(Client& client, const Admin& admin, Connection& conn, ParkedCallbacks& parked,
               JobId approval_job, const std::atomic<int>& ticks) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ticks.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (ticks.load() == 0) {
    fmt::print(stderr, "demo: the periodic job {} did not fire within 10 s\n", kPeriodic);
    return false;
  }
  fmt::print("periodic: {} (@every 1s) fired and ran {} time(s) so far\n", kPeriodic, ticks.load());
  const auto parked_id = parked.wait_first(deadline);
  if (!parked_id) {
    fmt::print(stderr, "demo: the callback job {} did not start within 10 s\n", approval_job);
    return false;
  }
  const std::string& id = *parked_id;
  while (client.stats().waiting == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto before = admin.job(conn, approval_job);
  fmt::print("callback: job {} is {} on callback {} (its worker slot is free)\n", approval_job,
             before ? before->summary.state : "gone", id);
  const auto r = admin.complete_external(conn, id);
  fmt::print("callback: Admin::complete_external -> {}; the same callback again -> {}\n",
             r.stale() ? "stale" : r.state,
             admin.complete_external(conn, id).stale() ? "stale (no double finalise)" : "applied");
  return !r.stale() && before && before->summary.state == "waiting_external";
}

int demo(const Context& ctx, const DemoArgs& args) {
  const auto& url = ctx.require_database_url();
  serve::ServerOptions serve_options;
  if (args.serve) {
    const auto addr = metrics::parse_listen_address(args.addr);
    serve_options.database_url = url;
    serve_options.schema = ctx.schema;
    serve_options.host = addr.host;
    serve_options.port = addr.port;
  }
  // Blocked before the client starts its threads: with --serve, a Ctrl-C stops the
  // dashboard and the client gracefully instead of killing the process.
  std::optional<StopSignals> signals;
  if (args.serve) signals.emplace();
  auto conn = Connection::connect(url);
  const auto report = migrate(conn, ctx.schema);
  fmt::print("schema {}: version {} ({} migration(s) applied now)\n", report.schema, report.version,
             report.applied.size());
  const Admin admin(ctx.schema);
  admin.set_enqueue_shards(conn, kQueue, 4);
  QueueConfigChange dlq_on;
  dlq_on.dlq_enabled = true;
  admin.configure_queue(conn, kQueue, dlq_on);
  // Earlier demo runs left their counts: report only this run's.
  const auto counts_before = admin.queue_counts(conn, kQueue);
  const std::int64_t dlq_before = counts_before.dlq;
  const std::int64_t completed_before = counts_before.completed;
  fmt::print("queue {}: 4 enqueue shards, dead-letter queue on\n", kQueue);

  std::mutex mu;
  std::vector<double> pickup_ms;                    // guarded by mu
  std::map<int, std::int64_t> completed_per_shard;  // guarded by mu
  const auto completed = [&](JobContext& job) {
    std::lock_guard lock(mu);
    ++completed_per_shard[job.enqueue_shard()];
    return JobResult::completed();
  };
  const auto record_pickup = [&](JobContext& job) {
    const auto sent = job.args().value("sent_us", std::int64_t{0});
    std::lock_guard lock(mu);
    pickup_ms.push_back(static_cast<double>(now_us() - sent) / 1000.0);
  };

  ClientOptions options;
  options.database_url = url;
  options.schema = ctx.schema;
  options.maintenance_interval = std::chrono::milliseconds(100);
  options.application_name = "awa-demo";
  Client client(options);
  client.register_worker("greet", [&](JobContext& job) {
    record_pickup(job);
    return completed(job);
  });
  client.register_worker("flaky", [&](JobContext& job) {
    record_pickup(job);
    if (job.attempt() == 1) {
      return JobResult::retry_after(std::chrono::milliseconds(200), "flaky on first attempt");
    }
    return completed(job);
  });
  client.register_worker("doomed", [&](JobContext& job) {
    record_pickup(job);
    return JobResult::failed("doomed: this job always fails", false);
  });
  QueueConfig q;
  q.name = kQueue;
  q.max_workers = 16;
  client.add_queue(q);

  // The side show: a periodic job, and a job that waits for an external callback.
  std::atomic<int> ticks{0};
  client.register_worker("tick", [&](JobContext&) {
    ++ticks;
    return JobResult::completed();
  });
  ParkedCallbacks parked;
  client.register_worker("await_approval", [&](JobContext& job) {
    // A real handler would hand the id to the other system here.
    parked.add(job.register_callback(std::chrono::minutes(5)));
    return JobResult::wait_for_callback(std::chrono::minutes(5));
  });
  client.add_periodic(kPeriodic, "@every 1s", "tick", nlohmann::json::object(),
                      PeriodicOptions{.queue = kSideQueue, .max_attempts = 3});
  QueueConfig side;
  side.name = kSideQueue;
  side.max_workers = 1;
  client.add_queue(side);
  client.start();
  // The batch with its summary and the side show; skipped by --jobs 0 (the trickle alone).
  if (args.jobs > 0) {
    const int jobs_total = args.jobs;
    InsertOpts approval;
    approval.queue = kSideQueue;
    const JobId approval_job = client.insert(NewJob("await_approval", {{"order", 42}}, approval));

    // The workload: 10 % flaky, 1 % doomed, 20 % keyed (customer-N), 2 % scheduled.
    std::vector<NewJob> jobs;
    int flaky = 0, doomed = 0, keyed = 0, scheduled = 0;
    for (int i = 0; i < jobs_total; ++i) {
      InsertOpts o;
      o.queue = kQueue;
      o.priority = 1 + i % 3;
      o.max_attempts = 3;
      if (i % 5 == 0) {
        o.ordering_key = fmt::format("customer-{}", i % 40);
        ++keyed;
      }
      if (i % 50 == 7) {
        o.run_at = Clock::now() + std::chrono::seconds(1);
        ++scheduled;
      }
      const char* kind = i % 100 == 13 ? "doomed" : i % 10 == 3 ? "flaky" : "greet";
      flaky += kind[0] == 'f';
      doomed += kind[0] == 'd';
      jobs.emplace_back(kind, nlohmann::json{{"n", i}}, o);
    }
    fmt::print("enqueueing {} jobs: {} keyed, {} flaky (fail once), {} doomed, {} scheduled\n",
               jobs_total, keyed, flaky, doomed, scheduled);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<JobId> ids;
    for (std::size_t off = 0; off < jobs.size(); off += 100) {
      const auto n = std::min<std::size_t>(100, jobs.size() - off);
      for (std::size_t k = off; k < off + n; ++k) {
        jobs[k].args_json = nlohmann::json{{"n", k}, {"sent_us", now_us()}}.dump();
      }
      const auto got = client.insert_many(std::span<const NewJob>(jobs).subspan(off, n));
      ids.insert(ids.end(), got.begin(), got.end());
    }

    // Progress: a job is done when it completed or reached a terminal failure.
    // The periodic ticks complete too; a tick's handler runs before its completion is
    // counted, so this never runs ahead of the demo queue's own jobs.
    const auto done = [&] {
      const auto s = client.stats();
      return static_cast<int>(s.completed + s.failed) - ticks.load();
    };
    const auto deadline = std::chrono::steady_clock::now() + kGiveUp;
    for (;;) {
      const int d = std::min(done(), jobs_total);
      const int width = 40;
      const int fill = d * width / jobs_total;
      fmt::print("\r[{}{}] {:5}/{} jobs", std::string(static_cast<std::size_t>(fill), '#'),
                 std::string(static_cast<std::size_t>(width - fill), '.'), d, jobs_total);
      std::fflush(stdout);
      if (d >= jobs_total || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("\n");
    if (!args.serve) client.stop();
    const auto s = client.stats();

    const std::int64_t dlq = admin.queue_counts(conn, kQueue).dlq - dlq_before;

    fmt::print("summary: {} jobs in {:.2f} s ({:.0f} jobs/s)\n", jobs_total, secs,
               jobs_total / secs);
    fmt::print("  completed {}, retried {}, failed {} (in DLQ {}), stale completions {}\n",
               admin.queue_counts(conn, kQueue).completed - completed_before, s.retried, s.failed,
               dlq, s.stale_completions);
    {
      std::lock_guard lock(mu);
      fmt::print(
          "  pickup latency (enqueue -> handler start, {} handler runs): p50 {:.1f} ms, "
          "p95 {:.1f} ms, p99 {:.1f} ms\n",
          pickup_ms.size(), percentile(pickup_ms, 0.50), percentile(pickup_ms, 0.95),
          percentile(pickup_ms, 0.99));
    }
    fmt::print("  completed per shard:");
    {
      std::lock_guard lock(mu);
      for (const auto& [shard, n] : completed_per_shard) fmt::print(" shard {}: {}", shard, n);
    }
    fmt::print("\n  (pickup of scheduled and retried jobs includes their intended delay)\n");
    if (done() < jobs_total) {
      fmt::print(stderr, "demo: only {} of {} jobs finished within {} s\n", done(), jobs_total,
                 kGiveUp.count());
      return 1;
    }
    if (!side_show(client, admin, conn, parked, approval_job, ticks)) return 1;
  }
  if (!args.serve) {
    // Nothing would fire it until the next demo (or a worker on this schema would run
    // its ticks with no handler): the demo's schedule goes with the demo.
    PeriodicAdmin(ctx.schema).remove(conn, kPeriodic);
    return 0;
  }

  fmt::print(
      "dashboard: new jobs keep arriving (10 every 0.5 s, a parked callback every 5 s); Ctrl-C "
      "stops\n");
  std::atomic<bool> stop{false};
  std::thread producer([&] { trickle(client, admin, url, conn, parked, stop); });
  int rc = 1;
  try {
    rc = serve_until_signal(serve_options);
  } catch (...) {
    stop = true;
    producer.join();
    throw;
  }
  stop = true;
  producer.join();
  client.stop();
  return rc;
}

}  // namespace

void add_demo(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<DemoArgs>();
  auto* cmd = app.add_subcommand("demo", "migrate, enqueue and work a sample workload");
  cmd->add_flag("--serve", a->serve,
                "then keep working new jobs and serve the dashboard until Ctrl-C");
  cmd->add_option("--addr", a->addr, "with --serve: HOST:PORT of the dashboard (loopback)")
      ->capture_default_str();
  cmd->add_option("--jobs", a->jobs,
                  "jobs in the first batch, worked with a summary (0: none; with --serve, only "
                  "the trickle)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return demo(ctx, *a); }; });
}

}  // namespace awa::cli
