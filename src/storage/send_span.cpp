#include "storage/send_span.hpp"

#include <string>

#include "storage/job_metadata.hpp"

namespace awa::storage {
namespace {

thread_local const SendSpan* t_send = nullptr;

}  // namespace

SendSpan::SendSpan(std::span<const NewJob> jobs) {
  if (jobs.empty()) return;
  auto tracer = trace::detail::active_tracer();
  if (!tracer) return;
  // Untraced producers make no send span; an invalid context is refused by the insert.
  const trace::Context* producer = merged_trace(jobs.front());
  if (!producer || !trace::invalid_reason(producer->traceparent, producer->tracestate).empty()) {
    return;
  }
  producer_ = *producer;
  const std::string& queue = jobs.front().opts.queue;
  bool one_queue = true;
  bool one_kind = true;
  for (const auto& j : jobs) {
    one_queue = one_queue && j.opts.queue == queue;
    one_kind = one_kind && j.kind == jobs.front().kind;
  }
  span_ = trace::detail::ActiveSpan(std::move(tracer), one_queue ? "send " + queue : "send",
                                    trace::detail::Kind::kProducer, &producer_);
  span_.attribute("messaging.system", "awa");
  span_.attribute("messaging.operation.type", "send");
  span_.attribute("messaging.operation.name", "send");
  if (one_queue) span_.attribute("messaging.destination.name", queue);
  if (one_kind) span_.attribute("awa.job.kind", jobs.front().kind);
  single_ = jobs.size() == 1;
  if (!single_) {
    span_.attribute("messaging.batch.message_count", static_cast<std::int64_t>(jobs.size()));
  }
  previous_ = t_send;
  t_send = this;
  installed_ = true;
}

SendSpan::~SendSpan() {
  if (installed_) t_send = previous_;
  span_.end();
}

void SendSpan::inserted(const std::vector<JobId>& ids) {
  if (single_ && ids.size() == 1) {
    span_.attribute("messaging.message.id", std::to_string(ids.front()));
    span_.attribute("awa.job.id", ids.front());
  }
}

void SendSpan::inserted(const std::vector<InsertResult>& results) {
  if (single_ && results.size() == 1) {
    span_.attribute("messaging.message.id", std::to_string(results.front().id));
    span_.attribute("awa.job.id", results.front().id);
    span_.attribute("awa.job.duplicate", results.front().duplicate);
  }
}

void SendSpan::failed(const std::exception& e) { span_.error(e.what()); }

const trace::Context* SendSpan::replacement(const trace::Context& producer) {
  if (!t_send || !(t_send->producer_ == producer)) return nullptr;
  return &t_send->span_.context();
}

}  // namespace awa::storage
