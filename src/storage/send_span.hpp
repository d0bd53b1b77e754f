// The "send {queue}" span of an insert made under a trace context, when tracing is on
// (awa/tracing.hpp). Internal.
//
// While it lives on the thread, a job of the call whose stored context would be the
// producer's stores the send span's context instead (merged_trace), so the job's first
// attempt is a child of the send span, as the OpenTelemetry messaging conventions draw it.
#pragma once

#include <exception>
#include <optional>
#include <span>
#include <vector>

#include "awa/job.hpp"
#include "trace/tracer.hpp"

namespace awa::storage {

class SendSpan {
 public:
  explicit SendSpan(std::span<const NewJob> jobs);
  ~SendSpan();
  SendSpan(const SendSpan&) = delete;
  SendSpan& operator=(const SendSpan&) = delete;

  void inserted(const std::vector<JobId>& ids);
  void inserted(const std::vector<InsertResult>& results);
  void failed(const std::exception& e);

  // What merged_trace stores instead of `producer` while a send span lives on the thread,
  // or nullptr.
  static const trace::Context* replacement(const trace::Context& producer);

 private:
  trace::detail::ActiveSpan span_;
  trace::Context producer_;
  bool single_ = false;
  const SendSpan* previous_ = nullptr;
  bool installed_ = false;
};

// Runs `insert` (returning the ids or the InsertResults of `jobs`) inside a send span.
template <class Insert>
auto traced_insert(std::span<const NewJob> jobs, Insert&& insert) {
  SendSpan span(jobs);
  try {
    auto out = insert();
    span.inserted(out);
    return out;
  } catch (const std::exception& e) {
    span.failed(e);
    throw;
  }
}

}  // namespace awa::storage
