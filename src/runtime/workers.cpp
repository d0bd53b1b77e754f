// The worker threads: run handlers and hand their results to the completion batcher.
#include "runtime/client_impl.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "awa/trace.hpp"
#include "storage/job_metadata.hpp"
#include "storage/store_access.hpp"
#include "trace/tracer.hpp"

namespace awa {
namespace {

using std::chrono::milliseconds;

// A job of a kind this process has no handler for goes back to the queue (snoozed: the
// attempt is not consumed) for a worker that has one — during a rolling deploy an old
// worker must not kill every job of a new kind. The delay grows with the job's age, so a
// job nobody can run costs little while one caught by a deploy is retried promptly.
constexpr milliseconds kUnknownKindMinDelay{1000};
constexpr milliseconds kUnknownKindMaxDelay{60000};

milliseconds unknown_kind_delay(const ClaimedEntry& e) {
  const auto age =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now() - e.created_at);
  return std::clamp(age / 10, kUnknownKindMinDelay, kUnknownKindMaxDelay);
}

const char* outcome_name(const ClaimedEntry& e, Outcome o) {
  switch (o) {
    case Outcome::kCompleted:
      return "completed";
    case Outcome::kRetry:
      return e.attempt < e.max_attempts ? "retried" : "failed";
    case Outcome::kFail:
      return "failed";
    case Outcome::kSnooze:
      return "snoozed";
    case Outcome::kCancel:
      return "cancelled";
    case Outcome::kWaitForCallback:
      return "waiting_callback";
  }
  return "unknown";
}

}  // namespace

trace::detail::ActiveSpan Client::Impl::process_span(const Job& job,
                                                     const std::optional<trace::Context>& stored) {
  if (!tracer_) return {};
  const auto& e = job.entry();
  // The first attempt continues the producer's trace; a later one starts its own, linked
  // to it (the OpenTelemetry messaging conventions' choice for a message processed more
  // than once: one trace per attempt, not one ever-growing trace).
  const bool child = stored && e.attempt <= 1;
  trace::detail::ActiveSpan span(tracer_, "process " + e.queue, trace::detail::Kind::kConsumer,
                                 child ? &*stored : nullptr);
  if (stored && !child) span.link(*stored);
  span.attribute("messaging.system", "awa");
  span.attribute("messaging.operation.type", "process");
  span.attribute("messaging.operation.name", "process");
  span.attribute("messaging.destination.name", e.queue);
  span.attribute("messaging.destination.partition.id", std::to_string(e.enqueue_shard));
  span.attribute("messaging.message.id", std::to_string(e.job_id));
  span.attribute("awa.job.id", e.job_id);
  span.attribute("awa.job.kind", e.kind);
  span.attribute("awa.job.queue", e.queue);
  span.attribute("awa.job.attempt", e.attempt);
  span.attribute("awa.job.max_attempts", e.max_attempts);
  span.attribute("awa.job.shard", e.enqueue_shard);
  return span;
}

void Client::Impl::end_process_span(trace::detail::ActiveSpan& span, const Job& job,
                                    const JobResult& result) {
  if (!span.recording()) return;
  const auto& e = job.entry();
  const char* outcome = outcome_name(e, result.outcome());
  span.attribute("awa.job.outcome", outcome);
  if (result.outcome() == Outcome::kRetry || result.outcome() == Outcome::kFail) {
    span.error(result.message());
    if (std::string_view(outcome) == "retried") {
      span.event("retry", {{"awa.job.next_attempt", std::int64_t{e.attempt} + 1}});
    }
  }
  span.end();
}

Client::Impl::Job* Client::Impl::take_ready() {
  // After stop() begins nothing new starts: the unstarted jobs are handed back.
  if (dispatch_stop_ || running_total_ >= cap_) return nullptr;
  for (std::size_t i = 0; i < queues_.size(); ++i) {
    auto& q = *queues_[(next_queue_ + i) % queues_.size()];
    if (q.ready.empty() || q.running >= q.config.max_workers) continue;
    // The next search starts after this queue, so one busy queue cannot starve another.
    next_queue_ = (next_queue_ + i + 1) % queues_.size();
    Job* job = q.ready.front().release();
    q.ready.pop_front();
    ++q.running;
    ++running_total_;
    ++q.started;
    wake_dispatcher_if_room(q);
    return job;
  }
  return nullptr;
}

void Client::Impl::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    Job* taken = nullptr;
    work_cv_.wait(lock, [&] { return workers_stop_ || (taken = take_ready()) != nullptr; });
    if (!taken) return;
    const std::unique_ptr<Job> job(taken);
    auto& q = job->queue_state();
    lock.unlock();
    q.prefetched_gauge->dec();
    // An attempt closed while it waited (cancelled, rescued) is not started: its stop
    // token fired, and its completion would be stale anyway.
    if (!job->stop_requested()) {
      q.running_gauge->inc();
      run_job(*job);
      q.running_gauge->dec();
    } else {
      spdlog::info("job {}: attempt {} closed before it started; skipped", job->job_id(),
                   job->entry().run_lease);
    }
    lock.lock();
    running_.erase(job->key());
    --q.running;
    --running_total_;
    wake_dispatcher_if_room(q);
    // stop() waits for the last handler on slot_cv_.
    if (dispatch_stop_) slot_cv_.notify_all();
  }
}

void Client::Impl::run_job(Job& job) {
  // The attempt's "process" span (when tracing is on), made the thread's current context
  // while the handler runs, so the jobs it enqueues, its follow-ups and its own spans are
  // its children. Without tracing the job's stored context is current instead.
  const auto context = job.trace_context();
  auto span = process_span(job, context);
  const trace::detail::ThreadTracer thread_tracer(tracer_);
  std::optional<trace::Scope> scope;
  if (span.started()) {
    scope.emplace(span.context());
  } else if (context) {
    scope.emplace(*context);
  } else {
    scope.emplace();
  }
  const auto it = handlers_.find(job.kind());
  if (it == handlers_.end()) {
    const auto delay = unknown_kind_delay(job.entry());
    storage::engine_metrics(*store_).job_unknown_kind.with({job.queue(), job.kind()}).inc();
    spdlog::warn("job {}: no worker registered for kind {} in {}; back to queue {} in {} ms",
                 job.job_id(), job.kind(), options_.application_name, job.queue(), delay.count());
    // The message lands in the attempt history (attempt_outcomes, state 'snoozed').
    batcher_->submit(Completion::of(job.entry(), Outcome::kSnooze,
                                    fmt::format("no worker registered for kind {} in {}",
                                                job.kind(), options_.application_name),
                                    delay));
    span.attribute("awa.job.outcome", "snoozed");
    span.event("unknown kind", {{"awa.job.kind", job.kind()}});
    return;
  }
  JobResult result = JobResult::completed();
  try {
    result = it->second(job);
  } catch (const UndecodableJson& e) {
    // Its args or metadata will never decode: a retry would only spend the attempts.
    spdlog::warn("job {}: {}; failed without retry", job.job_id(), e.what());
    result = JobResult::failed(e.what(), false);
  } catch (const std::exception& e) {
    result = JobResult::failed(e.what(), true);
  } catch (...) {
    result = JobResult::failed("handler threw a non-std::exception", true);
  }
  if (result.outcome() == Outcome::kWaitForCallback) {
    end_process_span(span, job, result);
    if (!result.follow_ups().empty()) {
      spdlog::warn(
          "job {}: waits for a callback; its {} follow-up job(s) were not enqueued (a "
          "callback's end carries none)",
          job.job_id(), result.follow_ups().size());
    }
    park_for_callback(job, result.delay());
    return;
  }
  // A follow-up that could not be enqueued would fail the whole flush it is sent with:
  // checked here, it fails this attempt only.
  std::string bad_follow_up;
  for (const auto& f : result.follow_ups()) {
    try {
      validate_follow_up(f);
    } catch (const InvalidArgument& e) {
      bad_follow_up = e.what();
      break;
    }
  }
  if (!bad_follow_up.empty()) result = JobResult::failed(bad_follow_up, true);
  end_process_span(span, job, result);
  if (job.finalized() && result.outcome() == Outcome::kCompleted) {
    if (!result.follow_ups().empty()) {
      spdlog::warn(
          "job {}: completed in the handler's own transaction (complete_in); its {} "
          "follow-up job(s) were not enqueued: enqueue them in that transaction",
          job.job_id(), result.follow_ups().size());
    }
    // Completed by the handler's own transaction (JobContext::complete_in): a completion
    // sent now would only find the attempt closed.
    completed_.fetch_add(1, std::memory_order_relaxed);
    storage::engine_metrics(*store_).job_completed.with({job.queue(), "completed"}).inc();
    return;
  }
  auto completion = Completion::of(job.entry(), result.outcome(), result.message(), result.delay());
  completion.result_json = result.result_json();
  completion.follow_ups = result.follow_ups();
  // Stored by the completion flush, on another thread: the context is fixed here.
  for (auto& f : completion.follow_ups) {
    if (const auto* t = storage::merged_trace(f.job)) f.job.opts.trace = *t;
  }
  batcher_->submit(std::move(completion));
}

void Client::Impl::count_result(const Completion&, const CompletionResult& r) {
  if (r.stale()) {
    stale_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const auto& s = *r.state;
  if (s == "completed") {
    completed_.fetch_add(1, std::memory_order_relaxed);
  } else if (s == "retried") {
    retried_.fetch_add(1, std::memory_order_relaxed);
  } else if (s == "failed" || s == "dlq") {
    failed_.fetch_add(1, std::memory_order_relaxed);
  } else if (s == "snoozed") {
    snoozed_.fetch_add(1, std::memory_order_relaxed);
  } else if (s == "cancelled") {
    cancelled_.fetch_add(1, std::memory_order_relaxed);
  } else {
    spdlog::warn("job {}: unexpected completion state {}", r.job_id, s);
  }
}

}  // namespace awa
