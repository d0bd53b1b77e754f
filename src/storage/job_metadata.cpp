#include "storage/job_metadata.hpp"

#include "storage/send_span.hpp"

namespace awa::storage {
namespace {

const trace::Context* producer_trace(const NewJob& job) {
  if (job.opts.trace) return &*job.opts.trace;
  const trace::Context* current = trace::current();
  // A traceparent the producer put in the metadata itself is the job's own: kept.
  if (current && job.opts.metadata.is_object() &&
      job.opts.metadata.contains(trace::kTraceparentKey)) {
    return nullptr;
  }
  return current;
}

}  // namespace

const trace::Context* merged_trace(const NewJob& job) {
  const trace::Context* producer = producer_trace(job);
  // Inside an insert's send span the job is that span's child.
  if (producer) {
    if (const auto* send = SendSpan::replacement(*producer)) return send;
  }
  return producer;
}

std::optional<std::string> metadata_text(const NewJob& job) {
  const trace::Context* t = merged_trace(job);
  if (!t) {
    if (job.opts.metadata.is_null()) return std::nullopt;
    return job.opts.metadata.dump();
  }
  nlohmann::json m = job.opts.metadata.is_object() ? job.opts.metadata : nlohmann::json::object();
  m[trace::kTraceparentKey] = t->traceparent;
  if (t->tracestate.empty()) {
    m.erase(trace::kTracestateKey);
  } else {
    m[trace::kTracestateKey] = t->tracestate;
  }
  return m.dump();
}

}  // namespace awa::storage
