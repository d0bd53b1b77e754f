// OpenTelemetry spans for jobs, exported over OTLP/HTTP with the JSON encoding
// (docs/observability.md, "Tracing").
//
// Off unless configured. A client started with tracing on (ClientOptions::tracing, or the
// standard OTEL_* environment variables when that is unset) records, per the OpenTelemetry
// messaging conventions:
//   send {queue}     around an insert made under a trace context (trace::current() or
//                    InsertOpts::trace): kind PRODUCER, a child of that context; the job
//                    stores this span's context, so its first attempt is a child of it;
//   process {queue}  around each attempt: kind CONSUMER, with the job's id, kind, queue,
//                    attempt, shard and outcome; the first attempt is a child of the
//                    job's stored context, a later attempt starts a trace of its own with
//                    a link to it; a failure sets the status to ERROR with an "exception"
//                    event, a retry adds a "retry" event.
// A handler's own work shows up as child spans of its attempt:
//
//   awa::trace::Span span("charge card");      // a child of the attempt's span
//   span.set_attribute("order.id", order_id);  // jobs enqueued here are its children
//
// Spans are exported in batches by a background thread through a bounded queue; when the
// collector is slow or down, spans are dropped and counted (awa_otel_spans_dropped_total),
// never blocking a handler, an insert or a completion.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "awa/metrics.hpp"
#include "awa/trace.hpp"

namespace awa::trace {

// OTEL_TRACES_SAMPLER's values. A parent-based sampler follows the parent's sampled flag
// and applies the root's rule (always, never, or the ratio) to spans without a parent;
// the ratio compares the trace id with OTEL_TRACES_SAMPLER_ARG, so every process decides
// a trace the same way.
enum class Sampler {
  kAlwaysOn,
  kAlwaysOff,
  kTraceIdRatio,
  kParentBasedAlwaysOn,
  kParentBasedAlwaysOff,
  kParentBasedTraceIdRatio,
};

// Where and how spans are exported. The defaults are the OpenTelemetry SDKs'.
struct ExportOptions {
  // Nothing is recorded or exported when false.
  bool enabled = false;
  // The full URL spans are POSTed to, http:// only (no TLS): OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
  // as given, else OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces". Default (and what a bare
  // OTEL_TRACES_EXPORTER=otlp gives): http://localhost:4318/v1/traces.
  std::string endpoint = "http://localhost:4318/v1/traces";
  // Extra request headers (OTEL_EXPORTER_OTLP_HEADERS / _TRACES_HEADERS: k=v,k2=v2,
  // percent-decoded), e.g. an API key.
  std::map<std::string, std::string> headers;
  // The resource's service.name (OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES's
  // service.name). Default: "unknown_service:awa".
  std::string service_name = "unknown_service:awa";
  // Further resource attributes (OTEL_RESOURCE_ATTRIBUTES: k=v,k2=v2, percent-decoded).
  std::map<std::string, std::string> resource_attributes;
  Sampler sampler = Sampler::kParentBasedAlwaysOn;
  // The ratio of root traces sampled by the ratio samplers, 0..1 (OTEL_TRACES_SAMPLER_ARG).
  double sampler_ratio = 1.0;
  // Spans waiting for export; one more is dropped (OTEL_BSP_MAX_QUEUE_SIZE). Default 2048.
  std::size_t max_queue = 2048;
  // Spans per request (OTEL_BSP_MAX_EXPORT_BATCH_SIZE). Default 512.
  std::size_t max_batch = 512;
  // A partial batch waits at most this long (OTEL_BSP_SCHEDULE_DELAY, ms). Default 5 s.
  std::chrono::milliseconds schedule_delay{5000};
  // One request's time limit, connecting included (OTEL_EXPORTER_OTLP_TIMEOUT /
  // _TRACES_TIMEOUT, ms). Default 10 s.
  std::chrono::milliseconds timeout{10000};

  // The options the standard environment variables give: enabled when
  // OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set or
  // OTEL_TRACES_EXPORTER is "otlp", unless OTEL_SDK_DISABLED is "true" or
  // OTEL_TRACES_EXPORTER is "none". Throws InvalidArgument naming the variable for a value
  // it cannot use: a protocol other than http/json, a URL that is not http://, an
  // unknown sampler, a ratio outside 0..1, a malformed number.
  static ExportOptions from_env();
};

// What an exporter did, since it started.
struct ExportStats {
  std::uint64_t exported = 0;  // spans the collector accepted
  std::uint64_t dropped = 0;   // spans lost: queue full, request failed or refused
  std::uint64_t requests = 0;  // export requests sent
  std::uint64_t failed_requests = 0;
};

// Tracing for a process that enqueues without running a Client (QueueStorage on its own
// connections, `awa enqueue`): while it lives, it is the process's tracing, so inserts
// made under a trace context record their send spans and trace::Span records. Does nothing
// when options.enabled is false. The destructor sends what is queued (within the export
// timeout). Throws InvalidArgument for options it cannot use.
class Tracing {
 public:
  // registry: where awa_otel_spans_dropped_total and _exported_total are counted;
  // default (null): metrics::default_registry().
  explicit Tracing(ExportOptions options, metrics::Registry* registry = nullptr);
  ~Tracing();
  Tracing(const Tracing&) = delete;
  Tracing& operator=(const Tracing&) = delete;

  ExportStats stats() const;
  // Exports the spans recorded so far; false when that took longer than `timeout`.
  bool flush(std::chrono::milliseconds timeout);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A span of the application's own, a child of the thread's current context (inside a
// handler: the attempt's span). While it lives it is the thread's current context, so
// what the thread enqueues, and the spans it starts, are its children. Ends when
// destroyed; exported through the tracing of the client whose handler runs on the thread,
// else through the process's tracing (the last client started with tracing on). Without
// either, or without a current context to be a child of when `root` is false, it records
// nothing and leaves the current context alone. Not movable: a span ends on the thread,
// and in the order, it began.
class Span {
 public:
  // kind: "internal" (the default), "client", "server", "producer" or "consumer".
  explicit Span(std::string name, std::string_view kind = "internal");
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  // Starts a new trace when the thread has no current context (a request's own span);
  // false (the default) records nothing then.
  static Span root(std::string name, std::string_view kind = "server");

  // Whether it records (tracing on, and the trace sampled).
  bool recording() const;
  // Its context (what the jobs enqueued under it store as their parent), or nullopt when
  // it does not record and there was no current context.
  std::optional<Context> context() const;

  void set_attribute(std::string key, std::string value);
  void set_attribute(std::string key, const char* value);
  void set_attribute(std::string key, std::int64_t value);
  void set_attribute(std::string key, int value) {
    set_attribute(std::move(key), std::int64_t{value});
  }
  void set_attribute(std::string key, double value);
  void set_attribute(std::string key, bool value);
  void add_event(std::string name);
  // Status ERROR with `message`, and an "exception" event carrying it.
  void set_error(std::string message);

  struct Impl;

 private:
  Span(std::string name, std::string_view kind, bool root);
  std::unique_ptr<Impl> impl_;
};

}  // namespace awa::trace
