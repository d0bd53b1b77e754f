// Metrics: counters, gauges and histograms, exposed in the Prometheus text format 0.0.4.
//
//   auto& m = awa::metrics::engine();
//   m.job_enqueued.with({"emails"}).inc();
//   awa::metrics::Server server("127.0.0.1", 9464);  // port 0: an ephemeral port
//   server.start();                          // GET /metrics, GET /healthz, GET /readyz
//   std::printf("metrics on port %d\n", server.port());
//
// A Family is one metric name with fixed label names; with(values) returns the time series
// for one set of label values, created on first use and never destroyed, so a caller may
// keep the reference and skip the lookup next time.
//
// Thread safety: everything here may be used from any thread. Updating a series is one
// atomic operation; looking a series up takes a shared lock (an exclusive one only the
// first time a label set is seen). Exposition reads each value atomically but not all of
// them at one instant: a scrape racing an update may see a histogram's _sum a step ahead
// of its buckets (its _count always equals its +Inf bucket).
//
// Label values are bounded by what the engine feeds them (queue names, shard numbers,
// completion states); user code should not put unbounded values (job ids) in labels.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "awa/connection.hpp"

namespace awa::metrics {

// A monotonically increasing count (one time series).
class Counter {
 public:
  void inc(std::uint64_t n = 1) noexcept;
  std::uint64_t value() const noexcept;

 private:
  std::atomic<std::uint64_t> value_{0};
};

// A value that goes up and down (one time series).
class Gauge {
 public:
  void set(double v) noexcept;
  void inc(double d = 1.0) noexcept;
  void dec(double d = 1.0) noexcept;
  double value() const noexcept;

 private:
  std::atomic<double> value_{0.0};
};

// Observations counted into fixed buckets (one time series). Bucket bounds are upper
// bounds, inclusive, ascending; +Inf is implicit.
class Histogram {
 public:
  // Throws InvalidArgument unless `bounds` ascend strictly.
  explicit Histogram(std::span<const double> bounds);
  ~Histogram();
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void observe(double v) noexcept;

  struct Snapshot {
    std::vector<std::uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0.0;
    std::uint64_t count = 0;  // == cumulative.back()
  };
  Snapshot snapshot() const;
  std::span<const double> bounds() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Latency buckets in seconds, 0.5 ms .. 10 s: the default of Registry::histogram.
inline constexpr double kLatencyBuckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                             0.1,    0.25,  0.5,    1.0,   2.5,  5.0,   10.0};

// One metric name with fixed label names; Metric is Counter, Gauge or Histogram. Created
// and owned by a Registry.
template <class Metric>
class Family {
 public:
  ~Family();
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  // The series for these label values (in label-name order), created on first use and
  // never destroyed: the reference stays valid as long as the registry. Throws
  // InvalidArgument for the wrong number of values.
  Metric& with(std::initializer_list<std::string_view> values);
  Metric& with(std::span<const std::string_view> values);

  const std::string& name() const noexcept;

  // Caps the distinct values the label `label` takes at `max_values`: a value first seen
  // once that many are in use is recorded under `overflow` instead. For a label fed by
  // input from outside the process (a job kind a producer chose), where a series per
  // value — kept for the process's life — would grow memory and every scrape without
  // bound. Values already admitted keep their series. Throws InvalidArgument for a label
  // the family does not have.
  void cap_values(std::string_view label, std::size_t max_values, std::string overflow = "other");

  struct Impl;  // src/metrics/family.hpp

 private:
  friend class Registry;
  explicit Family(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

// A set of families. Registering a name again returns the existing family when type,
// label names (and buckets) match, and throws InvalidArgument otherwise, as it does for a
// name or label name Prometheus would reject ("le" is reserved for histograms' buckets).
struct EngineMetrics;

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Family<Counter>& counter(const std::string& name, const std::string& help,
                           std::vector<std::string> label_names = {});
  Family<Gauge>& gauge(const std::string& name, const std::string& help,
                       std::vector<std::string> label_names = {});
  Family<Histogram>& histogram(
      const std::string& name, const std::string& help, std::vector<std::string> label_names = {},
      std::span<const double> bounds = std::span<const double>(kLatencyBuckets));

  // The text exposition format 0.0.4, families in registration order.
  std::string expose() const;

 private:
  friend EngineMetrics& engine_metrics(Registry& registry);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process-wide registry the engine records into and Server serves by default. Add
// your own families to it to have them served beside the engine's.
Registry& default_registry();

// The engine's metric families in one registry, for reading them in-process. A Client or
// QueueStorage records into the registry its options name (ClientOptions::metrics_registry,
// StorageOptions::metrics), default_registry() when they name none: two clients in one
// process keep separate counters when they are given separate registries.
struct EngineMetrics {
  // awa_job_claimed_total{queue, awa_enqueue_shard}: AWA's ADR-025 awa.job.claimed with its
  // awa.enqueue.shard attribute. Counted by QueueStorage::claim.
  Family<Counter>& job_claimed;
  // awa_job_enqueued_total{queue}: rows written by QueueStorage::insert*, counted when
  // the call returns (in a caller's transaction: even if the caller later rolls back).
  Family<Counter>& job_enqueued;
  // awa_job_completed_total{queue, state}: state is the attempt's end state (completed,
  // retried, failed, dlq, snoozed, cancelled) or "stale". Counted by QueueStorage::complete.
  Family<Counter>& job_completed;
  // awa_claim_duration_seconds{queue}: one claim call, empty claims included.
  Family<Histogram>& claim_duration_seconds;
  // awa_completion_flush_seconds: one QueueStorage::complete call (one batcher flush).
  Family<Histogram>& completion_flush_seconds;
  // awa_queue_available{queue, priority, awa_enqueue_shard} and awa_queue_lag{...}: set
  // by refresh_queue_gauges() and, in a running Client, by the maintenance leader every
  // ClientOptions::queue_gauges_interval (docs/runtime.md, "Metrics").
  Family<Gauge>& queue_available;
  Family<Gauge>& queue_lag;
  // awa_jobs_running{queue}: handlers running in this process.
  Family<Gauge>& jobs_running;
  // awa_job_unknown_kind_total{queue, kind}: claimed jobs this process has no handler
  // for, sent back to the queue (snoozed) for a worker that has one. Producers choose
  // kinds, so only the first kUnknownKindLabels kinds seen get their own series; later
  // ones count under kind="other" (the log line names each kind).
  Family<Counter>& job_unknown_kind;
  // awa_jobs_prefetched{queue}: jobs claimed ahead of a free worker, not started yet;
  // bounded by QueueConfig::max_prefetch.
  Family<Gauge>& jobs_prefetched;
  // awa_job_released_total{queue}: prefetched jobs a stopping client handed back
  // unstarted (QueueStorage::release).
  Family<Counter>& job_released;
  // awa_periodic_fires_total{periodic, outcome}: periodic schedules fired by this process
  // as the maintenance leader; outcome "enqueued" (one per job) or "failed" (the schedule
  // was left due, docs/scheduling.md).
  Family<Counter>& periodic_fires;
  // awa_claims_limited_total{queue, limit}: claims of a queue with a limit (docs/
  // scheduling.md, "Rate limits and concurrency") that came back empty while the queue
  // had available jobs, counted by this process's dispatchers; limit is the queue's limit
  // then: "rate", "concurrency", or "rate+concurrency" when both are set.
  Family<Counter>& claims_limited;
  // awa_completion_flush_server_errors_total{sqlstate}: completion flushes that failed
  // with an error of the server or schema, not of a row (25006 read-only after a
  // fail-over, 57P04, 42725, 42883, 0A000); their rows are kept and retried. Any increase
  // needs an operator.
  Family<Counter>& completion_flush_server_errors;
  // awa_queue_waiting{queue}: jobs waiting for their parents (docs/workflows.md), set with
  // the lane gauges (refresh_queue_gauges, the maintenance leader).
  Family<Gauge>& queue_waiting;
};
// Distinct kinds awa_job_unknown_kind_total labels before it folds them into "other".
inline constexpr std::size_t kUnknownKindLabels = 20;
// The engine's families in `registry`, registered there on the first call for it. Lives as
// long as the registry.
EngineMetrics& engine_metrics(Registry& registry);
// engine_metrics(default_registry()).
EngineMetrics& engine();

// Sets queue_available and queue_lag for every lane of each queue, exact at the time of
// the call (as Admin::queue_shards), and queue_waiting for each queue. Two statements on
// `conn`; their cost grows with the available and waiting rows of the queues (one index
// entry each).
void refresh_queue_gauges(awa::Connection& conn, const std::string& schema,
                          const std::vector<std::string>& queues,
                          Registry& registry = default_registry());

// Where a Server listens, parsed from the text an operator writes (`awa work
// --metrics-addr`). Loopback unless told otherwise: a metrics endpoint shows queue names
// and rates, so it is reachable from other hosts only when the operator names a host.
inline constexpr const char* kDefaultMetricsHost = "127.0.0.1";
struct ListenAddress {
  std::string host;  // as the server binds it: "127.0.0.1", "0.0.0.0", "::1", a name
  int port = 0;      // 0: the kernel picks one
};
// "PORT" or ":PORT" -> 127.0.0.1:PORT; "HOST:PORT" -> HOST:PORT; "[V6]:PORT" -> V6:PORT.
// Throws awa::InvalidArgument for anything else (PORT outside 0..65535, empty host in
// brackets, a missing port).
ListenAddress parse_listen_address(std::string_view text);

// What GET /readyz answers: ready, or not and why (one short sentence per reason).
struct Readiness {
  bool ready = true;
  std::vector<std::string> reasons;
};

// An HTTP endpoint on its own thread: GET /metrics (the registry's exposition), GET
// /healthz ("ok": the process answers) and GET /readyz (set_readiness). Binds only to
// `address`.
class Server {
 public:
  // Port 0 asks the kernel for a free port; port() tells which after start().
  // REQUIRES: `registry` outlives the server.
  explicit Server(std::string address = "127.0.0.1", int port = 0,
                  Registry& registry = default_registry());
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // What GET /readyz asks, on each request (e.g. Client::readiness): 200 with
  // {"ready": true, "reasons": []} when it says ready, 503 with {"ready": false, "reasons":
  // [...]} when not or when it throws. Unset: /readyz answers 200, like /healthz. Before
  // start().
  void set_readiness(std::function<Readiness()> check);

  // Binds and starts serving; returns once requests are accepted. Throws awa::Error when
  // the address cannot be bound. Calling it on a running server does nothing.
  void start();
  // Stops accepting, finishes the request in progress, joins the thread. Idempotent.
  void stop();

  // The bound port while running (the kernel's pick for port 0); 0 when not running.
  int port() const noexcept;
  const std::string& address() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace awa::metrics
