// Span ids, the sampler, the process's and the thread's tracer, and ActiveSpan.
#include <atomic>
#include <cmath>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "trace/tracer.hpp"

namespace awa::trace::detail {
namespace {

// Ids need to be unique, not secret: a per-thread generator seeded once from the OS.
std::uint64_t random_u64() {
  thread_local std::mt19937_64 gen{[] {
    std::random_device rd;
    return (std::uint64_t{rd()} << 32) ^ rd();
  }()};
  std::uint64_t v = 0;
  while (v == 0) v = gen();  // an all-zero id is invalid
  return v;
}

std::string new_trace_id() { return fmt::format("{:016x}{:016x}", random_u64(), random_u64()); }
std::string new_span_id() { return fmt::format("{:016x}", random_u64()); }

// The trace-id ratio rule: the trace id's last 8 bytes, against ratio * 2^63 after a
// shift, so every process that sees a trace id decides it the same way.
bool ratio_samples(std::string_view trace_id, double ratio) {
  if (ratio >= 1.0) return true;
  if (ratio <= 0.0) return false;
  std::uint64_t low = 0;
  for (const char c : trace_id.substr(16, 16)) {
    low = (low << 4) | static_cast<std::uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  const auto bound = static_cast<std::uint64_t>(std::ldexp(ratio, 63));
  return (low >> 1) < bound;
}

bool decide(Sampler sampler, double ratio, const Context* parent, std::string_view trace_id) {
  switch (sampler) {
    case Sampler::kAlwaysOn:
      return true;
    case Sampler::kAlwaysOff:
      return false;
    case Sampler::kTraceIdRatio:
      return ratio_samples(trace_id, ratio);
    case Sampler::kParentBasedAlwaysOn:
      return parent ? parent->sampled() : true;
    case Sampler::kParentBasedAlwaysOff:
      return parent ? parent->sampled() : false;
    case Sampler::kParentBasedTraceIdRatio:
      return parent ? parent->sampled() : ratio_samples(trace_id, ratio);
  }
  return false;
}

std::mutex g_process_mu;
std::shared_ptr<Tracer> g_process;
// Read without the lock first: with tracing off (the common case) an insert pays one
// relaxed load, not a mutex.
std::atomic<bool> g_any{false};
thread_local std::shared_ptr<Tracer> t_tracer;

}  // namespace

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

Context Tracer::Start::context() const {
  return Context{fmt::format("00-{}-{}-{}", trace_id, span_id, sampled ? "01" : "00"), trace_state};
}

Tracer::Start Tracer::start(const Context* parent) const {
  Start s;
  if (parent) {
    s.trace_id = std::string(parent->trace_id());
    s.parent_span_id = std::string(parent->parent_id());
    s.trace_state = parent->tracestate;
  } else {
    s.trace_id = new_trace_id();
  }
  s.span_id = new_span_id();
  s.sampled = decide(options_.sampler, options_.sampler_ratio, parent, s.trace_id);
  return s;
}

std::shared_ptr<Tracer> process_tracer() {
  if (!g_any.load(std::memory_order_relaxed)) return nullptr;
  std::lock_guard lock(g_process_mu);
  return g_process;
}

void install(std::shared_ptr<Tracer> tracer) {
  std::lock_guard lock(g_process_mu);
  g_process = std::move(tracer);
  g_any.store(g_process != nullptr, std::memory_order_relaxed);
}

void uninstall(const Tracer* tracer) {
  std::lock_guard lock(g_process_mu);
  if (g_process.get() != tracer) return;  // a later client's tracing stays
  g_process.reset();
  g_any.store(false, std::memory_order_relaxed);
}

std::shared_ptr<Tracer> active_tracer() { return t_tracer ? t_tracer : process_tracer(); }

ThreadTracer::ThreadTracer(std::shared_ptr<Tracer> tracer) : previous_(std::move(t_tracer)) {
  t_tracer = std::move(tracer);
}

ThreadTracer::~ThreadTracer() { t_tracer = std::move(previous_); }

ActiveSpan::ActiveSpan(std::shared_ptr<Tracer> tracer, std::string name, Kind kind,
                       const Context* parent)
    : tracer_(std::move(tracer)) {
  if (!tracer_) return;
  const auto s = tracer_->start(parent);
  sampled_ = s.sampled;
  context_ = s.context();
  if (!sampled_) return;
  data_.trace_id = s.trace_id;
  data_.span_id = s.span_id;
  data_.parent_span_id = s.parent_span_id;
  data_.trace_state = s.trace_state;
  data_.name = std::move(name);
  data_.kind = kind;
  data_.start_ns = now_ns();
}

ActiveSpan::~ActiveSpan() { end(); }

void ActiveSpan::set(std::string key, Value value) {
  if (!recording()) return;
  for (auto& a : data_.attributes) {
    if (a.key == key) {
      a.value = std::move(value);
      return;
    }
  }
  data_.attributes.push_back(Attribute{std::move(key), std::move(value)});
}

void ActiveSpan::event(std::string name, std::vector<Attribute> attributes) {
  if (!recording()) return;
  data_.events.push_back(Event{std::move(name), now_ns(), std::move(attributes)});
}

void ActiveSpan::error(const std::string& message) {
  if (!recording()) return;
  data_.status_code = 2;
  data_.status_message = message;
  event("exception", {Attribute{"exception.message", Value(message)}});
}

void ActiveSpan::link(const Context& to) {
  if (!recording()) return;
  data_.links.push_back(
      Link{std::string(to.trace_id()), std::string(to.parent_id()), to.tracestate});
}

void ActiveSpan::end() {
  if (ended_ || !tracer_) return;
  ended_ = true;
  if (!sampled_) return;
  data_.end_ns = now_ns();
  tracer_->submit(std::move(data_));
}

}  // namespace awa::trace::detail
