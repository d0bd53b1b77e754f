#include "storage/job_metadata.hpp"

namespace awa::storage {

const trace::Context* merged_trace(const NewJob& job) {
  if (job.opts.trace) return &*job.opts.trace;
  const trace::Context* current = trace::current();
  // A traceparent the producer put in the metadata itself is the job's own: kept.
  if (current && job.opts.metadata.is_object() &&
      job.opts.metadata.contains(trace::kTraceparentKey)) {
    return nullptr;
  }
  return current;
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
