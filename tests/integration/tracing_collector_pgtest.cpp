// OpenTelemetry tracing (include/awa/tracing.hpp) against collectors that are down,
// refusing or slow (nothing to the jobs; dropped spans, counted), with tracing off, from a
// SQL producer, and from `awa work` and `awa enqueue` configured by the standard
// environment variables; through the test's own OTLP receiver (tracing_support.hpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tracing_support.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST_F(TracingTest, ACollectorThatIsDownCostsTheJobsNothingAndItsSpansAreCountedAsDropped) {
  // Nothing listens on the receiver's port any more: every connection is refused.
  receiver_.stop();
  auto e = exporting();
  e.timeout = seconds(1);
  // Waiting for 20 refused requests of 1 s each would take 20 s.
  constexpr std::size_t kJobs = 20;
  EXPECT_LT(work_plain_jobs(e, kJobs), seconds(10)) << "jobs waited on the exporter";
  client_->stop();

  const auto stats = client_->tracing_stats();
  EXPECT_EQ(stats.exported, 0U);
  EXPECT_EQ(stats.dropped, kJobs) << "one process span per job";
  EXPECT_GT(stats.failed_requests, 0U);
  EXPECT_EQ(dropped_metric(), static_cast<std::int64_t>(stats.dropped)) << registry_.expose();
  EXPECT_EQ(exported_metric(), 0) << registry_.expose();
}

TEST_F(TracingTest, ACollectorThatRefusesTheSpansHasThemCountedAsDropped) {
  receiver_.set_status(503);
  auto e = exporting();
  e.timeout = seconds(1);
  constexpr std::size_t kJobs = 5;
  work_plain_jobs(e, kJobs);
  ASSERT_TRUE(eventually([&] { return receiver_.requests() > 0; }, seconds(10)))
      << "the exporter never tried";
  client_->stop();

  const auto stats = client_->tracing_stats();
  EXPECT_EQ(stats.exported, 0U);
  EXPECT_EQ(stats.dropped, kJobs);
  EXPECT_GT(stats.failed_requests, 0U);
  EXPECT_EQ(receiver_.accepted_requests(), 0);
  EXPECT_EQ(dropped_metric(), static_cast<std::int64_t>(stats.dropped)) << registry_.expose();
  EXPECT_EQ(exported_metric(), 0) << registry_.expose();
}

TEST_F(TracingTest, ASlowCollectorNeverHoldsUpHandlersAndSpansBeyondTheQueueAreDropped) {
  // Each request takes 2 s: were handlers to wait for room in a queue of 2 spans, 20 jobs
  // would take about 20 s.
  receiver_.set_delay(seconds(2));
  auto e = exporting();
  e.max_queue = 2;
  e.schedule_delay = milliseconds(10);
  e.timeout = seconds(5);
  constexpr std::size_t kJobs = 20;
  EXPECT_LT(work_plain_jobs(e, kJobs), seconds(10)) << "jobs waited on the exporter";
  // While the first request is still being answered, at most the queue (2) and what that
  // request carries (2) can have been kept: the rest were dropped at once.
  EXPECT_TRUE(
      eventually([&] { return client_->tracing_stats().dropped >= kJobs - 4; }, milliseconds(1000)))
      << "dropped " << client_->tracing_stats().dropped;
  // The queue holds spans the collector has not taken, and will not within this time.
  EXPECT_FALSE(client_->flush_traces(milliseconds(200)));

  const auto stopping = Clock::now();
  client_->stop();
  EXPECT_LT(Clock::now() - stopping, seconds(9))
      << "stop() waits for the exporter at most its timeout";
  const auto stats = client_->tracing_stats();
  EXPECT_GT(stats.dropped, 0U);
  EXPECT_LE(stats.exported + stats.dropped, kJobs);
  EXPECT_EQ(dropped_metric(), static_cast<std::int64_t>(stats.dropped)) << registry_.expose();
  EXPECT_EQ(exported_metric(), static_cast<std::int64_t>(stats.exported)) << registry_.expose();
}

TEST_F(TracingTest, WithTracingOffNothingIsRecordedAndTheCountersStillExist) {
  trace::ExportOptions off;
  off.enabled = false;
  off.endpoint = receiver_.url();
  auto seen = std::make_shared<std::optional<trace::Context>>();
  auto mu = std::make_shared<std::mutex>();
  make_client(off);
  client_->register_worker("plain", [seen, mu](JobContext& j) {
    std::lock_guard lock(*mu);
    *seen = j.trace_context();
    return JobResult::completed();
  });
  start();
  EXPECT_EQ(dropped_metric(), 0) << registry_.expose();
  EXPECT_EQ(exported_metric(), 0) << registry_.expose();

  {
    auto req = trace::Span::root("GET /untraced");
    EXPECT_FALSE(req.recording());
    EXPECT_FALSE(req.context().has_value()) << "no span, no context of its own";
    EXPECT_EQ(trace::current(), nullptr);
  }
  // The producer's context is stored as given: no send span took its place.
  client_->insert(job_in("plain", producer_context(9)));
  settle(1);
  {
    std::lock_guard lock(*mu);
    EXPECT_EQ(*seen, trace::parse(producer_context(9)));
  }
  EXPECT_EQ(receiver_.requests(), 0);
  const auto stats = client_->tracing_stats();
  EXPECT_EQ(stats.exported, 0U);
  EXPECT_EQ(stats.dropped, 0U);
  EXPECT_EQ(stats.requests, 0U);
}

TEST_F(TracingTest, ASqlProducersTraceparentIsTheParentOfTheFirstAttempt) {
  make_client(exporting());
  client_->register_worker("plain", [](JobContext&) { return JobResult::completed(); });
  start();

  const auto parent = trace::parse(producer_context(10));
  const JobId id =
      conn()
          .exec(fmt::format("SELECT id FROM insert_job_compat(p_kind => 'plain', p_queue => '{}', "
                            "p_metadata => jsonb_build_object('traceparent', '{}'))",
                            kQueue, parent.traceparent))
          .get<std::int64_t>(0, 0);
  ASSERT_TRUE(await_process(id)) << describe(receiver_.spans());
  const auto p = process_span(id);
  EXPECT_EQ(p->trace_id, parent.trace_id());
  EXPECT_EQ(p->parent_span_id, parent.parent_id());
  EXPECT_TRUE(p->links.empty());
  EXPECT_TRUE(receiver_.spans_named(kSend).empty()) << "SQL inserts record no span";
}

TEST_F(TracingTest, AwaWorkExportsToTheCollectorTheEnvironmentNames) {
  // The child inherits the variables; restored before anything else of this process runs.
  std::unique_ptr<WorkerProcess> worker;
  {
    ScopedEnv env({{"OTEL_EXPORTER_OTLP_ENDPOINT", receiver_.base_url()},
                   {"OTEL_SERVICE_NAME", "awa-cli-worker"},
                   {"OTEL_RESOURCE_ATTRIBUTES", "service.name=not-this,team=queues"},
                   {"OTEL_BSP_SCHEDULE_DELAY", "50"}});
    worker = std::make_unique<WorkerProcess>(schema_, std::vector<std::string>{"--queue", kQueue});
  }
  const JobId plain = enqueue(kQueue, 1, "noop").at(0);
  const auto parent = trace::parse(producer_context(11));
  NewJob traced("noop", nlohmann::json::object(), on_queue(kQueue));
  traced.opts.trace = parent;
  const JobId traced_id = storage::insert_many(*store_, conn(), std::vector<NewJob>{traced}).at(0);

  ASSERT_TRUE(await_process(plain, 1, seconds(30))) << worker->log() << describe(receiver_.spans());
  ASSERT_TRUE(await_process(traced_id, 1, seconds(30))) << worker->log();
  const auto p = process_span(plain);
  EXPECT_EQ(p->resource_attr("service.name"), "awa-cli-worker");
  EXPECT_EQ(p->resource_attr("team"), "queues");
  EXPECT_EQ(p->attr("awa.job.kind"), "noop");
  EXPECT_EQ(p->parent_span_id, "");
  const auto t = process_span(traced_id);
  EXPECT_EQ(t->trace_id, parent.trace_id());
  EXPECT_EQ(t->parent_span_id, parent.parent_id());
  EXPECT_THAT(receiver_.problems(), ::testing::IsEmpty());
  EXPECT_EQ(worker->terminate(seconds(20)), 0) << worker->log();
}

// `awa enqueue` makes no client: trace::Tracing, configured by the same variables, records
// its send span under the context it was given, and sends it before the command exits.
TEST_F(TracingTest, AwaEnqueueRecordsItsSendSpanUnderTheGivenContext) {
  const auto parent = trace::parse(producer_context(12));
  CliResult r;
  {
    ScopedEnv env({{"OTEL_EXPORTER_OTLP_ENDPOINT", receiver_.base_url()},
                   {"OTEL_SERVICE_NAME", "awa-cli-producer"}});
    r = run_cli(fmt::format("--schema {} enqueue noop --queue {} --traceparent {}", schema_, kQueue,
                            parent.traceparent));
  }
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const JobId id = std::stoll(r.output);
  // Sent at exit: there when the command has returned.
  const auto sends = receiver_.spans_named(kSend);
  ASSERT_EQ(sends.size(), 1U) << describe(receiver_.spans());
  const auto& send = sends[0];
  EXPECT_EQ(send.kind, kProducer);
  EXPECT_EQ(send.trace_id, parent.trace_id());
  EXPECT_EQ(send.parent_span_id, parent.parent_id());
  EXPECT_EQ(send.attr("messaging.message.id"), std::to_string(id));
  EXPECT_EQ(send.resource_attr("service.name"), "awa-cli-producer");
  // The job is the send span's child.
  const auto stored = conn()
                          .exec(fmt::format("SELECT metadata->>'traceparent' FROM ready_entries "
                                            "WHERE job_id = {}",
                                            id))
                          .get<std::string>(0, 0);
  EXPECT_EQ(trace::parse(stored).parent_id(), send.span_id);
  EXPECT_THAT(receiver_.problems(), ::testing::IsEmpty());
}

}  // namespace
}  // namespace awa::testing
