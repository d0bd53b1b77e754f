// The tracing tests' fixture (tracing_pgtest.cpp, tracing_collector_pgtest.cpp): a client
// exporting to an OTLP receiver of the test's own (otlp_receiver.hpp), which checks the
// JSON encoding and records the spans, and helpers to find them.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "awa/metrics.hpp"
#include "awa/trace.hpp"
#include "awa/tracing.hpp"
#include "cli_runner.hpp"
#include "otlp_receiver.hpp"
#include "runtime_support.hpp"

namespace awa::testing {

inline constexpr int kInternal = 1;
inline constexpr int kServer = 2;
inline constexpr int kProducer = 4;
inline constexpr int kConsumer = 5;
inline constexpr int kStatusError = 2;

inline const std::string kQueue = "orders";
inline const std::string kSend = "send orders";
inline const std::string kProcess = "process orders";

// Contexts of producers outside the process, sampled (flags 01) or not (00).
inline std::string producer_context(int n, bool sampled = true) {
  return fmt::format("00-{:032x}-{:016x}-{}", 0x7ace000 + n, 0x5e0 + n, sampled ? "01" : "00");
}

// One line per span, for failure messages.
inline std::string describe(const std::vector<ReceivedSpan>& spans) {
  std::string out = fmt::format("{} spans:", spans.size());
  for (const auto& s : spans) {
    out += fmt::format("\n  \"{}\" kind={} trace={} span={} parent={} status={} \"{}\" attrs={}",
                       s.name, s.kind, s.trace_id, s.span_id, s.parent_span_id, s.status_code,
                       s.status_message, nlohmann::json(s.attributes).dump());
    for (const auto& l : s.links) out += fmt::format(" link={}/{}", l.trace_id, l.span_id);
    for (const auto& e : s.events) {
      out += fmt::format(" event={}{}", e.name, nlohmann::json(e.attributes).dump());
    }
  }
  return out;
}

// The value of `series` (name and labels as exposed) in a registry's exposition, or
// nullopt when it is not there.
inline std::optional<double> sample(const metrics::Registry& registry, const std::string& series) {
  std::istringstream in(registry.expose());
  for (std::string line; std::getline(in, line);) {
    if (line.size() > series.size() + 1 && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

// Sets environment variables for its lifetime (a child process started meanwhile
// inherits them) and then restores what was there.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) {
      if (old) {
        ::setenv(name.c_str(), old->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

class TracingTest : public RuntimeTest {
 protected:
  void TearDown() override {
    // The client's handlers may refer to the test's state, and its exporter to the
    // receiver: it goes first.
    if (client_) client_->stop();
    client_.reset();
    receiver_.stop();
    if (HasFailure()) std::cerr << "received " << describe(receiver_.spans()) << "\n";
    RuntimeTest::TearDown();
  }

  // Tracing on, to the receiver, exporting a partial batch after 50 ms (not the default
  // 5 s) so that spans arrive while the test waits.
  trace::ExportOptions exporting() const {
    trace::ExportOptions e;
    e.enabled = true;
    e.endpoint = receiver_.url();
    e.service_name = "awa-tracing-test";
    e.schedule_delay = milliseconds(50);
    e.timeout = seconds(5);
    return e;
  }

  // A client (not started) with `tracing`, counting into the test's own registry so that
  // the exporter's counters are this client's alone.
  Client& make_client(const trace::ExportOptions& tracing) {
    ClientOptions o = options();
    o.tracing = tracing;
    o.metrics_registry = &registry_;
    client_ = std::make_unique<Client>(o);
    return *client_;
  }
  void start(int workers = 4) {
    client_->add_queue(queue(kQueue, workers));
    client_->start();
  }

  static NewJob job(const std::string& kind,
                    const nlohmann::json& args = nlohmann::json::object()) {
    return NewJob(kind, args, on_queue(kQueue));
  }
  static NewJob job_in(const std::string& kind, const std::string& traceparent) {
    NewJob j = job(kind);
    j.opts.trace = trace::parse(traceparent);
    return j;
  }

  static bool is_process(const ReceivedSpan& s, JobId id, int attempt) {
    return s.name == kProcess && s.attr("awa.job.id") == nlohmann::json(id) &&
           s.attr("awa.job.attempt") == nlohmann::json(attempt);
  }
  static bool is_send(const ReceivedSpan& s, JobId id) {
    return s.name == kSend && s.attr("messaging.message.id") == nlohmann::json(std::to_string(id));
  }
  std::optional<ReceivedSpan> process_span(JobId id, int attempt = 1) const {
    return receiver_.only([&](const ReceivedSpan& s) { return is_process(s, id, attempt); });
  }
  std::optional<ReceivedSpan> send_span(JobId id) const {
    return receiver_.only([&](const ReceivedSpan& s) { return is_send(s, id); });
  }
  // Waits for the process span of `id`'s attempt.
  bool await_process(JobId id, int attempt = 1, milliseconds timeout = seconds(20)) const {
    return receiver_.wait_for_count(
        [&](const ReceivedSpan& s) { return is_process(s, id, attempt); }, 1, timeout);
  }
  // For a test that expects spans not to arrive: waits until the client has completed
  // `jobs` jobs, then a while longer than the schedule delay (an attempt's span may end just
  // after its completion counts), then flushes what the exporter holds. What has not
  // arrived then never will.
  void settle(std::uint64_t jobs) {
    ASSERT_TRUE(eventually([&] { return client_->stats().completed >= jobs; }, seconds(20)))
        << client_->stats().completed << " of " << jobs << " jobs completed";
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_TRUE(client_->flush_traces(seconds(5)));
  }
  // A client with `tracing` working `n` plain jobs; how long from their insert until all
  // completed. The collector tests compare it with what waiting on the collector would
  // have cost (seconds), not with a tight bound.
  Clock::duration work_plain_jobs(const trace::ExportOptions& tracing, std::size_t n) {
    make_client(tracing);
    client_->register_worker("plain", [](JobContext&) { return JobResult::completed(); });
    start();
    const std::vector<NewJob> jobs(n, job("plain"));
    const auto began = Clock::now();
    client_->insert_many(jobs);
    EXPECT_TRUE(eventually([&] { return client_->stats().completed == n; }, seconds(30)))
        << client_->stats().completed << " of " << n << " jobs completed";
    return Clock::now() - began;
  }
  std::int64_t dropped_metric() const {
    return static_cast<std::int64_t>(
        sample(registry_, "awa_otel_spans_dropped_total").value_or(-1));
  }
  std::int64_t exported_metric() const {
    return static_cast<std::int64_t>(
        sample(registry_, "awa_otel_spans_exported_total").value_or(-1));
  }

  OtlpReceiver receiver_;
  metrics::Registry registry_;
  std::unique_ptr<Client> client_;
};

}  // namespace awa::testing
