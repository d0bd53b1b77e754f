// The worker runtime behind awa::Client (docs/runtime.md): the state every part shares.
// Its parts live in runtime/client.cpp (configuration, lifecycle, stats),
// runtime/dispatcher.cpp (claims), runtime/workers.cpp (handlers), runtime/callbacks.cpp
// (external callbacks), runtime/listener.cpp (notifications) and runtime/control.cpp
// (heartbeats and cancellation).
//
// Threads, and what each owns:
//   - QueueConfig::claimers dispatchers ("claimers") per queue, each on a dedicated
//     connection: the first claims when the listener routes it a notification of its
//     queue, and polls; the others claim only while the queue is busy (the last claim
//     brought rows), so claims of several lanes overlap;
//   - `cap` worker threads running handlers (cap = ClientOptions::max_workers, or the
//     sum of the queues' max_workers), fed from the queues' ready deques;
//   - the listener: the Client's one LISTEN session (every queue's channel, "awa:cancel"
//     and a private wake channel); it only routes what arrives;
//   - a control thread: the batched heartbeats, the cancels the listener hands it, and
//     marking this instance seen in runtime_instances (all on pool connections);
//   - the completion batcher's thread (runtime/completion_batcher.hpp);
//   - the maintenance leader's thread (runtime/maintenance_leader.hpp).
//
// Claims and prefetch: a dispatcher claims for the workers that could start one of its
// queue's jobs now, plus a prefetch goal (QueueConfig::max_prefetch at most) of jobs
// claimed ahead, so that its next claim runs while the handlers do instead of after
// them. The goal tracks what the workers start during one claim round trip (measured),
// so a queue of slow handlers prefetches nothing. Every claimed job is in running_ from
// hand-off to the end of its handler, so heartbeats and cancellation cover prefetched
// jobs too; stop() hands the unstarted ones back (QueueStorage::release).
// The per-queue max_workers and the global cap bound *running* handlers at every
// instant: a worker starts a job only while both have room.
//
// Lock order: lifecycle_mu_ before mu_. mu_ is never held across a database call or a
// handler call.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/client.hpp"
#include "awa/metrics.hpp"
#include "pg/pool.hpp"
#include "runtime/backoff.hpp"
#include "runtime/claim_pace.hpp"
#include "runtime/completion_batcher.hpp"
#include "runtime/instance_registry.hpp"
#include "runtime/maintenance_leader.hpp"
#include "storage/stored_json.hpp"
#include "trace/tracer.hpp"

namespace awa {
namespace client_detail {

using runtime::kMaxBackoff;
using runtime::kMinBackoff;

}  // namespace client_detail

struct Client::Impl {
  class Job;

  struct QueueState {
    QueueConfig config;
    std::string channel;  // notify_channel(queue): producers notify it
    // Guarded by Impl::mu_:
    std::deque<std::unique_ptr<Job>> ready;  // claimed, not started, in claim order
    int running = 0;                         // handlers running
    int claiming = 0;                        // rows the claims in progress may bring
    runtime::ClaimPace pace;                 // the queue's start rate and claim time
    int prefetch_goal = 0;                   // pace.goal(max_prefetch), kept current
    bool busy = false;            // the last claim brought rows: helper claimers may claim
    int waiting_claimers = 0;     // claimers asleep on slot_cv_ for room
    bool claimers_woken = false;  // slot_cv_ notified for them, not yet seen
    // A notification on `channel` reached the listener since claimer 0 last claimed (or
    // the listener (re)connected, and may have missed some): claimer 0 claims.
    bool notified = false;
    std::uint64_t started = 0;                   // handlers started, ever (the pace's input)
    metrics::Gauge* running_gauge = nullptr;     // awa_jobs_running{queue}; atomic itself
    metrics::Gauge* prefetched_gauge = nullptr;  // awa_jobs_prefetched{queue}
    std::vector<std::thread> threads;            // its claimers; [0] answers notifications
    // The queue's database-enforced limits (queue_meta, migration 0009) as last read, and
    // when; re-read every kLimitsRefresh by whichever claimer finds them stale.
    std::optional<double> max_rate;         // claims/s, all processes together
    std::optional<int> global_max_workers;  // open attempts, all processes together
    std::chrono::steady_clock::time_point limits_read_at{};
    bool limits_read = false;
    // When a claim of this queue last ended (set at start()), and the error of the last
    // one if it failed: readiness() reports a failing or late claimer.
    std::chrono::steady_clock::time_point last_claim{};
    std::optional<std::string> claim_error;
  };

  // One claimed attempt, from claim until its handler returns. Owned by the task deque,
  // then by the worker running it; running_ points at it while it exists.
  class Job final : public JobContext {
   public:
    Job(Impl& impl, ClaimedEntry e, QueueState& q) : impl_(impl), entry_(std::move(e)), queue_(q) {}

    const ClaimedEntry& entry() const override { return entry_; }
    const nlohmann::json& args() const override {
      if (!args_) {
        // In the handler's call, so a value that does not decode fails this job alone
        // (run_job: without retry); the claim that brought it never parses it.
        nlohmann::json v;
        if (auto why = storage::decode_stored_json(entry_.args_json, v); !why.empty()) {
          throw UndecodableJson("args could not be decoded: " + why +
                                "; JobContext::args_json() has the stored text");
        }
        args_ = std::move(v);
      }
      return *args_;
    }
    std::stop_token stop_token() const override { return stop_.get_token(); }
    // No-ops after complete_in: the handler's open transaction holds the attempt's batch
    // lock, which a heartbeat (on another connection) would wait for until that commit.
    void set_progress(double percent, const std::string& message) override {
      if (finalized_) return;
      // The message is free text: invalid UTF-8 becomes U+FFFD rather than a throw.
      impl_.beat_one(*this, nlohmann::json{{"percent", percent}, {"message", message}}.dump(
                                -1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    void heartbeat() override {
      if (!finalized_) impl_.beat_one(*this, std::nullopt);
    }
    std::string register_callback(std::chrono::milliseconds timeout) override {
      if (finalized_) {
        throw Error("job " + std::to_string(entry_.job_id) +
                    ": complete_in already completed this attempt; no callback registered");
      }
      return impl_.register_callback(*this, timeout);
    }
    std::map<JobId, nlohmann::json> parent_results() const override {
      return impl_.parent_results(entry_.job_id);
    }
    // complete_in was called: the handler's own transaction completes the attempt.
    bool finalized() const { return finalized_; }

    // Thread-safe (std::stop_source is).
    void request_stop() { stop_.request_stop(); }
    bool stop_requested() const { return stop_.stop_requested(); }
    QueueState& queue_state() const { return queue_; }
    std::pair<JobId, std::int64_t> key() const { return {entry_.job_id, entry_.run_lease}; }

   private:
    void finalize_in(Connection& conn, const std::optional<std::string>& result_json) override {
      impl_.store_->finalize_in(conn, entry_, result_json);
      finalized_ = true;
    }

    Impl& impl_;
    const ClaimedEntry entry_;
    QueueState& queue_;
    std::stop_source stop_;
    mutable std::optional<nlohmann::json> args_;  // touched by the handler's thread only
    bool finalized_ = false;                      // likewise
  };

  enum class Phase { kNew, kRunning, kStopped };

  explicit Impl(ClientOptions o);

  ~Impl() { stop(); }

  pg::ConnectOptions connect_options() const {
    pg::ConnectOptions c;
    c.url = options_.database_url;
    c.connect_timeout = options_.connect_timeout;
    c.application_name = options_.application_name;
    c.pooled = pooled();
    return c;
  }

  // database_url goes through a transaction pooler (ClientOptions::pooled).
  bool pooled() const { return options_.pooled || !options_.direct_database_url.empty(); }
  // Notifications can be received: connections with a session exist for LISTEN. Without
  // (pooled, no direct URL) the claimers poll and cancels wait for the next heartbeat.
  bool listens() const { return !pooled() || !options_.direct_database_url.empty(); }
  // The claimers' connections (dispatcher.cpp).
  pg::ConnectOptions claim_options() const;
  // For LISTEN and the leader's session lock: the direct URL when there is one.
  pg::ConnectOptions session_connect_options() const {
    pg::ConnectOptions c = connect_options();
    if (!options_.direct_database_url.empty()) {
      c.url = options_.direct_database_url;
      c.pooled = false;
    }
    return c;
  }

  // --- configuration --------------------------------------------------------------------

  void register_worker(const std::string& kind, Handler handler);

  void add_queue(QueueConfig config);

  void add_periodic(PeriodicJob job);

  // --- lifecycle ------------------------------------------------------------------------

  void start();

  void stop();

  // REQUIRES: lifecycle_mu_ held and phase_ == kRunning (possibly partially started).
  void shutdown();

  // Best effort: a thread blocked in LISTEN returns at once instead of at its next poll.
  void wake(const std::string& channel);

  // The listener's private channel: stop() wakes it there. "awa-wake:" channels never
  // collide with a queue's ("awa:...").
  std::string listener_wake_channel() const { return fmt::format("awa-wake:{}:listener", token_); }

  // --- the listener (runtime/listener.cpp) ------------------------------------------------

  // The Client's one LISTEN session: every queue's channel, "awa:cancel" and its private
  // wake channel. PostgreSQL signals every listening backend of the database on every
  // NOTIFY, and each signalled backend runs a transaction to read the notification queue;
  // one listener per Client instead of one per queue keeps that cost at one per NOTIFY.
  void listen_loop();
  // Routes one notification: a queue's marks it notified and wakes its claimers; a
  // cancel goes to the control thread.
  void route_notification(const pg::Notification& n);
  // Marks every queue notified: the listener (re)connected and may have missed some.
  void notify_all_queues();

  // --- dispatch -------------------------------------------------------------------------

  // How many rows a claimer of `q` should claim now, or 0 to wait (runtime::claim_size):
  // room for the workers that could start one of its jobs now plus its prefetch goal,
  // less what it holds or is claiming. REQUIRES: mu_ held.
  int claim_want(const QueueState& q) const {
    const int room = std::max(0, std::min(q.config.max_workers - q.running, cap_ - running_total_));
    return runtime::claim_size(room, q.prefetch_goal, static_cast<int>(q.ready.size()), q.claiming,
                               q.config.claim_batch, q.config.claimers);
  }

  // Waits up to `d` or until stop; false when stopping.
  bool pause_dispatch(std::chrono::milliseconds d);

  // The prefetch goal of `q`: none for a limited queue — a prefetched job holds one of
  // the global limit's slots (or one of the rate's tokens) while it waits, so this process
  // would keep work from the others' idle workers. REQUIRES: mu_ held.
  int prefetch_goal(const QueueState& q) const {
    if (q.max_rate || q.global_max_workers) return 0;
    return q.pace.goal(q.config.max_prefetch);
  }

  // Reads `q`'s limits on `conn` (queries/runtime/queue_limits.sql) into `q`; returns
  // whether the queue has an available row now. Throws on a database error.
  bool read_limits(QueueState& q, pg::Connection& conn, const std::string& sql);

  // After a claim of a limited queue that came back empty: if the queue still has an
  // available row, the limit held it back, and the next claim should come sooner than
  // the poll interval — about one token's time for a rate limit, a short fixed interval
  // for a concurrency limit (no notification says that another process's job ended).
  // nullopt: not limited, or nothing to claim.
  std::optional<std::chrono::milliseconds> limited_wait(QueueState& q, pg::Connection& conn,
                                                        const std::string& sql);

  // Claimer 0 of a queue: claims on notifications (routed by the listener), polls.
  void dispatch(QueueState& q);
  // Claimers 1..: claim on their own connections while the queue is busy, so claims of
  // several lanes run at once.
  void help_dispatch(QueueState& q);

  // Waits until a claimer of `q` may claim (a helper: also until the queue is busy) and
  // reserves the rows; 0 when stopping.
  int await_claim(QueueState& q, bool helper);
  // Reserves a claim: the rows `q` wants now, or 0 (then the caller waits). REQUIRES: mu_.
  int reserve_claim(QueueState& q);
  // One claim on `conn` (opened if needed), at most `want` rows, handed to the workers.
  // Returns rows claimed, or nullopt after an error (the reservation is dropped).
  // `limits_sql`: the rendered queries/runtime/queue_limits.sql, re-read when stale.
  std::optional<int> claim_into(QueueState& q, std::optional<pg::Connection>& conn, int want,
                                const std::string& limits_sql);

  // Ends a claim of up to `reserved` rows: queues what it brought for the workers.
  void hand_off(QueueState& q, std::vector<ClaimedEntry>& claimed, int reserved);

  // Hands the unstarted jobs of every queue back to the database (stop()).
  void release_prefetched();

  // --- workers --------------------------------------------------------------------------

  void work();

  // A job a worker may start now (the queues in turn, each within its max_workers), taken
  // off its queue's ready deque and counted as running; nullptr if none. Wakes the
  // queue's dispatcher when that leaves it room to claim. REQUIRES: mu_ held.
  Job* take_ready();

  // One wake-up per claim cycle, not one per job. REQUIRES: mu_ held.
  void wake_dispatcher_if_room(QueueState& q) {
    if (q.waiting_claimers > 0 && !q.claimers_woken && claim_want(q) > 0) {
      q.claimers_woken = true;
      slot_cv_.notify_all();
    }
  }

  void run_job(Job& job);
  // The attempt's "process" span (not started when tracing is off) and its end, with the
  // outcome the handler reported.
  trace::detail::ActiveSpan process_span(const Job& job,
                                         const std::optional<trace::Context>& stored);
  void end_process_span(trace::detail::ActiveSpan& span, const Job& job, const JobResult& result);

  // --- external callbacks (runtime/callbacks.cpp) -----------------------------------------

  std::string register_callback(Job& job, std::chrono::milliseconds timeout);
  // JobContext::parent_results, on a pooled connection (job_result.cpp).
  std::map<JobId, nlohmann::json> parent_results(JobId job);
  // The handler returned wait_for_callback: parks the attempt (waiting_external); the
  // worker slot is freed when run_job returns.
  void park_for_callback(Job& job, std::chrono::milliseconds timeout);

  void count_result(const Completion&, const CompletionResult& r);

  // --- heartbeats and cancellation ------------------------------------------------------

  void beat_one(Job& job, std::optional<std::string> progress);

  void beat_all();

  // Heartbeats `beats` and fires the stop token of every attempt among them that the
  // database no longer has open.
  void stop_closed(const std::vector<QueueStorage::Heartbeat>& beats, std::string_view why);

  // 'awa:cancel' is one channel for every schema of the database, so a job id in it may
  // name another schema's job. The notification is only a hint: heartbeat our attempts
  // of that id and stop those the database reports closed.
  void cancel_running(std::string_view payload);

  void control();

  // Pooled mode, at start(): LISTENs where the runtime would (the direct URL, else a
  // pooled connection), NOTIFYs through the pool and waits up to a second. Logs the
  // outcome and sets awa_notify_ok{schema}; returns whether the notification arrived.
  bool notify_self_test();

  // --- instance registry (runtime/instance_registry.hpp) -----------------------------------

  // Registers the instance or marks it seen; best effort (logged once per failure streak).
  // start() (the first registration), then the control thread only.
  void beat_instance();
  // Deletes the instance's row at the end of a clean stop; best effort.
  void remove_instance();

  // --- producer side and stats ----------------------------------------------------------

  std::vector<JobId> insert_many(std::span<const NewJob> jobs);

  ClientStats stats() const;
  metrics::Readiness readiness() const;

  const ClientOptions options_;
  std::unique_ptr<pg::Pool> pool_;
  // The completion batcher's writers' connections, apart from pool_: handlers take pool_
  // connections (set_progress, callbacks, inserts) and may hold or wait for all of them;
  // a completion must never queue behind them.
  std::unique_ptr<pg::Pool> completion_pool_;
  std::unique_ptr<QueueStorage> store_;
  const std::string wake_sql_;
  const std::string token_;  // makes this client's wake channels unique in the cluster

  // Set before start(), read-only afterwards (so readable without a lock by the threads).
  std::unordered_map<std::string, Handler> handlers_;
  std::vector<std::unique_ptr<QueueState>> queues_;
  std::vector<PeriodicJob> periodic_;  // upserted at start()
  int cap_ = 0;
  // Spans' recorder and exporter (awa/tracing.hpp): made by the constructor when tracing
  // is on, the process's tracer between start() and stop(), flushed by stop().
  std::shared_ptr<trace::detail::Tracer> tracer_;

  mutable std::mutex lifecycle_mu_;                      // serialises start()/stop()
  Phase phase_ = Phase::kNew;                            // guarded by lifecycle_mu_
  std::unique_ptr<runtime::CompletionBatcher> batcher_;  // set in start(), reset in stop()
  // Created in start(), stopped in stop(), destroyed with the Impl.
  std::unique_ptr<runtime::MaintenanceLeader> maintenance_;
  std::atomic<const runtime::MaintenanceLeader*> maintenance_view_{nullptr};
  // This process's row in runtime_instances. Created in start() before any thread that
  // uses it, kept until destruction.
  std::unique_ptr<runtime::InstanceRegistry> instance_;
  bool instance_failing_ = false;  // the last registry write failed; control thread only
  std::vector<std::thread> workers_;
  std::thread control_;
  std::thread listener_;  // started when listens()

  mutable std::mutex mu_;
  std::condition_variable work_cv_;     // workers: a job is ready, or stop
  std::condition_variable slot_cv_;     // dispatchers and stop(): room to claim, idle, or stop
  std::condition_variable control_cv_;  // control thread: a cancel to look at, or stop
  // Every claimed attempt from hand-off until its handler returns (or it is released).
  std::map<std::pair<JobId, std::int64_t>, Job*> running_;  // guarded by mu_
  int running_total_ = 0;                                   // guarded by mu_
  std::size_t next_queue_ = 0;  // take_ready's round-robin start; guarded by mu_
  bool dispatch_stop_ = false;  // guarded by mu_
  bool workers_stop_ = false;   // guarded by mu_
  bool control_stop_ = false;   // guarded by mu_
  bool listener_stop_ = false;  // guarded by mu_
  // The listener holds a connection with its LISTENs in place (readiness()).
  std::atomic<bool> listening_{false};
  // Payloads of "awa:cancel" notifications, from the listener to the control thread.
  std::vector<std::string> cancels_;  // guarded by mu_

  std::atomic<std::uint64_t> claimed_{0};
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> retried_{0};
  std::atomic<std::uint64_t> failed_{0};
  std::atomic<std::uint64_t> snoozed_{0};
  std::atomic<std::uint64_t> cancelled_{0};
  std::atomic<std::uint64_t> stale_{0};
  std::atomic<std::uint64_t> released_{0};
  std::atomic<std::uint64_t> waiting_{0};
};

}  // namespace awa
