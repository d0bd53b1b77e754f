// OpenTelemetry tracing (include/awa/tracing.hpp), end to end, through the test's own
// OTLP receiver (tracing_support.hpp): the send and process spans' topology across
// attempts and across the jobs a handler enqueues, their attributes, the resource and
// headers, every outcome, and the samplers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tracing_support.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST_F(TracingTest, ARequestsJobIsTracedFromItsSendThroughEveryAttemptAndTheJobsItEnqueues) {
  // What the handlers see, kept past the test body's end by the handlers' own reference.
  struct Seen {
    std::mutex mu;
    std::optional<trace::Context> stored;   // attempt 1: the job's context
    std::optional<trace::Context> current;  // attempt 2: trace::current()
    std::optional<trace::Context> work;     // attempt 2: its own span's context
    bool work_recording = false;
    std::atomic<JobId> leaf{0};
  };
  auto seen = std::make_shared<Seen>();
  make_client(exporting());
  client_->register_worker("order", [this, seen](JobContext& j) {
    if (j.attempt() == 1) {
      std::lock_guard lock(seen->mu);
      seen->stored = j.trace_context();
      // A short delay instead of the default backoff (0.5..1 s for a first retry).
      return JobResult::retry_after(milliseconds(50), "boom");
    }
    const auto* current = trace::current();
    trace::Span work("charge card");
    work.set_attribute("order.id", 42);
    {
      std::lock_guard lock(seen->mu);
      seen->current = current ? std::optional<trace::Context>(*current) : std::nullopt;
      seen->work = work.context();
      seen->work_recording = work.recording();
    }
    seen->leaf = client_->insert(job("leaf"));
    return JobResult::completed();
  });
  client_->register_worker("leaf", [](JobContext&) { return JobResult::completed(); });
  start();

  std::optional<trace::Context> request;
  JobId id = 0;
  {
    auto req = trace::Span::root("POST /orders");
    EXPECT_TRUE(req.recording());
    request = req.context();
    ASSERT_TRUE(request.has_value());
    ASSERT_NE(trace::current(), nullptr) << "a root span is the thread's current context";
    EXPECT_EQ(*trace::current(), *request);
    id = client_->insert(job("order"));
  }
  EXPECT_EQ(trace::current(), nullptr) << "the span's end restores the thread's context";

  ASSERT_TRUE(receiver_.wait_for(
      [&](const std::vector<ReceivedSpan>& all) {
        const JobId leaf = seen->leaf;
        const auto has = [&](auto pred) { return std::any_of(all.begin(), all.end(), pred); };
        return leaf != 0 && has([](const ReceivedSpan& s) { return s.name == "POST /orders"; }) &&
               has([&](const ReceivedSpan& s) { return is_send(s, id); }) &&
               has([&](const ReceivedSpan& s) { return is_process(s, id, 1); }) &&
               has([&](const ReceivedSpan& s) { return is_process(s, id, 2); }) &&
               has([](const ReceivedSpan& s) { return s.name == "charge card"; }) &&
               has([&](const ReceivedSpan& s) { return is_send(s, leaf); }) &&
               has([&](const ReceivedSpan& s) { return is_process(s, leaf, 1); });
      },
      seconds(30)))
      << describe(receiver_.spans());
  EXPECT_TRUE(client_->flush_traces(seconds(5)));
  const auto all = receiver_.spans();
  EXPECT_EQ(all.size(), 7U) << describe(all);
  EXPECT_THAT(receiver_.problems(), ::testing::IsEmpty());

  // The request: a server span starting the trace.
  const auto req = receiver_.only([](const ReceivedSpan& s) { return s.name == "POST /orders"; });
  ASSERT_TRUE(req) << describe(all);
  const std::string trace_id = req->trace_id;
  EXPECT_EQ(req->kind, kServer);
  EXPECT_EQ(req->parent_span_id, "");
  EXPECT_EQ(request->trace_id(), trace_id);
  EXPECT_EQ(request->parent_id(), req->span_id);
  EXPECT_TRUE(request->sampled());

  // The insert: a producer span under the request; the job stores its context.
  const auto send = send_span(id);
  ASSERT_TRUE(send) << describe(all);
  EXPECT_EQ(send->kind, kProducer);
  EXPECT_EQ(send->trace_id, trace_id);
  EXPECT_EQ(send->parent_span_id, req->span_id);
  {
    std::lock_guard lock(seen->mu);
    ASSERT_TRUE(seen->stored.has_value());
    EXPECT_EQ(seen->stored->traceparent, fmt::format("00-{}-{}-01", trace_id, send->span_id));
  }

  // Attempt 1: a consumer span under the send span, failed and retried.
  const auto first = process_span(id, 1);
  ASSERT_TRUE(first) << describe(all);
  EXPECT_EQ(first->kind, kConsumer);
  EXPECT_EQ(first->trace_id, trace_id);
  EXPECT_EQ(first->parent_span_id, send->span_id);
  EXPECT_TRUE(first->links.empty());
  EXPECT_EQ(first->attr("awa.job.outcome"), "retried");
  EXPECT_EQ(first->status_code, kStatusError);
  EXPECT_THAT(first->status_message, HasSubstr("boom"));
  const auto* exception = first->event("exception");
  ASSERT_NE(exception, nullptr) << describe({*first});
  EXPECT_THAT(exception->attributes.at("exception.message").get<std::string>(), HasSubstr("boom"));
  const auto* retry = first->event("retry");
  ASSERT_NE(retry, nullptr) << describe({*first});
  EXPECT_EQ(retry->attributes.at("awa.job.next_attempt"), 2);

  // Attempt 2: a trace of its own, linked to the job's stored context.
  const auto second = process_span(id, 2);
  ASSERT_TRUE(second) << describe(all);
  EXPECT_EQ(second->kind, kConsumer);
  EXPECT_NE(second->trace_id, trace_id);
  EXPECT_EQ(second->parent_span_id, "");
  ASSERT_EQ(second->links.size(), 1U) << describe({*second});
  EXPECT_EQ(second->links[0].trace_id, trace_id);
  EXPECT_EQ(second->links[0].span_id, send->span_id);
  EXPECT_EQ(second->attr("awa.job.outcome"), "completed");
  EXPECT_NE(second->status_code, kStatusError);
  EXPECT_EQ(second->event("exception"), nullptr);

  // In its handler: the attempt's span is current, the handler's span is its child.
  const auto work = receiver_.only([](const ReceivedSpan& s) { return s.name == "charge card"; });
  ASSERT_TRUE(work) << describe(all);
  EXPECT_EQ(work->kind, kInternal);
  EXPECT_EQ(work->trace_id, second->trace_id);
  EXPECT_EQ(work->parent_span_id, second->span_id);
  EXPECT_EQ(work->attr("order.id"), 42);
  {
    std::lock_guard lock(seen->mu);
    ASSERT_TRUE(seen->current.has_value());
    EXPECT_EQ(seen->current->trace_id(), second->trace_id);
    EXPECT_EQ(seen->current->parent_id(), second->span_id);
    EXPECT_TRUE(seen->work_recording);
    ASSERT_TRUE(seen->work.has_value());
    EXPECT_EQ(seen->work->trace_id(), second->trace_id);
    EXPECT_EQ(seen->work->parent_id(), work->span_id);
  }

  // The job the handler enqueued under its span: sent from it, processed under the send.
  const JobId leaf = seen->leaf;
  const auto leaf_send = send_span(leaf);
  ASSERT_TRUE(leaf_send) << describe(all);
  EXPECT_EQ(leaf_send->trace_id, second->trace_id);
  EXPECT_EQ(leaf_send->parent_span_id, work->span_id);
  const auto leaf_process = process_span(leaf, 1);
  ASSERT_TRUE(leaf_process) << describe(all);
  EXPECT_EQ(leaf_process->trace_id, second->trace_id);
  EXPECT_EQ(leaf_process->parent_span_id, leaf_send->span_id);
  EXPECT_EQ(leaf_process->attr("awa.job.outcome"), "completed");

  // Every span has an id of its own.
  std::set<std::string> ids;
  for (const auto& s : all) ids.insert(s.span_id);
  EXPECT_EQ(ids.size(), all.size());

  const auto stats = client_->tracing_stats();
  EXPECT_EQ(stats.exported, 7U);
  EXPECT_EQ(stats.dropped, 0U);
  EXPECT_GE(stats.requests, 1U);
  EXPECT_EQ(stats.failed_requests, 0U);
  EXPECT_EQ(exported_metric(), 7);
  EXPECT_EQ(dropped_metric(), 0);
}

TEST_F(TracingTest, SpansCarryTheMessagingAndJobAttributesTheResourceAndTheHeaders) {
  set_shards(kQueue, 4);
  struct Seen {
    std::mutex mu;
    std::map<JobId, int> shards;  // by job id: the shard its handler saw
  };
  auto seen = std::make_shared<Seen>();
  auto e = exporting();
  e.service_name = "billing";
  e.resource_attributes = {{"deployment.environment", "tracing-test"}};
  e.headers = {{"x-api-key", "secret-1"}};
  make_client(e);
  client_->register_worker("ship", [seen](JobContext& j) {
    {
      std::lock_guard lock(seen->mu);
      seen->shards[j.job_id()] = j.enqueue_shard();
    }
    // Every kind of attribute value, an event and an error on a span of the handler's.
    trace::Span lookup("lookup");
    lookup.set_attribute("s", "text");
    lookup.set_attribute("s2", std::string("more text"));
    lookup.set_attribute("n", std::int64_t{-7});
    lookup.set_attribute("big", std::int64_t{1} << 53);
    lookup.set_attribute("d", 1.5);
    lookup.set_attribute("b", true);
    // Strings the encoder must escape: quotes, a backslash, control characters, UTF-8, and
    // a byte that is not UTF-8 (replaced, so the request stays valid JSON).
    lookup.set_attribute("odd", std::string("a \"q\" \\ \n\t\x01 caf\xc3\xa9 \xff end"));
    // Printable ASCII with one character to escape, a quote or a backslash.
    lookup.set_attribute("quoted", "say \"hi\"");
    lookup.set_attribute("path", "C:\\temp");
    lookup.set_attribute("nan", std::numeric_limits<double>::quiet_NaN());
    lookup.add_event("cache miss");
    lookup.set_error("not found");
    return JobResult::completed();
  });
  start();

  // One job through Client::insert, under an explicit context.
  NewJob one = job_in("ship", producer_context(1));
  one.opts.ordering_key = "customer-1";
  const JobId single = client_->insert(one);
  // Three in one call of QueueStorage on a connection of the application's, under the
  // thread's context: one send span for the batch.
  std::vector<JobId> batch;
  {
    trace::Scope scope(trace::parse(producer_context(2)));
    std::vector<NewJob> jobs;
    for (int i = 0; i < 3; ++i) {
      NewJob j = job("ship");
      j.opts.ordering_key = fmt::format("customer-{}", 10 + i);
      jobs.push_back(j);
    }
    auto app = Connection::connect(database_url());
    batch = client_->storage().insert_many(app, jobs);
  }
  ASSERT_EQ(batch.size(), 3U);
  // Two through Client::insert_many, under another context.
  std::vector<JobId> two;
  {
    trace::Scope scope(trace::parse(producer_context(3)));
    two = client_->insert_many(std::vector<NewJob>{job("ship"), job("ship")});
  }
  ASSERT_EQ(two.size(), 2U);

  std::vector<JobId> all_ids = batch;
  all_ids.insert(all_ids.end(), two.begin(), two.end());
  all_ids.push_back(single);
  ASSERT_TRUE(receiver_.wait_for(
      [&](const std::vector<ReceivedSpan>& all) {
        return std::all_of(all_ids.begin(), all_ids.end(), [&](JobId id) {
          return std::any_of(all.begin(), all.end(),
                             [&](const ReceivedSpan& s) { return is_process(s, id, 1); });
        });
      },
      seconds(30)))
      << describe(receiver_.spans());
  ASSERT_TRUE(client_->flush_traces(seconds(5)));
  const auto all = receiver_.spans();
  EXPECT_THAT(receiver_.problems(), ::testing::IsEmpty());

  const auto expect_process = [&](JobId id, const std::string& parent_span_id,
                                  const std::string& trace_id) {
    SCOPED_TRACE(fmt::format("job {}", id));
    const auto p = process_span(id);
    ASSERT_TRUE(p) << describe(all);
    int shard = -1;
    {
      std::lock_guard lock(seen->mu);
      shard = seen->shards.at(id);
    }
    EXPECT_EQ(p->kind, kConsumer);
    EXPECT_EQ(p->trace_id, trace_id);
    EXPECT_EQ(p->parent_span_id, parent_span_id);
    EXPECT_EQ(p->attr("messaging.system"), "awa");
    EXPECT_EQ(p->attr("messaging.operation.type"), "process");
    EXPECT_EQ(p->attr("messaging.destination.name"), kQueue);
    EXPECT_EQ(p->attr("messaging.message.id"), std::to_string(id));
    EXPECT_EQ(p->attr("messaging.destination.partition.id"), std::to_string(shard));
    EXPECT_EQ(p->attr("awa.job.id"), id);
    EXPECT_EQ(p->attr("awa.job.kind"), "ship");
    EXPECT_EQ(p->attr("awa.job.queue"), kQueue);
    EXPECT_EQ(p->attr("awa.job.attempt"), 1);
    EXPECT_EQ(p->attr("awa.job.shard"), shard);
    EXPECT_EQ(p->attr("awa.job.outcome"), "completed");
    EXPECT_NE(p->status_code, kStatusError);
  };
  const auto expect_send = [&](const ReceivedSpan& s, const std::string& traceparent) {
    const auto parent = trace::parse(traceparent);
    EXPECT_EQ(s.kind, kProducer);
    EXPECT_EQ(s.trace_id, parent.trace_id());
    EXPECT_EQ(s.parent_span_id, parent.parent_id());
    EXPECT_EQ(s.attr("messaging.system"), "awa");
    EXPECT_EQ(s.attr("messaging.operation.type"), "send");
    EXPECT_EQ(s.attr("messaging.destination.name"), kQueue);
  };

  const auto single_send = send_span(single);
  ASSERT_TRUE(single_send) << describe(all);
  expect_send(*single_send, producer_context(1));
  EXPECT_FALSE(single_send->has_attr("messaging.batch.message_count"));
  expect_process(single, single_send->span_id, single_send->trace_id);

  const auto batch_sends = receiver_.spans_where([](const ReceivedSpan& s) {
    return s.name == kSend && s.trace_id == trace::parse(producer_context(2)).trace_id();
  });
  ASSERT_EQ(batch_sends.size(), 1U) << "one send span per insert call: " << describe(all);
  expect_send(batch_sends[0], producer_context(2));
  EXPECT_EQ(batch_sends[0].attr("messaging.batch.message_count"), 3);
  for (const JobId id : batch) expect_process(id, batch_sends[0].span_id, batch_sends[0].trace_id);

  const auto two_sends = receiver_.spans_where([](const ReceivedSpan& s) {
    return s.name == kSend && s.trace_id == trace::parse(producer_context(3)).trace_id();
  });
  ASSERT_EQ(two_sends.size(), 1U) << describe(all);
  expect_send(two_sends[0], producer_context(3));
  EXPECT_EQ(two_sends[0].attr("messaging.batch.message_count"), 2);
  for (const JobId id : two) expect_process(id, two_sends[0].span_id, two_sends[0].trace_id);

  // The handler's span, with each kind of value.
  const auto lookups = receiver_.spans_named("lookup");
  ASSERT_EQ(lookups.size(), all_ids.size()) << describe(all);
  const auto& lookup = lookups[0];
  EXPECT_EQ(lookup.kind, kInternal);
  EXPECT_EQ(lookup.attr("s"), "text");
  EXPECT_EQ(lookup.attr("s2"), "more text");
  EXPECT_EQ(lookup.attr("n"), -7);
  EXPECT_EQ(lookup.attr("big"), std::int64_t{1} << 53);
  EXPECT_EQ(lookup.attr("d"), 1.5);
  EXPECT_EQ(lookup.attr("b"), true);
  EXPECT_EQ(lookup.attr("odd"), "a \"q\" \\ \n\t\x01 caf\xc3\xa9 \xef\xbf\xbd end");
  EXPECT_EQ(lookup.attr("quoted"), "say \"hi\"");
  EXPECT_EQ(lookup.attr("path"), "C:\\temp");
  EXPECT_EQ(lookup.attr("nan"), "NaN");
  EXPECT_NE(lookup.event("cache miss"), nullptr);
  EXPECT_EQ(lookup.status_code, kStatusError);
  EXPECT_EQ(lookup.status_message, "not found");
  ASSERT_NE(lookup.event("exception"), nullptr);
  EXPECT_EQ(lookup.event("exception")->attributes.at("exception.message"), "not found");

  // What comes with every span: the resource, the scope, the configured headers.
  for (const auto& s : all) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.resource_attr("service.name"), "billing");
    EXPECT_EQ(s.resource_attr("deployment.environment"), "tracing-test");
    EXPECT_EQ(s.scope_name, "awa");
    EXPECT_FALSE(s.scope_version.empty());
    EXPECT_EQ(s.header("x-api-key"), "secret-1");
  }
  for (const auto& type : receiver_.content_types())
    EXPECT_THAT(type, StartsWith("application/json"));
}

TEST_F(TracingTest, EveryOutcomeOfAnAttemptIsRecordedOnItsSpan) {
  auto snoozed_once = std::make_shared<std::atomic<bool>>(false);
  make_client(exporting());
  client_->register_worker("snooze", [snoozed_once](JobContext&) {
    if (!snoozed_once->exchange(true)) return JobResult::snooze(milliseconds(20));
    return JobResult::completed();
  });
  client_->register_worker("cancel", [](JobContext&) { return JobResult::cancel("not wanted"); });
  client_->register_worker("fail", [](JobContext&) { return JobResult::failed("bad", false); });
  client_->register_worker("throw",
                           [](JobContext&) -> JobResult { throw std::runtime_error("kaput"); });
  client_->register_worker("park",
                           [](JobContext&) { return JobResult::wait_for_callback(seconds(3600)); });
  client_->register_worker("plain", [](JobContext&) { return JobResult::completed(); });
  start();

  const JobId snooze = client_->insert(job("snooze"));
  const JobId cancel = client_->insert(job("cancel"));
  const JobId fail = client_->insert(job("fail"));
  NewJob last_try = job("throw");
  last_try.opts.max_attempts = 1;
  const JobId thrown = client_->insert(last_try);
  const JobId park = client_->insert(job("park"));
  // Inserted without any context: its attempt starts a trace of its own.
  ASSERT_EQ(trace::current(), nullptr);
  const JobId plain = client_->insert(job("plain"));

  const auto outcome_of = [&](JobId id, const std::string& outcome) {
    return [id, outcome](const ReceivedSpan& s) {
      return s.name == kProcess && s.attr("awa.job.id") == nlohmann::json(id) &&
             s.attr("awa.job.outcome") == nlohmann::json(outcome);
    };
  };
  const std::vector<std::pair<JobId, std::string>> expected = {
      {snooze, "snoozed"}, {snooze, "completed"},      {cancel, "cancelled"}, {fail, "failed"},
      {thrown, "failed"},  {park, "waiting_callback"}, {plain, "completed"}};
  ASSERT_TRUE(receiver_.wait_for(
      [&](const std::vector<ReceivedSpan>& all) {
        return std::all_of(expected.begin(), expected.end(), [&](const auto& e) {
          return std::any_of(all.begin(), all.end(), outcome_of(e.first, e.second));
        });
      },
      seconds(30)))
      << describe(receiver_.spans());
  EXPECT_THAT(receiver_.problems(), ::testing::IsEmpty());

  const auto failed = receiver_.only(outcome_of(fail, "failed"));
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status_code, kStatusError);
  EXPECT_THAT(failed->status_message, HasSubstr("bad"));
  ASSERT_NE(failed->event("exception"), nullptr);
  EXPECT_THAT(failed->event("exception")->attributes.at("exception.message").get<std::string>(),
              HasSubstr("bad"));
  EXPECT_EQ(failed->event("retry"), nullptr) << "a terminal failure is not retried";

  const auto threw = receiver_.only(outcome_of(thrown, "failed"));
  ASSERT_TRUE(threw);
  EXPECT_EQ(threw->status_code, kStatusError);
  ASSERT_NE(threw->event("exception"), nullptr);
  EXPECT_THAT(threw->event("exception")->attributes.at("exception.message").get<std::string>(),
              HasSubstr("kaput"));
  EXPECT_EQ(threw->event("retry"), nullptr) << "its only attempt";

  const auto root = receiver_.only(outcome_of(plain, "completed"));
  ASSERT_TRUE(root);
  EXPECT_EQ(root->parent_span_id, "");
  EXPECT_TRUE(root->links.empty());
  EXPECT_EQ(root->attr("awa.job.kind"), "plain");
  // A root trace of its own: no other span shares it.
  EXPECT_EQ(
      receiver_.spans_where([&](const ReceivedSpan& s) { return s.trace_id == root->trace_id; })
          .size(),
      1U);
  // No context, no send span.
  EXPECT_TRUE(receiver_.spans_named(kSend).empty()) << describe(receiver_.spans());
}

TEST_F(TracingTest, AParentBasedRatioOfZeroDropsRootTracesButFollowsASampledParent) {
  auto e = exporting();
  e.sampler = trace::Sampler::kParentBasedTraceIdRatio;
  e.sampler_ratio = 0.0;
  make_client(e);
  client_->register_worker("plain", [](JobContext&) { return JobResult::completed(); });
  start();

  const JobId rootless = client_->insert(job("plain"));
  JobId under_root = 0;
  {
    auto req = trace::Span::root("GET /unsampled");
    EXPECT_FALSE(req.recording()) << "a root at ratio 0 is not sampled";
    under_root = client_->insert(job("plain"));
  }
  const JobId unsampled = client_->insert(job_in("plain", producer_context(3, false)));
  const JobId sampled = client_->insert(job_in("plain", producer_context(4, true)));

  ASSERT_TRUE(await_process(sampled)) << describe(receiver_.spans());
  settle(4);
  const auto all = receiver_.spans();
  const auto p = process_span(sampled);
  ASSERT_TRUE(p);
  const auto send = send_span(sampled);
  ASSERT_TRUE(send) << "a send span under a sampled parent is sampled: " << describe(all);
  EXPECT_EQ(send->trace_id, trace::parse(producer_context(4)).trace_id());
  EXPECT_EQ(p->parent_span_id, send->span_id);
  for (const JobId id : {rootless, under_root, unsampled}) {
    EXPECT_FALSE(process_span(id)) << id << ": " << describe(all);
    EXPECT_FALSE(send_span(id)) << id << ": " << describe(all);
  }
  EXPECT_TRUE(receiver_.spans_named("GET /unsampled").empty());
  EXPECT_EQ(all.size(), 2U) << describe(all);
  EXPECT_EQ(client_->tracing_stats().dropped, 0U) << "not sampled is not dropped";
}

TEST_F(TracingTest, AnUnsampledParentIsFollowedByTheDefaultSampler) {
  make_client(exporting());  // parent-based, always on
  client_->register_worker("plain", [](JobContext&) { return JobResult::completed(); });
  start();

  const JobId unsampled = client_->insert(job_in("plain", producer_context(5, false)));
  const JobId sampled = client_->insert(job_in("plain", producer_context(6, true)));
  ASSERT_TRUE(await_process(sampled)) << describe(receiver_.spans());
  settle(2);
  EXPECT_FALSE(process_span(unsampled)) << describe(receiver_.spans());
  EXPECT_FALSE(send_span(unsampled)) << describe(receiver_.spans());
  EXPECT_TRUE(receiver_
                  .spans_where([](const ReceivedSpan& s) {
                    return s.trace_id == trace::parse(producer_context(5)).trace_id();
                  })
                  .empty())
      << describe(receiver_.spans());
}

TEST_F(TracingTest, AlwaysOffExportsNothing) {
  auto e = exporting();
  e.sampler = trace::Sampler::kAlwaysOff;
  make_client(e);
  client_->register_worker("plain", [](JobContext&) { return JobResult::completed(); });
  start();

  client_->insert(job_in("plain", producer_context(7, true)));
  client_->insert(job("plain"));
  {
    auto req = trace::Span::root("GET /off");
    EXPECT_FALSE(req.recording());
    trace::Span inner("inner");
    EXPECT_FALSE(inner.recording());
    client_->insert(job("plain"));
  }
  settle(3);
  EXPECT_TRUE(receiver_.spans().empty()) << describe(receiver_.spans());
  EXPECT_EQ(receiver_.requests(), 0);
  const auto stats = client_->tracing_stats();
  EXPECT_EQ(stats.exported, 0U);
  EXPECT_EQ(stats.dropped, 0U);
}

TEST_F(TracingTest, ATraceIdRatioOfOneExportsEverythingWhateverTheParentSays) {
  auto e = exporting();
  e.sampler = trace::Sampler::kTraceIdRatio;
  e.sampler_ratio = 1.0;
  make_client(e);
  client_->register_worker("plain", [](JobContext&) { return JobResult::completed(); });
  start();

  const JobId unsampled = client_->insert(job_in("plain", producer_context(8, false)));
  const JobId rootless = client_->insert(job("plain"));
  ASSERT_TRUE(await_process(unsampled)) << describe(receiver_.spans());
  ASSERT_TRUE(await_process(rootless)) << describe(receiver_.spans());
  const auto send = send_span(unsampled);
  ASSERT_TRUE(send) << describe(receiver_.spans());
  EXPECT_EQ(send->parent_span_id, trace::parse(producer_context(8)).parent_id());
  EXPECT_EQ(process_span(unsampled)->parent_span_id, send->span_id);
  EXPECT_EQ(process_span(rootless)->parent_span_id, "");
}

}  // namespace
}  // namespace awa::testing
