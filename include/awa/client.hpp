// awa::Client: the worker runtime a C++ service embeds.
//
//   awa::ClientOptions opts;
//   opts.database_url = std::getenv("DATABASE_URL");
//   awa::Client client(opts);
//   client.register_worker("send_email", [](awa::JobContext& job) {
//     auto args = job.args_as<EmailArgs>();   // nlohmann from_json
//     send(args);
//     return awa::JobResult::completed();
//   });
//   client.add_queue({.name = "default", .max_workers = 8});
//   client.start();
//   client.insert(awa::NewJob("send_email", {{"to", "a@b.c"}}));
//   ...
//   client.stop();  // graceful: stop claiming, finish in-flight jobs, flush completions
//
// Delivery is at-least-once: a job whose worker dies is rescued (retried) after its
// heartbeat goes stale; a completion after that is stale and changes nothing.
//
// Thread safety: register_worker / add_queue / add_periodic before start(); everything else from
// any thread. Handlers run on the client's worker threads, several at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/metrics.hpp"
#include "awa/periodic.hpp"
#include "awa/queue_storage.hpp"
#include "awa/trace.hpp"
#include "awa/tracing.hpp"

namespace awa {

// What a handler returns.
class JobResult {
 public:
  static JobResult completed() { return JobResult(Outcome::kCompleted); }
  // Success with a JSON result, stored with the job: Admin::job's result_json, `awa job
  // show` and the dashboard show it. At most kMaxArgsBytes of JSON text; a larger result,
  // or one with strings that are not UTF-8, throws InvalidArgument here (escaping the
  // handler, that is a retryable failure of the attempt).
  static JobResult completed(const nlohmann::json& result);
  // A retryable failure with an explicit delay (counts as an attempt).
  static JobResult retry_after(std::chrono::milliseconds delay, std::string message = "retry") {
    JobResult r(Outcome::kRetry);
    r.delay_ = delay;
    r.message_ = std::move(message);
    return r;
  }
  // Run again after `delay`; the attempt is not counted.
  static JobResult snooze(std::chrono::milliseconds delay) {
    JobResult r(Outcome::kSnooze);
    r.delay_ = delay;
    return r;
  }
  static JobResult cancel(std::string message = "cancelled by handler") {
    JobResult r(Outcome::kCancel);
    r.message_ = std::move(message);
    return r;
  }
  // A failure: retryable (default backoff, until max_attempts) or terminal.
  static JobResult failed(std::string message, bool retryable = true) {
    JobResult r(retryable ? Outcome::kRetry : Outcome::kFail);
    r.message_ = std::move(message);
    return r;
  }

  // Frees the worker slot and leaves the attempt open, waiting for another system to end
  // it by its callback id (JobContext::register_callback; one is made now if the handler
  // registered none — Admin::job shows the job as "waiting_external"). The callback ends it with
  // Admin::complete_external / fail_external or `POST /api/callbacks/{id}/...` of `awa
  // serve`; with none by now + timeout it is rescued as a failed attempt ("callback timed
  // out"): retried while attempts remain. Heartbeat rescue does not apply while it waits;
  // a hard deadline still does. Timeout: 1 ms .. 100 years, else the attempt fails
  // (retryable) with the reason. docs/scheduling.md, "External callbacks".
  static JobResult wait_for_callback(std::chrono::milliseconds timeout) {
    JobResult r(Outcome::kWaitForCallback);
    r.delay_ = timeout;
    return r;
  }

  Outcome outcome() const noexcept { return outcome_; }
  const std::string& message() const noexcept { return message_; }
  // Negative: the default (exponential backoff for retries). wait_for_callback: the
  // callback timeout.
  std::chrono::milliseconds delay() const noexcept { return delay_; }
  // completed(result): the result as JSON text; otherwise none.
  const std::optional<std::string>& result_json() const noexcept { return result_json_; }

  // Adds a follow-up job (docs/workflows.md, "Follow-up jobs"): enqueued in the same
  // transaction that records this attempt's end, if that end matches `on` — kCompleted for
  // a completed attempt; kExhausted when this failure ends the job failed or dead-lettered
  // (a retry that leaves attempts, a snooze or a cancel enqueues nothing). A follow-up that
  // breaks validate_follow_up fails the attempt (retryable) with the reason, and nothing
  // of it is enqueued.
  //   return awa::JobResult::completed(receipt)
  //       .then(awa::FollowUpOn::kCompleted, awa::NewJob{"email_receipt", {{"order", id}}});
  JobResult& then(FollowUpOn on, NewJob job) & {
    follow_ups_.push_back(FollowUp{on, std::move(job)});
    return *this;
  }
  JobResult&& then(FollowUpOn on, NewJob job) && {
    follow_ups_.push_back(FollowUp{on, std::move(job)});
    return std::move(*this);
  }
  const std::vector<FollowUp>& follow_ups() const noexcept { return follow_ups_; }

 private:
  explicit JobResult(Outcome o) : outcome_(o) {}
  Outcome outcome_;
  std::string message_;
  std::chrono::milliseconds delay_{-1};
  std::optional<std::string> result_json_;
  std::vector<FollowUp> follow_ups_;
};

// What a handler sees of its job. Valid only during the handler call.
class JobContext {
 public:
  virtual ~JobContext() = default;

  virtual const ClaimedEntry& entry() const = 0;
  JobId job_id() const { return entry().job_id; }
  const std::string& kind() const { return entry().kind; }
  int attempt() const { return entry().attempt; }
  int max_attempts() const { return entry().max_attempts; }
  const std::string& queue() const { return entry().queue; }
  int priority() const { return entry().priority; }
  int enqueue_shard() const { return entry().enqueue_shard; }
  // The metadata, null when none. Throws UndecodableJson when the stored value has no
  // nlohmann::json form (a number beyond a double's range, nesting deeper than
  // kMaxDecodedJsonDepth): escaping the handler, that fails the job without retry.
  const nlohmann::json& metadata() const {
    if (!entry().metadata_error.empty()) throw UndecodableJson(entry().metadata_error);
    return entry().metadata;
  }
  // Parsed once, on first use. Throws UndecodableJson as metadata() does.
  virtual const nlohmann::json& args() const = 0;
  template <class T>
  T args_as() const {
    return args().get<T>();
  }
  // The args and metadata as stored (jsonb's text; metadata "" when none), for a handler
  // that needs what a decoded value cannot hold — exact decimals, numbers beyond a
  // double's range — through a parser of its own. Never throws.
  const std::string& args_json() const { return entry().args_json; }
  const std::string& metadata_json() const { return entry().metadata_json; }
  // The W3C trace context the job was enqueued with (InsertOpts::trace, a producer's
  // metadata "traceparent"; docs/observability.md), or nullopt when it has none or an
  // invalid one. It is the thread's trace::current() while the handler runs.
  std::optional<trace::Context> trace_context() const {
    if (!entry().metadata_error.empty()) return std::nullopt;
    return trace::from_metadata(entry().metadata);
  }

  // Fires when the job is cancelled (or rescued elsewhere) or the client shuts down past
  // its grace period. Long handlers should check it.
  virtual std::stop_token stop_token() const = 0;
  // Reports progress (0..100) and a message; materialises a lease and heartbeats now.
  virtual void set_progress(double percent, const std::string& message = {}) = 0;
  // Heartbeats now (the runtime also heartbeats every running job periodically).
  virtual void heartbeat() = 0;
  // Gives this attempt a callback id for another system to answer with (materialises a
  // lease), and a callback timeout of now + timeout; the same id on every call. Hand the
  // id to the other system, then return JobResult::wait_for_callback. A callback that
  // arrives before the handler returns is accepted: the attempt ends there, and the
  // handler's own result is stale. Throws InvalidArgument for a timeout outside
  // 1 ms .. 100 years, and awa::Error when the attempt is no longer open (cancelled,
  // rescued, or already ended by its callback).
  virtual std::string register_callback(std::chrono::milliseconds timeout) = 0;
  // The results of this job's parents (InsertOpts::after) that completed with one
  // (JobResult::completed(result)), keyed by parent id: one query per call. Empty for a
  // job without parents, or whose parents returned none. Throws UndecodableJson as args()
  // does, and awa::Error when the database cannot be read.
  virtual std::map<JobId, nlohmann::json> parent_results() const = 0;

  // Exactly-once effects (docs/workflows.md): completes this attempt inside the transaction
  // open on `conn` (the handler's own connection, beside its business writes), so the job
  // is completed if and only if that transaction commits. Call it last, COMMIT, then
  // return JobResult::completed(): the runtime sends no completion of its own then. Throws
  // as QueueStorage::finalize_in does: awa::Error with SQLSTATE 55000 when the attempt is
  // no longer current (rescued, cancelled, past its deadline and rescued), after which
  // the transaction can only roll back. A handler that does not commit after it (or
  // returns anything but completed()) leaves the attempt to the runtime as usual. After
  // it, heartbeat() and set_progress() do nothing (the open transaction holds the lock a
  // heartbeat would wait for).
  void complete_in(Connection& conn) { finalize_in(conn, std::nullopt); }
  // The same with a result kept with the job (as JobResult::completed(result)).
  void complete_in(Connection& conn, const nlohmann::json& result);

 protected:
  virtual void finalize_in(Connection& conn, const std::optional<std::string>& result_json) = 0;
};

// A handler that throws is a retryable failure with the exception's message; one that
// lets UndecodableJson escape is a terminal failure (it would never decode).
using Handler = std::function<JobResult(JobContext&)>;

struct QueueConfig {
  std::string name = "default";
  // Concurrent handlers for this queue. Default: 10.
  int max_workers = 10;
  // Rows per claim at most. Default: 512.
  int claim_batch = 512;
  // Prefetch: jobs the dispatcher may hold claimed ahead of a free worker, at most, so
  // that its next claim overlaps the handlers instead of waiting for them. Within this
  // bound it keeps about what the workers start during one claim round trip (measured as
  // it goes), so short handlers get a buffer and slow ones none. Prefetched jobs are
  // heartbeated like running ones, shown as awa_jobs_prefetched{queue}, and handed back
  // unstarted, claimable at once, by stop(). 0: claim only for free workers. Default:
  // 1024 — twice claim_batch, so that with short handlers both claimers' claims are in
  // flight at once (docs/benchmarks.md, "A prefetch bound that lets both claimers claim": 512
  // left the second one waiting). A queue with a rate or global concurrency limit
  // prefetches nothing: a prefetched job would hold one of the limit's slots or tokens
  // while it waits for a worker.
  int max_prefetch = 1024;
  // Claim connections: the first claims when the client's listener routes it a
  // notification of the queue, and polls; the others claim too while the queue is busy, so
  // claims of several lanes (shards, priorities) run at once. Each is a dedicated
  // connection. 1..8. Default: 2.
  int claimers = 2;
  // Fallback poll when no notification arrives. Default: 1 s.
  std::chrono::milliseconds poll_interval{1000};
  // Hard deadline per attempt; rescued after it. Unset: the queue's stored deadline_ms
  // (awa queue configure --deadline-ms), none when that is unset too.
  std::optional<std::chrono::milliseconds> deadline;
  // Priority aging interval. Unset: the queue's stored priority_aging_ms, none when that is
  // unset too.
  std::optional<std::chrono::milliseconds> priority_aging;
};

struct ClientOptions {
  std::string database_url;
  // Default: "awa".
  std::string schema = "awa";
  // The registry the client counts into (the engine's families, awa/metrics.hpp: claims,
  // completions, running and prefetched jobs, ...); must outlive the client. Give two
  // clients of one process their own registries to keep their counters apart. Default
  // (null): metrics::default_registry(), which `awa work --metrics-addr` serves.
  metrics::Registry* metrics_registry = nullptr;
  // Migrate the schema at start(). Default: true.
  bool migrate = true;
  // At most this many connections, opened when first needed and kept, shared by the
  // client's short calls: Client::insert*, heartbeats and set_progress, callbacks, cancels,
  // the instance registry, wake-ups, handing back prefetched jobs, and the migration at
  // start(). Claimers, completion writers, the listener and maintenance have their own
  // connections. Default: 8.
  std::size_t pool_size = 8;
  // Cap on concurrent handlers over all queues; 0 = the sum of the queues' max_workers.
  int max_workers = 0;
  // Default: 30 s.
  std::chrono::milliseconds heartbeat_interval{30000};
  // An attempt whose heartbeat is older than this is rescued. Default: 90 s.
  std::chrono::milliseconds stale_after{90000};
  // The maintenance leader's round: promotion, rescue and due periodic jobs each round;
  // ring rotation and prune every ring_rotate_interval; DLQ retention, expired instances
  // and the unique-key sweep at most once a minute. Default: 1 s.
  std::chrono::milliseconds maintenance_interval{1000};
  // Dead letters older than this are purged by the leader. Default: 30 days.
  std::chrono::milliseconds dlq_retention{std::chrono::hours(24 * 30)};
  // The leader rotates each storage ring this often (when it holds rows) and prunes
  // sealed slots every maintenance round (docs/design/rings.md); zero turns both off, and
  // history then grows without bound. Default: 5 s.
  std::chrono::milliseconds ring_rotate_interval{5000};
  // Failed jobs stay inspectable in the rings at least this long. Default: 72 h.
  std::chrono::seconds failed_retention{std::chrono::hours(72)};
  // The maintenance leader (one process per schema) sets the per-lane gauges
  // awa_queue_lag and awa_queue_available of every queue of the schema this often; other
  // processes expose none (or 0 after losing the leadership), so sum them over processes.
  // One statement per refresh, counting at most 1000 available rows per lane (a deeper
  // lane reports its lag, an upper bound). Zero turns it off. Default: 5 s.
  std::chrono::milliseconds queue_gauges_interval{5000};
  // stop(): how long in-flight handlers may take before their stop tokens fire.
  std::chrono::milliseconds shutdown_timeout{10000};
  // Completion batcher. Defaults: 512 rows or 1 ms.
  std::size_t completion_batch = 512;
  std::chrono::microseconds completion_flush{1000};
  // Completion flushes in flight at once, each on a connection of its own (not from the
  // pool: handlers that hold or wait for pool connections never delay completions).
  // Default: 2.
  int completion_writers = 2;
  // Run the maintenance leader election in this process. Default: true.
  bool maintenance = true;
  // application_name of every connection the client opens (shows in pg_stat_activity,
  // so operators can tell which process holds what). Default: "awa".
  std::string application_name = "awa";
  // Connect timeout of every connection the client opens. Default: 5 s.
  std::chrono::milliseconds connect_timeout{5000};
  // database_url goes through a transaction-mode pooler (PgBouncer pool_mode =
  // transaction; docs/deployment.md): its connections then prepare no named statements
  // and keep no session state, and what needs a session moves to direct_database_url —
  // or, without one, the claimers poll (QueueConfig::poll_interval), a cancel reaches a
  // running handler at its next heartbeat, and the maintenance leader is elected by a
  // lease row instead of a session advisory lock. start() runs a NOTIFY self-test
  // (logged; gauge awa_notify_ok{schema} on /metrics). Default: false; a non-empty
  // direct_database_url implies it.
  bool pooled = false;
  // A direct (session) URL of the same database, used only for what needs a session: the
  // client's listener (one connection: the LISTEN of every queue's channel and of
  // cancels) and the maintenance leader's advisory lock and statements (one). Claims,
  // completions, heartbeats and enqueues still go through database_url. Default: empty.
  std::string direct_database_url;
  // OpenTelemetry spans (awa/tracing.hpp, docs/observability.md "Tracing"). Unset
  // (default): trace::ExportOptions::from_env(), so the standard OTEL_* variables turn it
  // on; off when none is set. An ExportOptions with enabled = false: off, whatever the
  // environment says.
  std::optional<trace::ExportOptions> tracing;
};

struct ClientStats {
  std::uint64_t claimed = 0;
  std::uint64_t completed = 0;
  std::uint64_t retried = 0;
  std::uint64_t failed = 0;
  std::uint64_t snoozed = 0;
  std::uint64_t cancelled = 0;
  std::uint64_t stale_completions = 0;
  std::uint64_t rescued = 0;          // by this process as leader
  std::uint64_t promoted = 0;         // by this process as leader
  std::uint64_t rotations = 0;        // ring rotations, by this process as leader
  std::uint64_t prunes = 0;           // ring slots pruned, by this process as leader
  std::uint64_t released = 0;         // prefetched jobs handed back unstarted by stop()
  std::uint64_t periodic_fired = 0;   // periodic jobs enqueued, by this process as leader
  std::uint64_t periodic_failed = 0;  // periodic fires that failed (logged), likewise
  std::uint64_t waiting = 0;          // attempts parked waiting for a callback (their slots freed)
  int running = 0;                    // handlers running now
  int prefetched = 0;                 // claimed, not started yet
  bool leader = false;
};

class Client {
 public:
  explicit Client(ClientOptions options);
  ~Client();  // stop() if running
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void register_worker(const std::string& kind, Handler handler);
  void add_queue(QueueConfig config);
  // Declares a periodic job (include/awa/periodic.hpp, docs/scheduling.md), upserted
  // into the schema's periodic_jobs at start() (all of this client's in one transaction;
  // a paused schedule stays paused), then fired by whichever process is the maintenance
  // leader. Validated now (InvalidArgument: name, schedule, job fields, a name declared
  // twice); the time zone is checked at start(). Before start() only.
  void add_periodic(PeriodicJob job);
  void add_periodic(std::string name, std::string schedule, std::string kind,
                    nlohmann::json args = nlohmann::json::object(), PeriodicOptions options = {});

  // Migrates (unless disabled), starts dispatchers, workers, heartbeats and maintenance.
  void start();
  // Graceful: stop claiming, hand prefetched jobs back unstarted (claimable at once by any
  // worker), let in-flight handlers finish within shutdown_timeout (then
  // fire their stop tokens and wait for them), flush completions, release the leader lock.
  // Attempts that could not finish stay open and are rescued later. Idempotent.
  void stop();

  // Enqueue through the client's store and pool (self-committing).
  JobId insert(const NewJob& job);
  // The same, also saying whether a unique job was a duplicate (QueueStorage::insert_result).
  InsertResult insert_result(const NewJob& job);
  std::vector<JobId> insert_many(std::span<const NewJob> jobs);

  QueueStorage& storage();
  ClientStats stats() const;
  // Whether this client can do its work now (what `awa work --health-addr` serves at
  // /readyz; metrics::Server::set_readiness): started and not stopping; every queue's
  // last claim succeeded, and a queue with room for work claimed within two poll
  // intervals and 5 s (so polling is on time, pooled or not), nor has a claim in flight
  // longer than that (blocked on a lock, say); a pooled connection within
  // 2 s answers a statement; the listener is connected (when the client listens); no
  // completion flush failed in the last 30 s. Each reason names what is wrong. A database
  // that accepts connections but never answers makes this call wait for it.
  metrics::Readiness readiness() const;

  // What the span exporter did (zeros when tracing is off).
  trace::ExportStats tracing_stats() const;
  // Exports the spans recorded so far; false when the collector did not take them within
  // `timeout`. stop() does this with the export timeout.
  bool flush_traces(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace awa
