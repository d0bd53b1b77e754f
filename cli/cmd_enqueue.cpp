#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/queue_storage.hpp"
#include "awa/trace.hpp"
#include "awa/tracing.hpp"
#include "cli.hpp"

namespace awa::cli {
namespace {

struct EnqueueArgs {
  std::string kind;
  std::string args = "{}";
  std::optional<std::string> args_file;
  std::string queue = "default";
  int priority = 2;
  int max_attempts = 25;
  std::optional<std::string> ordering_key;
  double delay_seconds = 0;
  long count = 1;
  bool unique = false;
  std::optional<long long> unique_period;
  std::vector<JobId> after;
  std::string on_parent_failure = "cancel";
  std::string batch;
  std::string traceparent;
  std::string tracestate;
  bool quiet = false;
};

// Ids are printed one per line up to this many; beyond it, a summary line.
constexpr long kMaxPrintedIds = 100;
// All copies go in one transaction; this bounds how long it holds its lane locks and how
// many ids it must report.
constexpr long kMaxCount = 100'000;
// Rows per insert_many_copy call: at most 1,000, fewer when the args are large, so that a
// batch holds about 16 MiB of args at most.
constexpr std::size_t kMaxBatchRows = 1000;
constexpr std::size_t kBatchArgsBytes = std::size_t{16} << 20;

// The args from --args-file (a path, or - for standard input), refusing to read more
// than the limit: a 10 GB file must fail fast, not fill memory.
std::string read_args_file(const std::string& path) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) throw InvalidArgument(fmt::format("--args-file {}: cannot open it", path));
    in = &file;
  }
  std::string text(kMaxArgsBytes + 1, '\0');
  in->read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in->gcount()));
  if (in->bad()) throw InvalidArgument(fmt::format("--args-file {}: read error", path));
  if (text.size() > kMaxArgsBytes) {
    throw InvalidArgument(fmt::format(
        "--args-file {}: more than {} bytes; job args are limited to 1 MiB", path, kMaxArgsBytes));
  }
  return text;
}

int enqueue(const Context& ctx, const EnqueueArgs& a) {
  if (a.count < 1 || a.count > kMaxCount) {
    throw InvalidArgument(fmt::format("--count must be 1..{} (got {})", kMaxCount, a.count));
  }
  // duration<double> -> system_clock::duration is undefined for values the clock cannot
  // hold (1e300, inf, nan), so the range is checked on the double.
  const double max_delay = static_cast<double>(kMaxScheduleAhead.count());
  if (!std::isfinite(a.delay_seconds) || a.delay_seconds < 0 || a.delay_seconds > max_delay) {
    throw InvalidArgument(
        fmt::format("--delay must be a number of seconds from 0 to {:.0f} (100 years); got {}",
                    max_delay, a.delay_seconds));
  }
  if (a.unique && a.count != 1) {
    throw InvalidArgument("--unique enqueues at most one job: leave out --count");
  }
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
  if (a.unique) {
    opts.unique.emplace();
    if (a.unique_period) opts.unique->period = std::chrono::seconds(*a.unique_period);
  }
  opts.after = a.after;
  opts.on_parent_failure = a.on_parent_failure == "run"    ? OnParentFailure::kRun
                           : a.on_parent_failure == "fail" ? OnParentFailure::kFail
                                                           : OnParentFailure::kCancel;
  opts.batch = a.batch;
  if (!a.traceparent.empty()) {
    opts.trace = trace::parse(a.traceparent, a.tracestate);
  } else if (!a.tracestate.empty()) {
    throw InvalidArgument("--tracestate needs --traceparent");
  }
  const NewJob job =
      NewJob::from_text(a.kind, a.args_file ? read_args_file(*a.args_file) : a.args, opts);
  // Everything that can be checked without the database is checked before connecting
  // (QueueStorage checks the schema name).
  validate_job(job);
  QueueStorage store(StorageOptions{ctx.schema});
  // With the OTEL_* variables set, a traced enqueue records its send span (sent before
  // the command exits).
  const trace::Tracing tracing(trace::ExportOptions::from_env());

  auto conn = ctx.connect();
  if (a.unique) {
    // The id on stdout either way (scripts read it); the duplicate note on stderr.
    const auto r = store.insert_result(conn, job);
    fmt::print("{}\n", r.id);
    if (r.duplicate) {
      std::fflush(stdout);
      fmt::print(stderr, "duplicate: job {} (kind {}) is already there; nothing was enqueued\n",
                 r.id, nlohmann::json(a.kind).dump());
    }
    return 0;
  }
  std::vector<JobId> ids;
  ids.reserve(static_cast<std::size_t>(a.count));
  const std::size_t batch_rows = std::clamp<std::size_t>(
      kBatchArgsBytes / std::max<std::size_t>(job.args_json.size(), 1), 1, kMaxBatchRows);
  // All batches in one transaction: a failure in any of them leaves nothing enqueued.
  // Unkeyed batches each take the next rotor pick; this process's rotor starts at shard
  // 0, so the lanes are locked in ascending shard order, the global lock order.
  {
    std::optional<Transaction> tx;
    if (static_cast<std::size_t>(a.count) > batch_rows) tx.emplace(conn);
    for (long done = 0; done < a.count;) {
      const auto n = std::min<std::size_t>(batch_rows, static_cast<std::size_t>(a.count - done));
      const std::vector<NewJob> batch(n, job);
      const auto got = n > 1 ? store.insert_many_copy(conn, batch) : store.insert_many(conn, batch);
      ids.insert(ids.end(), got.begin(), got.end());
      done += static_cast<long>(n);
    }
    if (tx) tx->commit();
  }
  if (a.count <= kMaxPrintedIds) {
    for (const auto id : ids) fmt::print("{}\n", id);
  } else {
    fmt::print("enqueued {} jobs of kind {} on queue {} (ids {}..{})\n", ids.size(),
               nlohmann::json(a.kind).dump(), a.queue, ids.front(), ids.back());
  }
  return 0;
}

}  // namespace

void add_enqueue(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<EnqueueArgs>();
  auto* cmd = app.add_subcommand("enqueue", "enqueue jobs; prints their ids");
  cmd->add_option("kind", a->kind, "job kind (1..200 bytes of UTF-8)")->required();
  auto* args =
      cmd->add_option("--args", a->args, "job args as JSON (at most 1 MiB)")->capture_default_str();
  cmd->add_option("--args-file", a->args_file, "read the args JSON from a file (- for stdin)")
      ->excludes(args);
  cmd->add_option("--queue,-q", a->queue, "queue")->capture_default_str();
  cmd->add_option("--priority,-p", a->priority, "1 (highest) .. 4")->capture_default_str();
  cmd->add_option("--max-attempts", a->max_attempts, "1..1000")->capture_default_str();
  cmd->add_option("--ordering-key", a->ordering_key,
                  "jobs with the same key stay FIFO on one shard (at most 256 bytes)");
  cmd->add_option("--delay", a->delay_seconds, "seconds until the job may run (up to 100 years)");
  cmd->add_option("--count,-n", a->count, "enqueue this many copies, 1..100000, in one transaction")
      ->capture_default_str();
  auto* unique = cmd->add_flag(
      "--unique", a->unique,
      "a unique job: if an equal one (same kind, args and queue) has not ended yet, print its "
      "id and enqueue nothing");
  cmd->add_option("--unique-period", a->unique_period,
                  "with --unique: equal only within the same period of this many seconds")
      ->needs(unique);
  cmd->add_option("--after", a->after,
                  "run only after these jobs have ended (ids, comma-separated); the job waits "
                  "in state waiting until then")
      ->delimiter(',');
  cmd->add_option("--on-parent-failure", a->on_parent_failure,
                  "with --after: what a parent that failed, was cancelled or was dead-lettered "
                  "does: cancel this job, run it anyway, or fail it")
      ->check(CLI::IsMember({"cancel", "run", "fail"}))
      ->capture_default_str();
  cmd->add_option("--batch", a->batch,
                  "the open batch the jobs join (awa batch open), in their insert's "
                  "transaction; refused when it does not exist or is sealed");
  // As the OpenTelemetry environment carriers: a traced script passes its context on.
  if (const char* env = std::getenv("TRACEPARENT")) {
    a->traceparent = env;
    if (const char* state = std::getenv("TRACESTATE")) a->tracestate = state;
  }
  cmd->add_option("--traceparent", a->traceparent,
                  "the W3C trace context to store with the jobs, 00-<trace id>-<span id>-<flags> "
                  "(default: $TRACEPARENT); the worker's handler sees it");
  cmd->add_option("--tracestate", a->tracestate,
                  "its vendors' tracestate, with --traceparent (default: $TRACESTATE)");
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return enqueue(ctx, *a); }; });
}

}  // namespace awa::cli
