// awa::Client: configuration, lifecycle (start, graceful stop) and statistics.
#include "runtime/client_impl.hpp"

#include <algorithm>
#include <random>

#include <spdlog/spdlog.h>

#include "awa/error.hpp"
#include "schema/migrator.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/periodic.hpp"
#include "storage/store_access.hpp"
#include "storage/validate.hpp"

namespace awa {
namespace {

// stop() gives up on a wake notification after this long (the thread then notices at
// its next poll).
constexpr std::chrono::milliseconds kWakeAcquireTimeout{1000};
// A completion flush that failed this recently makes the client unready (readiness()).
constexpr std::chrono::seconds kReadinessFailureWindow{30};
// A claimer with room for work that has not claimed for two poll intervals and this long
// is late (readiness()): stuck, or its wake-ups lost.
constexpr std::chrono::seconds kReadinessClaimGrace{5};

StorageOptions storage_options(const ClientOptions& o) {
  StorageOptions s;
  s.schema = o.schema;
  s.metrics = o.metrics_registry;
  return s;
}

std::string random_token() {
  std::random_device rd;
  const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{:016x}", v);
}

}  // namespace

Client::Impl::Impl(ClientOptions o)
    : options_(std::move(o)),
      pool_(std::make_unique<pg::Pool>(connect_options(), options_.pool_size)),
      completion_pool_(std::make_unique<pg::Pool>(
          connect_options(), static_cast<std::size_t>(std::max(1, options_.completion_writers)))),
      store_(std::make_unique<QueueStorage>(storage_options(options_))),
      wake_sql_(sql::file("queries/runtime/wake.sql")),
      token_(random_token()) {
  sql::quote_schema(options_.schema);  // InvalidArgument for a bad name, before start()
  tracer_ = trace::detail::make_tracer(
      options_.tracing ? *options_.tracing : trace::ExportOptions::from_env(),
      options_.metrics_registry ? *options_.metrics_registry : metrics::default_registry());
  if (options_.pool_size < 1) throw InvalidArgument("ClientOptions: pool_size must be >= 1");
  if (options_.max_workers < 0) throw InvalidArgument("ClientOptions: max_workers must be >= 0");
  if (options_.completion_writers < 1)
    throw InvalidArgument("ClientOptions: completion_writers must be >= 1");
  if (options_.heartbeat_interval.count() <= 0 || options_.stale_after.count() <= 0 ||
      options_.maintenance_interval.count() <= 0 || options_.shutdown_timeout.count() < 0 ||
      options_.ring_rotate_interval.count() < 0 || options_.failed_retention.count() < 0 ||
      options_.queue_gauges_interval.count() < 0) {
    throw InvalidArgument(
        "ClientOptions: heartbeat_interval, stale_after and maintenance_interval must be "
        "positive; shutdown_timeout, ring_rotate_interval, failed_retention and "
        "queue_gauges_interval not negative");
  }
}

void Client::Impl::register_worker(const std::string& kind, Handler handler) {
  std::lock_guard life(lifecycle_mu_);
  if (phase_ != Phase::kNew) throw InvalidArgument("register_worker: call it before start()");
  if (kind.empty()) throw InvalidArgument("register_worker: empty kind");
  if (!handler) throw InvalidArgument("register_worker: empty handler for kind " + kind);
  handlers_[kind] = std::move(handler);
}

void Client::Impl::add_queue(QueueConfig config) {
  std::lock_guard life(lifecycle_mu_);
  if (phase_ != Phase::kNew) throw InvalidArgument("add_queue: call it before start()");
  storage::validate_queue_name(config.name);
  if (config.max_workers < 1) throw InvalidArgument("add_queue: max_workers must be >= 1");
  if (config.claim_batch < 1) throw InvalidArgument("add_queue: claim_batch must be >= 1");
  if (config.max_prefetch < 0) throw InvalidArgument("add_queue: max_prefetch must be >= 0");
  if (config.claimers < 1 || config.claimers > 8)
    throw InvalidArgument("add_queue: claimers must be 1..8");
  if (config.poll_interval.count() <= 0)
    throw InvalidArgument("add_queue: poll_interval must be positive");
  for (const auto& q : queues_) {
    if (q->config.name == config.name)
      throw InvalidArgument("add_queue: queue " + config.name + " added twice");
  }
  auto q = std::make_unique<QueueState>();
  q->channel = notify_channel(config.name);
  auto& m = storage::engine_metrics(*store_);
  q->running_gauge = &m.jobs_running.with({config.name});
  q->prefetched_gauge = &m.jobs_prefetched.with({config.name});
  q->config = std::move(config);
  queues_.push_back(std::move(q));
}

void Client::Impl::add_periodic(PeriodicJob job) {
  std::lock_guard life(lifecycle_mu_);
  if (phase_ != Phase::kNew) throw InvalidArgument("add_periodic: call it before start()");
  validate_periodic(job);
  for (const auto& p : periodic_) {
    if (p.name == job.name)
      throw InvalidArgument("add_periodic: periodic job " + job.name + " added twice");
  }
  periodic_.push_back(std::move(job));
}

void Client::Impl::start() {
  std::lock_guard life(lifecycle_mu_);
  if (phase_ == Phase::kRunning) return;
  if (phase_ == Phase::kStopped)
    throw InvalidArgument("awa::Client cannot be restarted after stop(); create a new one");
  if (options_.migrate) {
    auto conn = pool_->acquire();
    const auto report = schema::Migrator(options_.schema).migrate(*conn);
    if (!report.applied.empty() || !report.functions_updated.empty()) {
      spdlog::info("schema {} migrated to version {} ({} migrations, {} functions)", report.schema,
                   report.version, report.applied.size(), report.functions_updated.size());
    }
  } else {
    // Without migrating, a schema this build cannot run against is refused now, with what
    // to run, rather than failing call by call once the threads are up.
    auto conn = pool_->acquire();
    schema::Migrator(options_.schema).check_compatible(*conn);
  }
  if (!periodic_.empty()) {
    // Before any thread starts: a bad zone fails start() like a bad option would.
    auto conn = pool_->acquire();
    const auto upserted = storage::declare_periodic(*conn, options_.schema, periodic_);
    int created = 0;
    for (const auto& u : upserted) created += u.created ? 1 : 0;
    spdlog::info("periodic jobs declared: {} ({} new)", upserted.size(), created);
  }
  // Before the claimers start: its log line says how they will be woken.
  if (pooled()) notify_self_test();
  int sum = 0;
  for (const auto& q : queues_) sum += q->config.max_workers;
  cap_ = options_.max_workers > 0 ? options_.max_workers : sum;
  if (options_.heartbeat_interval >= options_.stale_after) {
    spdlog::warn(
        "heartbeat_interval ({} ms) >= stale_after ({} ms): running attempts may be rescued",
        options_.heartbeat_interval.count(), options_.stale_after.count());
  }

  {
    std::vector<std::string> names;
    for (const auto& q : queues_) names.push_back(q->config.name);
    instance_ = std::make_unique<runtime::InstanceRegistry>(options_.schema, names);
  }
  // Registered before any thread starts, so `awa health` sees the worker as soon as
  // start() returns; the control thread retries if this fails.
  beat_instance();

  runtime::CompletionBatcherOptions bo;
  bo.max_batch = options_.completion_batch;
  bo.flush_interval = options_.completion_flush;
  bo.writers = options_.completion_writers;
  batcher_ = std::make_unique<runtime::CompletionBatcher>(
      *completion_pool_, *store_, bo,
      [this](const Completion& c, const CompletionResult& r) { count_result(c, r); });
  try {
    for (int i = 0; i < cap_; ++i) workers_.emplace_back([this] { work(); });
    control_ = std::thread([this] { control(); });
    // Pooled without a direct URL nothing can LISTEN: the claimers poll.
    if (listens()) listener_ = std::thread([this] { listen_loop(); });
    for (auto& q : queues_) {
      QueueState* qs = q.get();
      {
        std::lock_guard lock(mu_);
        qs->last_claim = std::chrono::steady_clock::now();
      }
      qs->threads.emplace_back([this, qs] { dispatch(*qs); });
      for (int i = 1; i < qs->config.claimers; ++i)
        qs->threads.emplace_back([this, qs] { help_dispatch(*qs); });
    }
    if (options_.maintenance) {
      runtime::MaintenanceOptions mo;
      // The session advisory lock needs a session: the direct URL when pooled. Pooled
      // without one, the leader is elected by a lease row and works through the pool.
      mo.connect = session_connect_options();
      mo.lease_holder = pooled() && options_.direct_database_url.empty() ? instance_->id() : "";
      mo.schema = options_.schema;
      mo.interval = options_.maintenance_interval;
      mo.stale_after = options_.stale_after;
      mo.dlq_retention = options_.dlq_retention;
      mo.rotate_interval = options_.ring_rotate_interval;
      mo.failed_retention = options_.failed_retention;
      mo.instance = instance_.get();
      mo.gauges_interval = options_.queue_gauges_interval;
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
  if (tracer_) {
    trace::detail::install(tracer_);
    spdlog::info("tracing: spans exported to {} (OTLP/HTTP JSON)", tracer_->options().endpoint);
  }
  std::string names;
  for (const auto& q : queues_)
    names +=
        fmt::format("{}{}:{}", names.empty() ? "" : ",", q->config.name, q->config.max_workers);
  spdlog::info("awa client started: schema {}, queues [{}], {} worker threads", options_.schema,
               names, cap_);
}

void Client::Impl::stop() {
  std::lock_guard life(lifecycle_mu_);
  if (phase_ != Phase::kRunning) return;
  shutdown();
}

void Client::Impl::shutdown() {
  spdlog::info("awa client stopping: no new claims");
  // 1. No new claims.
  {
    std::lock_guard lock(mu_);
    dispatch_stop_ = true;
  }
  slot_cv_.notify_all();
  for (auto& q : queues_) {
    for (auto& t : q->threads) t.join();
  }
  // 2. Prefetched jobs go back to the queue at once, for any worker to claim.
  release_prefetched();
  // 3. Running handlers get shutdown_timeout to finish; then their stop tokens fire
  //    and they get as long again. A handler that ignores its token is waited for
  //    without bound: its Job and this Impl must outlive it, and detaching would leave it
  //    running against freed state. Its attempt stays open either way, so if the process
  //    is killed instead, rescue retries the job.
  {
    std::unique_lock lock(mu_);
    const auto idle = [&] { return running_total_ == 0; };
    if (!slot_cv_.wait_for(lock, options_.shutdown_timeout, idle)) {
      spdlog::warn("shutdown: {} handlers still running after {} ms; requesting them to stop",
                   running_total_, options_.shutdown_timeout.count());
      for (auto& [key, job] : running_) job->request_stop();
      if (!slot_cv_.wait_for(lock, options_.shutdown_timeout, idle)) {
        std::string ids;
        for (const auto& [key, job] : running_) ids += fmt::format(" {}", key.first);
        spdlog::error("shutdown: {} handlers ignore their stop tokens; waiting for them (jobs:{})",
                      running_total_, ids);
        slot_cv_.wait(lock, idle);
      }
    }
    workers_stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  // 4. Everything the handlers reported reaches the database.
  if (batcher_) {
    batcher_->flush();
    batcher_.reset();
  }
  // 5. Heartbeats and cancel listening end with the last handler.
  {
    std::lock_guard lock(mu_);
    control_stop_ = true;
    listener_stop_ = true;
  }
  control_cv_.notify_all();
  if (listener_.joinable()) {
    wake(listener_wake_channel());
    listener_.join();
  }
  if (control_.joinable()) control_.join();
  // 6. Leadership goes last, so promotion and rescue keep running while we drain.
  if (maintenance_) maintenance_->stop();
  // 7. Nothing writes the instance's row any more: remove it.
  remove_instance();
  // 8. The last spans go out, as far as the collector takes them within its timeout.
  if (tracer_) {
    trace::detail::uninstall(tracer_.get());
    if (!tracer_->flush(tracer_->options().timeout)) {
      spdlog::warn("tracing: spans still queued after {} ms; dropped at exit",
                   tracer_->options().timeout.count());
    }
  }
  phase_ = Phase::kStopped;
  const auto s = stats();
  spdlog::info(
      "awa client stopped: claimed {}, completed {}, retried {}, failed {}, snoozed {}, "
      "cancelled {}, stale {}, handed back {}",
      s.claimed, s.completed, s.retried, s.failed, s.snoozed, s.cancelled, s.stale_completions,
      s.released);
}

void Client::Impl::remove_instance() {
  if (!instance_) return;
  try {
    auto conn = pool_->acquire(kWakeAcquireTimeout);
    instance_->remove(*conn);
  } catch (const std::exception& e) {
    // The row ages out: health stops listing it after its `recent` window, and the
    // leader deletes it after instance_retention.
    spdlog::warn("runtime_instances: cannot remove instance {}: {}", instance_->id(), e.what());
  }
}

void Client::Impl::wake(const std::string& channel) {
  try {
    auto conn = pool_->acquire(kWakeAcquireTimeout);
    conn->exec(wake_sql_, pg::make_params(channel));
  } catch (const std::exception& e) {
    spdlog::debug("wake {}: {}", channel, e.what());
  }
}

std::vector<JobId> Client::Impl::insert_many(std::span<const NewJob> jobs) {
  auto conn = pool_->acquire();
  return storage::insert_many(*store_, *conn, jobs);
}

metrics::Readiness Client::Impl::readiness() const {
  metrics::Readiness r;
  const auto no = [&r](std::string why) {
    r.ready = false;
    r.reasons.push_back(std::move(why));
  };
  std::optional<runtime::CompletionBatcher::Stats> batcher;
  bool running = false;
  {
    // Not waited for: stop() holds it while handlers finish.
    std::unique_lock lock(lifecycle_mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      no("the client is starting or stopping");
    } else if (phase_ != Phase::kRunning) {
      no(phase_ == Phase::kNew ? "the client has not started" : "the client has stopped");
    } else {
      running = true;
      if (batcher_) batcher = batcher_->stats();
    }
  }
  {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mu_);
    if (dispatch_stop_) no("the dispatchers are stopped: no new claims");
    for (const auto& q : queues_) {
      if (dispatch_stop_ || !running) break;
      if (q->claim_error) {
        no(fmt::format("queue {}: its claims fail: {}", q->config.name, *q->claim_error));
      } else if (now - q->last_claim > 2 * q->config.poll_interval + kReadinessClaimGrace) {
        const auto late =
            std::chrono::duration_cast<std::chrono::seconds>(now - q->last_claim).count();
        // With room for work a claimer claims at least once per poll interval. A claim
        // that does not return (blocked on a lock, a server that stopped answering)
        // reserves the room it claims for, so it is told apart by what is in flight.
        if (claim_want(*q) > 0) {
          no(fmt::format("queue {}: no claim for {} s while it has room for work", q->config.name,
                         late));
        } else if (q->claiming > 0) {
          no(fmt::format("queue {}: a claim has not returned for {} s", q->config.name, late));
        }
      }
    }
  }
  try {
    auto conn = pool_->acquire(std::chrono::seconds(2));
    conn->exec(sql::file("queries/runtime/ping.sql"));
  } catch (const std::exception& e) {
    no(fmt::format("the database does not answer: {}", e.what()));
  }
  if (running && listens() && !listening_.load()) {
    no("the listener is not connected (LISTEN): new jobs are found by polling only");
  }
  if (batcher && batcher->last_failure &&
      std::chrono::steady_clock::now() - *batcher->last_failure < kReadinessFailureWindow) {
    no(fmt::format("a completion flush failed {} s ago",
                   std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::steady_clock::now() - *batcher->last_failure)
                       .count()));
  }
  return r;
}

metrics::Readiness Client::readiness() const { return impl_->readiness(); }

ClientStats Client::Impl::stats() const {
  ClientStats s;
  s.claimed = claimed_.load(std::memory_order_relaxed);
  s.completed = completed_.load(std::memory_order_relaxed);
  s.retried = retried_.load(std::memory_order_relaxed);
  s.failed = failed_.load(std::memory_order_relaxed);
  s.snoozed = snoozed_.load(std::memory_order_relaxed);
  s.cancelled = cancelled_.load(std::memory_order_relaxed);
  s.stale_completions = stale_.load(std::memory_order_relaxed);
  s.released = released_.load(std::memory_order_relaxed);
  s.waiting = waiting_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    s.running = running_total_;
    for (const auto& q : queues_) s.prefetched += static_cast<int>(q->ready.size());
  }
  // The leader outlives stop() (it is only stopped there), so this needs no lifecycle
  // lock; the pointer is published once, in start().
  if (const auto* m = maintenance_view_.load(std::memory_order_acquire)) {
    s.leader = m->leader();
    s.rescued = m->rescued();
    s.promoted = m->promoted();
    s.rotations = m->rotations();
    s.prunes = m->prunes();
    s.periodic_fired = m->periodic_fired();
    s.periodic_failed = m->periodic_failed();
  }
  return s;
}

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;

void Client::register_worker(const std::string& kind, Handler handler) {
  impl_->register_worker(kind, std::move(handler));
}
void Client::add_queue(QueueConfig config) { impl_->add_queue(std::move(config)); }
void Client::add_periodic(PeriodicJob job) { impl_->add_periodic(std::move(job)); }
void Client::add_periodic(std::string name, std::string schedule, std::string kind,
                          nlohmann::json args, PeriodicOptions options) {
  impl_->add_periodic(PeriodicJob{std::move(name), std::move(schedule), std::move(kind),
                                  std::move(args), std::move(options)});
}
void Client::start() { impl_->start(); }
void Client::stop() { impl_->stop(); }

JobId Client::insert(const NewJob& job) { return impl_->insert_many(std::span(&job, 1)).at(0); }
InsertResult Client::insert_result(const NewJob& job) {
  auto conn = impl_->pool_->acquire();
  return storage::insert_results(*impl_->store_, *conn, std::span(&job, 1)).at(0);
}
std::vector<JobId> Client::insert_many(std::span<const NewJob> jobs) {
  return impl_->insert_many(jobs);
}

QueueStorage& Client::storage() { return *impl_->store_; }
trace::ExportStats Client::tracing_stats() const {
  return impl_->tracer_ ? impl_->tracer_->stats() : trace::ExportStats{};
}
bool Client::flush_traces(std::chrono::milliseconds timeout) {
  return !impl_->tracer_ || impl_->tracer_->flush(timeout);
}
ClientStats Client::stats() const { return impl_->stats(); }

}  // namespace awa
