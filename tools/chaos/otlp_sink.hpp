// The fault harness's OpenTelemetry collector: the first `awa work` process exports its
// spans here, the second to a path that refuses them (HTTP 503), so a run checks that
// tracing neither loses jobs nor holds up workers when its collector fails, and that the
// spans of jobs worked through kills, stops and server restarts still arrive whole.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace chaos {

class OtlpSink {
 public:
  OtlpSink();
  ~OtlpSink();
  OtlpSink(const OtlpSink&) = delete;
  OtlpSink& operator=(const OtlpSink&) = delete;

  // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT values: one that takes spans, one that refuses them.
  std::string accepting_url() const;
  std::string refusing_url() const;

  struct Counts {
    std::uint64_t process_spans = 0;
    std::uint64_t jobs = 0;       // distinct awa.job.id among them
    std::uint64_t malformed = 0;  // process spans without their job attributes or ids
    std::uint64_t refused_requests = 0;
  };
  Counts counts() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chaos
