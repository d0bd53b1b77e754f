// The span recorder and OTLP/HTTP JSON exporter behind awa/tracing.hpp. Internal.
//
// One Tracer per client started with tracing on (and per trace::Tracing). Spans are recorded into
// SpanData on the thread that makes them and handed to the tracer's bounded queue; one background
// thread sends them in batches. Nothing a handler, an insert or a completion does ever waits for
// the collector: a full queue drops the span and counts it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "awa/metrics.hpp"
#include "awa/trace.hpp"
#include "awa/tracing.hpp"

namespace awa::trace::detail {

// OTLP's span kinds (opentelemetry.proto.trace.v1.Span.SpanKind).
enum class Kind { kInternal = 1, kServer = 2, kClient = 3, kProducer = 4, kConsumer = 5 };

// An attribute's value: OTLP's string, int, double and bool values.
using Value = std::variant<std::string, std::int64_t, double, bool>;

struct Attribute {
  std::string key;
  Value value;
};

struct Event {
  std::string name;
  std::uint64_t time_ns = 0;
  std::vector<Attribute> attributes;
};

struct Link {
  std::string trace_id;
  std::string span_id;
  std::string trace_state;
};

struct SpanData {
  std::string trace_id;        // 32 hex digits
  std::string span_id;         // 16 hex digits
  std::string parent_span_id;  // empty for a root
  std::string trace_state;
  std::string name;
  Kind kind = Kind::kInternal;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::vector<Attribute> attributes;
  std::vector<Event> events;
  std::vector<Link> links;
  int status_code = 0;  // 0 unset, 2 error
  std::string status_message;
};

std::uint64_t now_ns();

class Tracer {
 public:
  Tracer(ExportOptions options, metrics::Registry& registry);
  // Sends what is queued (within options.timeout), then stops the thread.
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Ids and the sampling decision for a new span: a child of `parent`, or a root of a new
  // trace when it is null.
  struct Start {
    std::string trace_id;
    std::string span_id;
    std::string parent_span_id;
    std::string trace_state;
    bool sampled = false;
    Context context() const;
  };
  Start start(const Context* parent) const;

  // Queues a finished span for export; drops (and counts) it when the queue is full.
  void submit(SpanData span);
  // Exports everything queued before the call; false when it could not within `timeout`.
  bool flush(std::chrono::milliseconds timeout);
  ExportStats stats() const;
  const ExportOptions& options() const { return options_; }

  // The OTLP JSON request body for `spans` (ExportTraceServiceRequest). Written by hand
  // rather than through nlohmann::json objects: a tree of maps per span made the export
  // thread cost more than the job it traced (docs/benchmarks.md, "e2e --mode tracing").
  std::string encode(const std::vector<SpanData>& spans) const;

 private:
  void run();
  // Sends one batch; true when the collector accepted it.
  bool send(const std::vector<SpanData>& batch);
  void count_dropped(std::uint64_t n);

  const ExportOptions options_;
  std::string host_;
  int port_ = 0;
  std::string path_;
  std::string resource_json_;  // the encoded "resource" object, the same in every request
  metrics::Counter& dropped_metric_;
  metrics::Counter& exported_metric_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the sender
  std::condition_variable idle_cv_;  // wakes flush()
  std::deque<SpanData> queue_;
  std::uint64_t submitted_ = 0;  // spans ever queued
  std::uint64_t settled_ = 0;    // spans sent or dropped after being queued
  std::uint64_t flush_wanted_ = 0;
  bool stop_ = false;
  ExportStats stats_;
  // The sender's warnings about a failing collector: one a minute, with the count since.
  std::chrono::steady_clock::time_point last_warning_{};
  std::uint64_t unreported_failures_ = 0;
  std::thread thread_;
};

// The tracer `options` ask for, or null when they leave tracing off. The exporter's
// counters (awa_otel_spans_dropped_total, _exported_total) are registered in `registry`
// either way, so dashboards and alerts find them with tracing off. Throws InvalidArgument
// for options it cannot use (sizes, times, the ratio, the endpoint).
std::shared_ptr<Tracer> make_tracer(ExportOptions options, metrics::Registry& registry);

// The tracer the process's spans go to when the thread has none: the last client started
// with tracing on. install() and uninstall() are the client's start() and stop().
std::shared_ptr<Tracer> process_tracer();
void install(std::shared_ptr<Tracer> tracer);
void uninstall(const Tracer* tracer);

// The tracer of the client whose handler runs on this thread (set for the handler's run),
// else the process's. Null when tracing is off.
std::shared_ptr<Tracer> active_tracer();
class ThreadTracer {
 public:
  explicit ThreadTracer(std::shared_ptr<Tracer> tracer);
  ~ThreadTracer();
  ThreadTracer(const ThreadTracer&) = delete;
  ThreadTracer& operator=(const ThreadTracer&) = delete;

 private:
  std::shared_ptr<Tracer> previous_;
};

// A span being recorded: what the runtime's send and process spans and awa::trace::Span
// share. Not recording when the tracer is null or the trace is not sampled; its context
// is still propagated then (flags 00), so downstream processes make the same decision.
class ActiveSpan {
 public:
  ActiveSpan() = default;
  ActiveSpan(std::shared_ptr<Tracer> tracer, std::string name, Kind kind, const Context* parent);
  ActiveSpan(ActiveSpan&&) = default;
  ActiveSpan& operator=(ActiveSpan&&) = default;
  // Ends it if end() was not called.
  ~ActiveSpan();

  bool started() const { return tracer_ != nullptr; }
  bool recording() const { return tracer_ && sampled_; }
  const Context& context() const { return context_; }
  SpanData& data() { return data_; }
  void attribute(std::string key, std::string value) {
    set(std::move(key), Value(std::move(value)));
  }
  void attribute(std::string key, const char* value) {
    set(std::move(key), Value(std::string(value)));
  }
  void attribute(std::string key, std::int64_t value) { set(std::move(key), Value(value)); }
  void attribute(std::string key, int value) { set(std::move(key), Value(std::int64_t{value})); }
  void attribute(std::string key, double value) { set(std::move(key), Value(value)); }
  void attribute(std::string key, bool value) { set(std::move(key), Value(value)); }
  void event(std::string name, std::vector<Attribute> attributes = {});
  void error(const std::string& message);
  void link(const Context& to);
  void end();

 private:
  void set(std::string key, Value value);

  std::shared_ptr<Tracer> tracer_;
  bool sampled_ = false;
  bool ended_ = false;
  Context context_;
  SpanData data_;
};

}  // namespace awa::trace::detail
