#include <chrono>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/queue_storage.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

struct EnqueueArgs {
  std::string kind;
  std::string args = "{}";
  std::string queue = "default";
  int priority = 2;
  int max_attempts = 25;
  std::optional<std::string> ordering_key;
  double delay_seconds = 0;
  long count = 1;
  bool quiet = false;
};

// Ids are printed one per line up to this many; beyond it, a summary line.
constexpr long kMaxPrintedIds = 100;
constexpr std::size_t kBatch = 1000;

int enqueue(const Context& ctx, const EnqueueArgs& a) {
  if (a.count < 1) throw InvalidArgument("--count must be at least 1");
  if (a.delay_seconds < 0) throw InvalidArgument("--delay must not be negative");
  InsertOpts opts;
  opts.queue = a.queue;
  opts.priority = a.priority;
  opts.max_attempts = a.max_attempts;
  opts.ordering_key = a.ordering_key;
  if (a.delay_seconds > 0) {
    opts.run_at = std::chrono::system_clock::now() +
                  std::chrono::duration_cast<std::chrono::system_clock::duration>(
                      std::chrono::duration<double>(a.delay_seconds));
  }
  const NewJob job = NewJob::from_text(a.kind, a.args, opts);

  auto conn = Connection::connect(ctx.require_database_url());
  QueueStorage store(StorageOptions{ctx.schema});
  std::vector<JobId> ids;
  ids.reserve(static_cast<std::size_t>(a.count));
  for (long done = 0; done < a.count;) {
    const auto n = std::min<std::size_t>(kBatch, static_cast<std::size_t>(a.count - done));
    const std::vector<NewJob> batch(n, job);
    const auto got = n > 1 ? store.insert_many_copy(conn, batch) : store.insert_many(conn, batch);
    ids.insert(ids.end(), got.begin(), got.end());
    done += static_cast<long>(n);
  }
  if (a.count <= kMaxPrintedIds) {
    for (const auto id : ids) fmt::print("{}\n", id);
  } else {
    fmt::print("enqueued {} jobs of kind {} on queue {} (ids {}..{})\n", ids.size(), a.kind,
               a.queue, ids.front(), ids.back());
  }
  return 0;
}

}  // namespace

void add_enqueue(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<EnqueueArgs>();
  auto* cmd = app.add_subcommand("enqueue", "enqueue jobs; prints their ids");
  cmd->add_option("kind", a->kind, "job kind")->required();
  cmd->add_option("--args", a->args, "job args as JSON")->capture_default_str();
  cmd->add_option("--queue,-q", a->queue, "queue")->capture_default_str();
  cmd->add_option("--priority,-p", a->priority, "1 (highest) .. 4")->capture_default_str();
  cmd->add_option("--max-attempts", a->max_attempts, "1..1000")->capture_default_str();
  cmd->add_option("--ordering-key", a->ordering_key,
                  "jobs with the same key stay FIFO on one shard");
  cmd->add_option("--delay", a->delay_seconds, "seconds until the job may run");
  cmd->add_option("--count,-n", a->count, "enqueue this many copies")->capture_default_str();
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return enqueue(ctx, *a); }; });
}

}  // namespace awa::cli
