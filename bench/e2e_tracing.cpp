// scripts/bench e2e --mode tracing: what tracing costs per job. Per run, two drains of
// --jobs seeded jobs (see e2e.cpp's mode drain, warm start): one with tracing off, one with
// every attempt's "process" span recorded and exported over OTLP/HTTP JSON to a sink in
// this process (a cpp-httplib server on 127.0.0.1 that counts the bytes and answers 200,
// as a collector would; it does not parse them). The order alternates from run to run, so
// a drifting machine favours neither cell. Reports completed/s and CPU µs per job (this
// process, user + system, from the clock's start to the end of stop(), so the spans still
// queued when the last job completes are sent inside it; the sink's thread included) per cell,
// their medians with min–max, and the per-run ratios.
#include <httplib.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "e2e_runs.hpp"

namespace awa::bench {
namespace {

class Sink {
 public:
  Sink() {
    server_.Post("/v1/traces", [this](const httplib::Request& req, httplib::Response& res) {
      bytes_ += req.body.size();
      ++requests_;
      res.set_content("{}", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Sink() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}/v1/traces", port_); }
  std::uint64_t bytes() const { return bytes_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> requests_{0};
};

struct Cell {
  std::vector<double> per_s;
  std::vector<double> cpu_us_per_job;
};

}  // namespace

int run_tracing(pg::Connection& admin, const E2eSetup& st, int runs, const std::string& json_path,
                const MachineInfo& machine) {
  fmt::print(
      "e2e (tracing): per run a drain of {} jobs with tracing off and one with every attempt's "
      "span exported (OTLP/HTTP JSON to a sink in this process), alternating order; {} workers, "
      "S={}, {} run(s)\n{}\n",
      st.jobs, st.workers, st.shards, runs, machine.describe());
  Sink sink;
  Cell off, on;
  std::vector<double> ratio_per_s, extra_cpu_us;
  std::uint64_t exported = 0, dropped = 0, bytes = 0;
  nlohmann::json per_run = nlohmann::json::array();
  for (int i = 0; i < runs; ++i) {
    E2eSetup quiet = st;
    quiet.warm = true;
    quiet.sample_depth = false;
    E2eSetup traced = quiet;
    trace::ExportOptions t;
    t.enabled = true;
    t.endpoint = sink.url();
    t.service_name = "awa-bench";
    // Room for every span of the run (the SDK default is 2048): a drain records spans
    // faster than one thread sends them, and the cost measured is recording and exporting
    // them all, not dropping most.
    t.max_queue = static_cast<std::size_t>(st.jobs) * 2;
    t.schedule_delay = std::chrono::milliseconds(200);
    traced.tracing = t;
    const auto bytes0 = sink.bytes();
    RunResult r_off, r_on;
    if (i % 2 == 0) {
      r_off = run_drain(admin, quiet);
      r_on = run_drain(admin, traced);
    } else {
      r_on = run_drain(admin, traced);
      r_off = run_drain(admin, quiet);
    }
    const auto jobs = static_cast<double>(st.jobs);
    off.per_s.push_back(r_off.completed_per_s);
    on.per_s.push_back(r_on.completed_per_s);
    off.cpu_us_per_job.push_back(r_off.cpu_s * 1e6 / jobs);
    on.cpu_us_per_job.push_back(r_on.cpu_s * 1e6 / jobs);
    ratio_per_s.push_back(r_on.completed_per_s / r_off.completed_per_s);
    extra_cpu_us.push_back(on.cpu_us_per_job.back() - off.cpu_us_per_job.back());
    exported += r_on.tracing.exported;
    dropped += r_on.tracing.dropped;
    bytes += sink.bytes() - bytes0;
    fmt::print(
        "run {} ({} first): off {} jobs/s, {:.1f} µs CPU/job; on {} jobs/s, {:.1f} µs CPU/job "
        "({} spans exported, {} dropped); on/off {:.2f}; load {}\n",
        i + 1, i % 2 == 0 ? "off" : "on", thousands(r_off.completed_per_s),
        off.cpu_us_per_job.back(), thousands(r_on.completed_per_s), on.cpu_us_per_job.back(),
        r_on.tracing.exported, r_on.tracing.dropped, ratio_per_s.back(), loadavg());
    per_run.push_back({{"off_per_s", r_off.completed_per_s},
                       {"on_per_s", r_on.completed_per_s},
                       {"off_cpu_us_per_job", off.cpu_us_per_job.back()},
                       {"on_cpu_us_per_job", on.cpu_us_per_job.back()},
                       {"on_spans_exported", r_on.tracing.exported},
                       {"on_spans_dropped", r_on.tracing.dropped}});
  }
  TablePrinter table({{"drain, S=" + std::to_string(st.shards)},
                      {"jobs/s", TablePrinter::Align::kRight},
                      {"CPU µs/job", TablePrinter::Align::kRight}});
  table.add_row({"tracing off", median_range(off.per_s, "{:.0f}"),
                 median_range(off.cpu_us_per_job, "{:.1f}")});
  table.add_row({"tracing on (every span exported)", median_range(on.per_s, "{:.0f}"),
                 median_range(on.cpu_us_per_job, "{:.1f}")});
  const double span_bytes =
      exported > 0 ? static_cast<double>(bytes) / static_cast<double>(exported) : 0.0;
  fmt::print(
      "\nMedians (min–max) of {} run(s):\n{}\non/off jobs/s: {}; extra CPU per job: {} µs; "
      "{} spans exported, {} dropped, {:.0f} bytes of JSON per span\n",
      runs, table.render(), median_range(ratio_per_s, "{:.2f}"),
      median_range(extra_cpu_us, "{:.1f}"), exported, dropped, span_bytes);
  if (!json_path.empty()) {
    write_json(
        json_path,
        {{"benchmark", "e2e"},
         {"mode", "tracing"},
         {"off_per_s", median(off.per_s)},
         {"on_per_s", median(on.per_s)},
         {"on_vs_off", median(ratio_per_s)},
         {"extra_cpu_us_per_job", median(extra_cpu_us)},
         {"spans_exported", exported},
         {"spans_dropped", dropped},
         {"bytes_per_span", span_bytes},
         {"options",
          {{"jobs", st.jobs}, {"workers", st.workers}, {"shards", st.shards}, {"runs", runs}}},
         {"runs", per_run},
         {"machine", machine.to_json()}});
    fmt::print("wrote {}\n", json_path);
  }
  return 0;
}

}  // namespace awa::bench
