// W3C trace context carried through the queue (docs/observability.md, "Trace context").
//
//   // A producer: the context of the request that enqueues, stored with the job.
//   awa::InsertOpts o;
//   o.trace = awa::trace::parse(request.header("traceparent"), request.header("tracestate"));
//   client.insert(awa::NewJob("email", args, o));
//
//   // Or for everything this thread enqueues while the scope lives:
//   awa::trace::Scope scope(awa::trace::parse(traceparent));
//
//   // A handler: the context its job was enqueued with.
//   if (auto t = job.trace_context()) log("trace {}", t->trace_id());
//
// A job keeps its context in its metadata under the W3C header names, "traceparent" and
// "tracestate", so a producer in another language passes it through insert_job_compat's
// metadata (in Python, opentelemetry.propagate.inject(metadata) writes exactly these).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace awa::trace {

// The metadata keys a job's trace context is stored under.
inline constexpr std::string_view kTraceparentKey = "traceparent";
inline constexpr std::string_view kTracestateKey = "tracestate";
// tracestate's limit: W3C allows 32 list members; 512 bytes is what its propagators keep.
inline constexpr std::size_t kMaxTracestateBytes = 512;

// A valid W3C trace context (made by parse(); Scope and an insert check one built by hand).
struct Context {
  // "00-" + 32 lower-case hex digits (trace id) + "-" + 16 (parent span id) + "-" + 2
  // (flags); version 00 of the W3C Trace Context recommendation.
  std::string traceparent;
  // The vendors' list, passed on as given; empty when none.
  std::string tracestate;

  std::string_view trace_id() const { return std::string_view(traceparent).substr(3, 32); }
  std::string_view parent_id() const { return std::string_view(traceparent).substr(36, 16); }
  // The sampled flag (bit 0 of the flags); false for a context that is not valid.
  bool sampled() const;

  friend bool operator==(const Context&, const Context&) = default;
};

// Why `traceparent` (and `tracestate`) do not form a valid context, or "" when they do: a
// version other than 00, upper-case or non-hex digits, a wrong length, an all-zero trace or
// parent id, a tracestate over kMaxTracestateBytes or with control characters.
std::string invalid_reason(std::string_view traceparent, std::string_view tracestate = {});

// The context; throws InvalidArgument with invalid_reason's text when it is not valid.
Context parse(std::string traceparent, std::string tracestate = {});

// The context stored in a job's metadata (kTraceparentKey, kTracestateKey); nullopt when
// there is none, or when it is not valid (as W3C asks of a malformed header: no parent).
std::optional<Context> from_metadata(const nlohmann::json& metadata);

// The calling thread's current context: what an insert on this thread stores when its
// InsertOpts::trace is unset and its metadata names no traceparent. nullptr when none.
// Inside a handler the runtime makes the job's own context current, so the jobs a
// handler enqueues carry its trace on.
const Context* current();

// Makes `context` the thread's current one until destroyed, then restores the previous
// one. Throws InvalidArgument when `context` is not valid. Not movable: a scope ends on
// the thread, and in the order, it began.
class Scope {
 public:
  explicit Scope(Context context);
  // No context: the thread has none while the scope lives.
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  std::optional<Context> context_;
  const Context* previous_;
};

}  // namespace awa::trace
