// The worker runtime behind awa::Client (docs/runtime.md).
//
// Threads, and what each owns:
//   - one dispatcher per queue: a dedicated connection that LISTENs on "awa:<queue>" and
//     on a private wake channel, and claims on that same connection;
//   - `cap` worker threads running handlers (cap = ClientOptions::max_workers, or the
//     sum of the queues' max_workers), fed from one task deque;
//   - a control thread: a dedicated connection LISTENing on "awa:cancel" (and a private
//     wake channel) that also sends the batched heartbeats (on a pool connection);
//   - the completion batcher's thread (runtime/completion_batcher.hpp);
//   - the maintenance leader's thread (runtime/maintenance_leader.hpp).
//
// Capacity is reserved before a claim: a dispatcher adds `want` to its queue's and the
// global in-flight counts under mu_, claims at most `want` rows, and gives back the
// rows it did not get. So the queue and global caps hold at every instant, and every
// claimed entry has a worker thread free to run it at once.
//
// Lock order: lifecycle_mu_ before mu_. mu_ is never held across a database call or a
// handler call.
#include "awa/client.hpp"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "pg/pool.hpp"
#include "runtime/completion_batcher.hpp"
#include "runtime/maintenance_leader.hpp"
#include "schema/migrator.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/validate.hpp"

namespace awa {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kMinBackoff{100};
// Short: after a server restart the dispatchers should be back within a second of the
// server, and a reconnect attempt per second per thread costs the server nothing.
constexpr milliseconds kMaxBackoff{1000};
// An empty claim right after a wake-up or a successful claim may only mean that another
// claimer (another process) holds the lanes with rows (claim_ready_runtime uses SKIP
// LOCKED). Retry after these short pauses before falling back to the poll interval;
// bounded, so an empty queue costs two extra claims per burst and no more.
constexpr milliseconds kQuickRetries[] = {milliseconds(5), milliseconds(25)};
constexpr std::size_t kNoQuickRetry = std::size(kQuickRetries);
constexpr std::string_view kCancelChannel = "awa:cancel";
constexpr milliseconds kControlPoll{1000};
// stop() gives up on a wake notification after this long (the thread then notices at
// its next poll).
constexpr milliseconds kWakeAcquireTimeout{1000};
// A job of a kind this process has no handler for goes back to the queue (snoozed: the
// attempt is not consumed) for a worker that has one — during a rolling deploy an old
// worker must not kill every job of a new kind. The delay grows with the job's age, so a
// job nobody can run costs little while one caught by a deploy is retried promptly.
constexpr milliseconds kUnknownKindMinDelay{1000};
constexpr milliseconds kUnknownKindMaxDelay{60000};

milliseconds unknown_kind_delay(const ClaimedEntry& e) {
  const auto age =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now() - e.created_at);
  return std::clamp(age / 10, kUnknownKindMinDelay, kUnknownKindMaxDelay);
}

std::string random_token() {
  std::random_device rd;
  const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{:016x}", v);
}

milliseconds until(Clock::time_point t) {
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(t - Clock::now()));
}

}  // namespace

struct Client::Impl {
  struct QueueState {
    QueueConfig config;
    std::string channel;       // notify_channel(queue): producers notify it
    std::string wake_channel;  // private to this dispatcher: stop() wakes it there
    int inflight = 0;          // claimed, handler not yet returned; guarded by Impl::mu_
    metrics::Gauge* running_gauge = nullptr;  // awa_jobs_running{queue}; atomic itself
    std::thread thread;
  };

  // One claimed attempt, from claim until its handler returns. Owned by the task deque,
  // then by the worker running it; running_ points at it while it exists.
  class Job final : public JobContext {
   public:
    Job(Impl& impl, ClaimedEntry e, QueueState& q) : impl_(impl), entry_(std::move(e)), queue_(q) {}

    const ClaimedEntry& entry() const override { return entry_; }
    const nlohmann::json& args() const override {
      if (!args_) args_ = nlohmann::json::parse(entry_.args_json);
      return *args_;
    }
    std::stop_token stop_token() const override { return stop_.get_token(); }
    void set_progress(double percent, const std::string& message) override {
      impl_.beat_one(*this, nlohmann::json{{"percent", percent}, {"message", message}}.dump());
    }
    void heartbeat() override { impl_.beat_one(*this, std::nullopt); }

    // Thread-safe (std::stop_source is).
    void request_stop() { stop_.request_stop(); }
    QueueState& queue_state() const { return queue_; }
    std::pair<JobId, std::int64_t> key() const { return {entry_.job_id, entry_.run_lease}; }

   private:
    Impl& impl_;
    const ClaimedEntry entry_;
    QueueState& queue_;
    std::stop_source stop_;
    mutable std::optional<nlohmann::json> args_;  // touched by the handler's thread only
  };

  enum class Phase { kNew, kRunning, kStopped };

  explicit Impl(ClientOptions o)
      : options_(std::move(o)),
        pool_(std::make_unique<pg::Pool>(connect_options(), options_.pool_size)),
        store_(std::make_unique<QueueStorage>(StorageOptions{options_.schema})),
        wake_sql_(sql::file("queries/runtime/wake.sql")),
        token_(random_token()) {
    sql::quote_schema(options_.schema);  // InvalidArgument for a bad name, before start()
    if (options_.pool_size < 1) throw InvalidArgument("ClientOptions: pool_size must be >= 1");
    if (options_.max_workers < 0) throw InvalidArgument("ClientOptions: max_workers must be >= 0");
    if (options_.heartbeat_interval.count() <= 0 || options_.stale_after.count() <= 0 ||
        options_.maintenance_interval.count() <= 0 || options_.shutdown_timeout.count() < 0 ||
        options_.ring_rotate_interval.count() < 0 || options_.failed_retention.count() < 0) {
      throw InvalidArgument(
          "ClientOptions: heartbeat_interval, stale_after and maintenance_interval must be "
          "positive; shutdown_timeout, ring_rotate_interval and failed_retention not negative");
    }
  }

  ~Impl() { stop(); }

  pg::ConnectOptions connect_options() const {
    pg::ConnectOptions c;
    c.url = options_.database_url;
    c.connect_timeout = options_.connect_timeout;
    c.application_name = options_.application_name;
    return c;
  }

  // --- configuration --------------------------------------------------------------------

  void register_worker(const std::string& kind, Handler handler) {
    std::lock_guard life(lifecycle_mu_);
    if (phase_ != Phase::kNew) throw InvalidArgument("register_worker: call it before start()");
    if (kind.empty()) throw InvalidArgument("register_worker: empty kind");
    if (!handler) throw InvalidArgument("register_worker: empty handler for kind " + kind);
    handlers_[kind] = std::move(handler);
  }

  void add_queue(QueueConfig config) {
    std::lock_guard life(lifecycle_mu_);
    if (phase_ != Phase::kNew) throw InvalidArgument("add_queue: call it before start()");
    storage::validate_queue_name(config.name);
    if (config.max_workers < 1) throw InvalidArgument("add_queue: max_workers must be >= 1");
    if (config.claim_batch < 1) throw InvalidArgument("add_queue: claim_batch must be >= 1");
    if (config.poll_interval.count() <= 0)
      throw InvalidArgument("add_queue: poll_interval must be positive");
    for (const auto& q : queues_) {
      if (q->config.name == config.name)
        throw InvalidArgument("add_queue: queue " + config.name + " added twice");
    }
    auto q = std::make_unique<QueueState>();
    q->channel = notify_channel(config.name);
    // Queue channels all start with "awa:", so this never collides with one.
    q->wake_channel = fmt::format("awa-wake:{}:{}", token_, queues_.size());
    q->running_gauge = &metrics::engine().jobs_running.with({config.name});
    q->config = std::move(config);
    queues_.push_back(std::move(q));
  }

  // --- lifecycle ------------------------------------------------------------------------

  void start() {
    std::lock_guard life(lifecycle_mu_);
    if (phase_ == Phase::kRunning) return;
    if (phase_ == Phase::kStopped)
      throw InvalidArgument("awa::Client cannot be restarted after stop(); create a new one");
    if (options_.migrate) {
      auto conn = pool_->acquire();
      const auto report = schema::Migrator(options_.schema).migrate(*conn);
      if (!report.applied.empty() || !report.functions_updated.empty()) {
        spdlog::info("schema {} migrated to version {} ({} migrations, {} functions)",
                     report.schema, report.version, report.applied.size(),
                     report.functions_updated.size());
      }
    }
    int sum = 0;
    for (const auto& q : queues_) sum += q->config.max_workers;
    cap_ = options_.max_workers > 0 ? options_.max_workers : sum;
    if (options_.heartbeat_interval >= options_.stale_after) {
      spdlog::warn(
          "heartbeat_interval ({} ms) >= stale_after ({} ms): running attempts may be rescued",
          options_.heartbeat_interval.count(), options_.stale_after.count());
    }

    runtime::CompletionBatcherOptions bo;
    bo.max_batch = options_.completion_batch;
    bo.flush_interval = options_.completion_flush;
    batcher_ = std::make_unique<runtime::CompletionBatcher>(
        *pool_, *store_, bo,
        [this](const Completion& c, const CompletionResult& r) { count_result(c, r); });
    try {
      for (int i = 0; i < cap_; ++i) workers_.emplace_back([this] { work(); });
      control_ = std::thread([this] { control(); });
      for (auto& q : queues_) {
        QueueState* qs = q.get();
        qs->thread = std::thread([this, qs] { dispatch(*qs); });
      }
      if (options_.maintenance) {
        runtime::MaintenanceOptions mo;
        mo.connect = connect_options();
        mo.schema = options_.schema;
        mo.interval = options_.maintenance_interval;
        mo.stale_after = options_.stale_after;
        mo.dlq_retention = options_.dlq_retention;
        mo.rotate_interval = options_.ring_rotate_interval;
        mo.failed_retention = options_.failed_retention;
        maintenance_ = std::make_unique<runtime::MaintenanceLeader>(mo, *store_);
        maintenance_->start();
        maintenance_view_.store(maintenance_.get(), std::memory_order_release);
      }
    } catch (...) {
      phase_ = Phase::kRunning;
      shutdown();
      throw;
    }
    phase_ = Phase::kRunning;
    std::string names;
    for (const auto& q : queues_)
      names +=
          fmt::format("{}{}:{}", names.empty() ? "" : ",", q->config.name, q->config.max_workers);
    spdlog::info("awa client started: schema {}, queues [{}], {} worker threads", options_.schema,
                 names, cap_);
  }

  void stop() {
    std::lock_guard life(lifecycle_mu_);
    if (phase_ != Phase::kRunning) return;
    shutdown();
  }

  // REQUIRES: lifecycle_mu_ held and phase_ == kRunning (possibly partially started).
  void shutdown() {
    spdlog::info("awa client stopping: no new claims");
    // 1. No new claims.
    {
      std::lock_guard lock(mu_);
      dispatch_stop_ = true;
    }
    slot_cv_.notify_all();
    for (auto& q : queues_) {
      if (q->thread.joinable()) wake(q->wake_channel);
    }
    for (auto& q : queues_) {
      if (q->thread.joinable()) q->thread.join();
    }
    // 2. In-flight handlers get shutdown_timeout to finish; then their stop tokens fire
    //    and they get as long again. A handler that ignores its token is waited for
    //    without bound: its Job and this Impl must outlive it, and detaching would leave it
    //    running against freed state. Its attempt stays open either way, so if the process
    //    is killed instead, rescue retries the job.
    {
      std::unique_lock lock(mu_);
      const auto idle = [&] { return inflight_total_ == 0; };
      if (!slot_cv_.wait_for(lock, options_.shutdown_timeout, idle)) {
        spdlog::warn("shutdown: {} handlers still running after {} ms; requesting them to stop",
                     inflight_total_, options_.shutdown_timeout.count());
        for (auto& [key, job] : running_) job->request_stop();
        if (!slot_cv_.wait_for(lock, options_.shutdown_timeout, idle)) {
          std::string ids;
          for (const auto& [key, job] : running_) ids += fmt::format(" {}", key.first);
          spdlog::error(
              "shutdown: {} handlers ignore their stop tokens; waiting for them (jobs:{})",
              inflight_total_, ids);
          slot_cv_.wait(lock, idle);
        }
      }
      workers_stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    // 3. Everything the handlers reported reaches the database.
    if (batcher_) {
      batcher_->flush();
      batcher_.reset();
    }
    // 4. Heartbeats and cancel listening end with the last handler.
    {
      std::lock_guard lock(mu_);
      control_stop_ = true;
    }
    control_cv_.notify_all();
    if (control_.joinable()) {
      wake(control_wake_channel());
      control_.join();
    }
    // 5. Leadership goes last, so promotion and rescue keep running while we drain.
    if (maintenance_) maintenance_->stop();
    phase_ = Phase::kStopped;
    const auto s = stats();
    spdlog::info(
        "awa client stopped: claimed {}, completed {}, retried {}, failed {}, snoozed {}, "
        "cancelled {}, stale {}",
        s.claimed, s.completed, s.retried, s.failed, s.snoozed, s.cancelled, s.stale_completions);
  }

  // Best effort: a thread blocked in LISTEN returns at once instead of at its next poll.
  void wake(const std::string& channel) {
    try {
      auto conn = pool_->acquire(kWakeAcquireTimeout);
      conn->exec(wake_sql_, pg::make_params(channel));
    } catch (const std::exception& e) {
      spdlog::debug("wake {}: {}", channel, e.what());
    }
  }

  std::string control_wake_channel() const { return fmt::format("awa-wake:{}:control", token_); }

  // --- dispatch -------------------------------------------------------------------------

  // REQUIRES: mu_ held.
  int free_slots(const QueueState& q) const {
    return std::min(q.config.max_workers - q.inflight, cap_ - inflight_total_);
  }

  // Waits up to `d` or until stop; false when stopping.
  bool pause_dispatch(milliseconds d) {
    std::unique_lock lock(mu_);
    return !slot_cv_.wait_for(lock, d, [&] { return dispatch_stop_; });
  }

  void dispatch(QueueState& q) {
    std::optional<pg::Connection> conn;
    auto backoff = kMinBackoff;
    std::size_t quick = 0;
    QueueStorage::ClaimOptions copts;
    copts.deadline = q.config.deadline;
    copts.aging = q.config.priority_aging;
    for (;;) {
      int want = 0;
      {
        std::unique_lock lock(mu_);
        // A full queue resumes as soon as a worker frees a slot (slot_cv_); the timeout
        // only bounds the wait should a notification be missed.
        slot_cv_.wait_for(lock, q.config.poll_interval,
                          [&] { return dispatch_stop_ || free_slots(q) > 0; });
        if (dispatch_stop_) break;
        want = std::min(free_slots(q), q.config.claim_batch);
        if (want <= 0) continue;
        q.inflight += want;
        inflight_total_ += want;
      }
      std::vector<ClaimedEntry> claimed;
      try {
        if (!conn || !conn->ok()) {
          conn.reset();
          conn.emplace(pg::Connection::connect(connect_options()));
          conn->listen(q.channel);
          conn->listen(q.wake_channel);
          spdlog::debug("dispatcher {}: listening", q.config.name);
        }
        // Wake-ups that arrived before this claim are answered by it; dropping them saves
        // an empty claim. One arriving during the claim is kept and wakes the wait below.
        while (conn->wait_notification(milliseconds(0))) {
        }
        copts.max_batch = want;
        claimed = store_->claim(*conn, q.config.name, copts);
        backoff = kMinBackoff;
      } catch (const std::exception& e) {
        give_back(q, want);
        spdlog::warn("dispatcher {}: {} (retrying in {} ms)", q.config.name, e.what(),
                     backoff.count());
        if (conn && !conn->ok()) conn.reset();
        if (!pause_dispatch(backoff)) break;
        backoff = std::min(backoff * 2, kMaxBackoff);
        continue;
      }
      const bool got_some = !claimed.empty();
      hand_off(q, claimed, want);
      // claim_ready_runtime drains one lane per call: rows on other lanes may be waiting,
      // so any success means "claim again", not just a full batch.
      if (got_some) {
        quick = 0;
        continue;
      }
      milliseconds wait = q.config.poll_interval;
      if (quick < kNoQuickRetry) wait = std::min(wait, kQuickRetries[quick++]);
      {
        std::lock_guard lock(mu_);
        // stop() sets the flag before it notifies the wake channel, so either we see it
        // here or the notification wakes the wait.
        if (dispatch_stop_) break;
      }
      try {
        if (conn->wait_notification(wait)) quick = 0;
      } catch (const std::exception& e) {
        spdlog::warn("dispatcher {}: {}", q.config.name, e.what());
        conn.reset();
      }
    }
    spdlog::debug("dispatcher {}: stopped", q.config.name);
  }

  void give_back(QueueState& q, int n) {
    if (n <= 0) return;
    {
      std::lock_guard lock(mu_);
      q.inflight -= n;
      inflight_total_ -= n;
    }
    slot_cv_.notify_all();
  }

  void hand_off(QueueState& q, std::vector<ClaimedEntry>& claimed, int reserved) {
    const int n = static_cast<int>(claimed.size());
    std::vector<std::unique_ptr<Job>> jobs;
    jobs.reserve(claimed.size());
    for (auto& e : claimed) jobs.push_back(std::make_unique<Job>(*this, std::move(e), q));
    {
      std::lock_guard lock(mu_);
      for (auto& j : jobs) {
        running_.emplace(j->key(), j.get());
        tasks_.push_back(std::move(j));
      }
    }
    claimed_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    q.running_gauge->inc(n);
    if (n > 0) work_cv_.notify_all();
    give_back(q, reserved - n);
  }

  // --- workers --------------------------------------------------------------------------

  void work() {
    for (;;) {
      std::unique_ptr<Job> job;
      {
        std::unique_lock lock(mu_);
        work_cv_.wait(lock, [&] { return workers_stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        job = std::move(tasks_.front());
        tasks_.pop_front();
      }
      run_job(*job);
      job->queue_state().running_gauge->dec();
      {
        std::lock_guard lock(mu_);
        running_.erase(job->key());
        --job->queue_state().inflight;
        --inflight_total_;
      }
      slot_cv_.notify_all();
    }
  }

  void run_job(Job& job) {
    const auto it = handlers_.find(job.kind());
    if (it == handlers_.end()) {
      const auto delay = unknown_kind_delay(job.entry());
      metrics::engine().job_unknown_kind.with({job.queue(), job.kind()}).inc();
      spdlog::warn("job {}: no worker registered for kind {} in {}; back to queue {} in {} ms",
                   job.job_id(), job.kind(), options_.application_name, job.queue(), delay.count());
      // The message lands in the attempt history (attempt_outcomes, state 'snoozed').
      batcher_->submit(Completion::of(job.entry(), Outcome::kSnooze,
                                      fmt::format("no worker registered for kind {} in {}",
                                                  job.kind(), options_.application_name),
                                      delay));
      return;
    }
    JobResult result = JobResult::completed();
    try {
      result = it->second(job);
    } catch (const std::exception& e) {
      result = JobResult::failed(e.what(), true);
    } catch (...) {
      result = JobResult::failed("handler threw a non-std::exception", true);
    }
    batcher_->submit(
        Completion::of(job.entry(), result.outcome(), result.message(), result.delay()));
  }

  void count_result(const Completion&, const CompletionResult& r) {
    if (r.stale()) {
      stale_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    const auto& s = *r.state;
    if (s == "completed") {
      completed_.fetch_add(1, std::memory_order_relaxed);
    } else if (s == "retried") {
      retried_.fetch_add(1, std::memory_order_relaxed);
    } else if (s == "failed" || s == "dlq") {
      failed_.fetch_add(1, std::memory_order_relaxed);
    } else if (s == "snoozed") {
      snoozed_.fetch_add(1, std::memory_order_relaxed);
    } else if (s == "cancelled") {
      cancelled_.fetch_add(1, std::memory_order_relaxed);
    } else {
      spdlog::warn("job {}: unexpected completion state {}", r.job_id, s);
    }
  }

  // --- heartbeats and cancellation ------------------------------------------------------

  void beat_one(Job& job, std::optional<std::string> progress) {
    try {
      auto conn = pool_->acquire();
      const auto beat = QueueStorage::Heartbeat::of(job.entry(), std::move(progress));
      if (store_->heartbeat(*conn, std::span(&beat, 1)).empty()) job.request_stop();
    } catch (const Error& e) {
      // Progress is best effort; the periodic heartbeat keeps the attempt alive.
      spdlog::warn("job {}: heartbeat failed: {}", job.job_id(), e.what());
    }
  }

  void beat_all() {
    std::vector<QueueStorage::Heartbeat> beats;
    {
      std::lock_guard lock(mu_);
      beats.reserve(running_.size());
      for (const auto& [key, job] : running_)
        beats.push_back(QueueStorage::Heartbeat::of(job->entry()));
    }
    if (!beats.empty()) stop_closed(beats, "closed elsewhere (cancelled or rescued)");
  }

  // Heartbeats `beats` and fires the stop token of every attempt among them that the
  // database no longer has open.
  void stop_closed(const std::vector<QueueStorage::Heartbeat>& beats, std::string_view why) {
    try {
      auto conn = pool_->acquire();
      const auto open = store_->heartbeat(*conn, beats);
      const std::set<std::pair<JobId, std::int64_t>> still(open.begin(), open.end());
      std::lock_guard lock(mu_);
      for (const auto& b : beats) {
        const std::pair key{b.job_id, b.run_lease};
        if (still.contains(key)) continue;
        // A job that finished just now is gone from running_ and needs nothing.
        if (const auto it = running_.find(key); it != running_.end()) {
          spdlog::info("job {}: attempt {} {}; stopping its handler", b.job_id, b.run_lease, why);
          it->second->request_stop();
        }
      }
    } catch (const Error& e) {
      spdlog::warn("heartbeat of {} attempts failed: {}", beats.size(), e.what());
    }
  }

  // 'awa:cancel' is one channel for every schema of the database, so a job id in it may
  // name another schema's job. The notification is only a hint: heartbeat our attempts
  // of that id and stop those the database reports closed.
  void cancel_running(std::string_view payload) {
    JobId id = 0;
    const auto* last = payload.data() + payload.size();
    const auto [end, ec] = std::from_chars(payload.data(), last, id);
    if (ec != std::errc() || end != last) return;
    std::vector<QueueStorage::Heartbeat> beats;
    {
      std::lock_guard lock(mu_);
      for (auto it = running_.lower_bound({id, INT64_MIN});
           it != running_.end() && it->first.first == id; ++it) {
        beats.push_back(QueueStorage::Heartbeat::of(it->second->entry()));
      }
    }
    if (!beats.empty()) stop_closed(beats, "cancelled");
  }

  void control() {
    std::optional<pg::Connection> conn;
    auto backoff = kMinBackoff;
    auto next_connect = Clock::now();
    auto next_beat = Clock::now() + options_.heartbeat_interval;
    const auto wake_channel = control_wake_channel();
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (control_stop_) break;
      }
      if (Clock::now() >= next_beat) {
        beat_all();
        next_beat = Clock::now() + options_.heartbeat_interval;
      }
      if (!conn && Clock::now() >= next_connect) {
        try {
          conn.emplace(pg::Connection::connect(connect_options()));
          conn->listen(kCancelChannel);
          conn->listen(wake_channel);
          backoff = kMinBackoff;
        } catch (const std::exception& e) {
          spdlog::warn("cancel listener: {} (retrying in {} ms)", e.what(), backoff.count());
          conn.reset();
          next_connect = Clock::now() + backoff;
          backoff = std::min(backoff * 2, kMaxBackoff);
        }
      }
      if (conn) {
        try {
          // A cancel missed while disconnected is caught by the next heartbeat, which
          // finds the attempt closed.
          // Capped so that stop() is noticed even if its wake notification is lost.
          if (auto n = conn->wait_notification(std::min(until(next_beat), kControlPoll))) {
            if (n->channel == kCancelChannel) cancel_running(n->payload);
          }
        } catch (const std::exception& e) {
          spdlog::warn("cancel listener: {}", e.what());
          conn.reset();
          next_connect = Clock::now() + backoff;
        }
      } else {
        std::unique_lock lock(mu_);
        control_cv_.wait_until(lock, std::min(next_beat, next_connect),
                               [&] { return control_stop_; });
      }
    }
  }

  // --- producer side and stats ----------------------------------------------------------

  std::vector<JobId> insert_many(std::span<const NewJob> jobs) {
    auto conn = pool_->acquire();
    return store_->insert_many(*conn, jobs);
  }

  ClientStats stats() const {
    ClientStats s;
    s.claimed = claimed_.load(std::memory_order_relaxed);
    s.completed = completed_.load(std::memory_order_relaxed);
    s.retried = retried_.load(std::memory_order_relaxed);
    s.failed = failed_.load(std::memory_order_relaxed);
    s.snoozed = snoozed_.load(std::memory_order_relaxed);
    s.cancelled = cancelled_.load(std::memory_order_relaxed);
    s.stale_completions = stale_.load(std::memory_order_relaxed);
    {
      std::lock_guard lock(mu_);
      s.running = inflight_total_;
    }
    // The leader outlives stop() (it is only stopped there), so this needs no lifecycle
    // lock; the pointer is published once, in start().
    if (const auto* m = maintenance_view_.load(std::memory_order_acquire)) {
      s.leader = m->leader();
      s.rescued = m->rescued();
      s.promoted = m->promoted();
      s.rotations = m->rotations();
      s.prunes = m->prunes();
    }
    return s;
  }

  const ClientOptions options_;
  std::unique_ptr<pg::Pool> pool_;
  std::unique_ptr<QueueStorage> store_;
  const std::string wake_sql_;
  const std::string token_;  // makes this client's wake channels unique in the cluster

  // Set before start(), read-only afterwards (so readable without a lock by the threads).
  std::unordered_map<std::string, Handler> handlers_;
  std::vector<std::unique_ptr<QueueState>> queues_;
  int cap_ = 0;

  mutable std::mutex lifecycle_mu_;                      // serialises start()/stop()
  Phase phase_ = Phase::kNew;                            // guarded by lifecycle_mu_
  std::unique_ptr<runtime::CompletionBatcher> batcher_;  // set in start(), reset in stop()
  // Created in start(), stopped in stop(), destroyed with the Impl.
  std::unique_ptr<runtime::MaintenanceLeader> maintenance_;
  std::atomic<const runtime::MaintenanceLeader*> maintenance_view_{nullptr};
  std::vector<std::thread> workers_;
  std::thread control_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;         // workers: a task is queued, or stop
  std::condition_variable slot_cv_;         // dispatchers and stop(): a slot freed, or stop
  std::condition_variable control_cv_;      // control thread: stop
  std::deque<std::unique_ptr<Job>> tasks_;  // guarded by mu_
  std::map<std::pair<JobId, std::int64_t>, Job*> running_;  // guarded by mu_
  int inflight_total_ = 0;                                  // guarded by mu_
  bool dispatch_stop_ = false;                              // guarded by mu_
  bool workers_stop_ = false;                               // guarded by mu_
  bool control_stop_ = false;                               // guarded by mu_

  std::atomic<std::uint64_t> claimed_{0};
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> retried_{0};
  std::atomic<std::uint64_t> failed_{0};
  std::atomic<std::uint64_t> snoozed_{0};
  std::atomic<std::uint64_t> cancelled_{0};
  std::atomic<std::uint64_t> stale_{0};
};

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;

void Client::register_worker(const std::string& kind, Handler handler) {
  impl_->register_worker(kind, std::move(handler));
}
void Client::add_queue(QueueConfig config) { impl_->add_queue(std::move(config)); }
void Client::start() { impl_->start(); }
void Client::stop() { impl_->stop(); }

JobId Client::insert(const NewJob& job) { return impl_->insert_many(std::span(&job, 1)).at(0); }
std::vector<JobId> Client::insert_many(std::span<const NewJob> jobs) {
  return impl_->insert_many(jobs);
}

QueueStorage& Client::storage() { return *impl_->store_; }
ClientStats Client::stats() const { return impl_->stats(); }

}  // namespace awa
