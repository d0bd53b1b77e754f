// `awa demo`: a small, real workload against the configured database, at storage level
// (the worker runtime is not written yet): migrate, shard a queue, enqueue keyed and
// unkeyed and scheduled jobs, then claim and complete them — some fail and are retried —
// and print what happened per shard.
#include <chrono>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/queue_storage.hpp"
#include "cli.hpp"
#include "pg/connection.hpp"
#include "schema/migrator.hpp"

namespace awa::cli {
namespace {

constexpr const char* kQueue = "demo";
constexpr int kJobs = 2000;

int demo(const Context& ctx) {
  using Clock = std::chrono::steady_clock;
  auto conn = Connection::connect(ctx.require_database_url());
  const auto report = schema::Migrator(ctx.schema).migrate(conn.native());
  fmt::print("schema {}: version {} ({} migration(s) applied now)\n", report.schema, report.version,
             report.applied.size());

  Admin admin(ctx.schema);
  admin.set_enqueue_shards(conn, kQueue, 4);
  QueueStorage store(StorageOptions{ctx.schema});

  // Enqueue: unkeyed batches (rotor), keyed jobs (hash), a few scheduled ones.
  const auto t0 = Clock::now();
  std::vector<NewJob> jobs;
  for (int i = 0; i < kJobs; ++i) {
    InsertOpts o;
    o.queue = kQueue;
    o.priority = 1 + i % 3;
    o.max_attempts = 3;
    if (i % 5 == 0) o.ordering_key = fmt::format("customer-{}", i % 40);
    if (i % 100 == 0) o.run_at = std::chrono::system_clock::now() + std::chrono::seconds(1);
    jobs.emplace_back(i % 10 == 3 ? "flaky" : "greet", nlohmann::json{{"n", i}}, o);
  }
  int scheduled = 0;
  for (const auto& j : jobs) scheduled += j.opts.run_at ? 1 : 0;
  for (std::size_t off = 0; off < jobs.size(); off += 250) {
    const auto n = std::min<std::size_t>(250, jobs.size() - off);
    store.insert_many_copy(conn, std::span<const NewJob>(jobs).subspan(off, n));
  }
  const double enqueue_s = std::chrono::duration<double>(Clock::now() - t0).count();
  fmt::print("enqueued {} jobs ({} scheduled 1 s ahead) in {:.3f} s\n", kJobs, scheduled,
             enqueue_s);

  // Work: claim a batch, "run" it, complete it; flaky jobs fail on their first attempt.
  std::map<std::string, int> outcomes;
  std::map<int, int> per_shard;
  const auto t1 = Clock::now();
  const auto give_up = t1 + std::chrono::seconds(30);
  int finished = 0;
  while (finished < kJobs && Clock::now() < give_up) {
    store.promote_due(conn.native());
    const auto claimed = store.claim(conn.native(), kQueue);
    if (claimed.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    std::vector<Completion> done;
    for (const auto& e : claimed) {
      ++per_shard[e.enqueue_shard];
      if (e.kind == "flaky" && e.attempt == 1) {
        done.push_back(Completion::of(e, Outcome::kRetry, "flaky on first attempt",
                                      std::chrono::milliseconds(200)));
      } else {
        done.push_back(Completion::of(e, Outcome::kCompleted));
      }
    }
    for (const auto& r : store.complete(conn.native(), done)) {
      const auto state = r.state.value_or("stale");
      ++outcomes[state];
      if (state != "retried") ++finished;
    }
  }
  const double work_s = std::chrono::duration<double>(Clock::now() - t1).count();

  fmt::print("worked for {:.3f} s:", work_s);
  for (const auto& [state, n] : outcomes) fmt::print(" {} {}", state, n);
  fmt::print("\nclaims per shard:");
  for (const auto& [shard, n] : per_shard) fmt::print(" shard {}: {}", shard, n);
  fmt::print("\n");
  for (const auto& l : admin.queue_shards(conn, kQueue)) {
    fmt::print("  priority {} shard {}: enqueue cursor {}, claim cursor {}, lag {}\n", l.priority,
               l.enqueue_shard, l.enqueue_cursor, l.claim_cursor, l.lag);
  }
  if (finished != kJobs) {
    fmt::print(stderr, "demo: only {} of {} jobs finished within 30 s\n", finished, kJobs);
    return 1;
  }
  return 0;
}

}  // namespace

void add_demo(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("demo", "migrate, enqueue and work a sample workload");
  cmd->callback([&ctx] { ctx.action = [&ctx] { return demo(ctx); }; });
}

}  // namespace awa::cli
