// scripts/bench e2e --mode pooler: the runtime direct vs through a transaction pooler
// (see e2e.cpp's header and docs/deployment.md). Three cells per run, each a drain of
// --jobs seeded jobs (completed/s) and an idle-pickup rate run at 200 jobs/s for
// --seconds (pickup and e2e percentiles); medians over the runs.
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "e2e_runs.hpp"

namespace awa::bench {
namespace {

constexpr int kIdleRate = 200;

struct Cell {
  std::string name;
  bool pooled = false;
  bool direct = false;
  std::vector<double> drain_per_s;
  std::vector<double> pickup_p50, pickup_p95, pickup_p99, e2e_p50;
  std::vector<double> claims_ms;  // mean claim call during the drain
};

std::string ms(const std::vector<double>& v) {
  return v.empty() ? std::string("–") : fmt::format("{:.2f}", median(v));
}

}  // namespace

int run_pooler(pg::Connection& admin, const E2eSetup& st, int runs, const std::string& json_path,
               const MachineInfo& machine) {
  fmt::print(
      "e2e (pooler): per run a drain of {} jobs and {} s of idle pickup at {} jobs/s; {} "
      "workers, {} shards, poll {} ms; the Client direct, through the pooler with a direct "
      "URL, and through it poll-only; {} run(s)\n{}\n",
      st.jobs, st.seconds, kIdleRate, st.workers, st.shards, st.poll_ms > 0 ? st.poll_ms : 1000,
      runs, machine.describe());
  std::vector<Cell> cells(3);
  cells[0].name = "direct";
  cells[1].name = "pooler + direct URL";
  cells[1].pooled = cells[1].direct = true;
  cells[2].name = "pooler, poll-only";
  cells[2].pooled = true;
  for (int i = 0; i < runs; ++i) {
    for (auto& c : cells) {
      E2eSetup s = st;
      s.pooled_url = c.pooled ? st.pooled_url : std::string();
      s.direct = c.direct;
      const auto d = run_drain(admin, s);
      c.drain_per_s.push_back(d.completed_per_s);
      c.claims_ms.push_back(d.claim_ms_mean);
      s.rate = kIdleRate;
      s.producers = 1;
      s.batch = 1;
      const auto r = run_rate(admin, s);
      if (r.pickup_ms) {
        c.pickup_p50.push_back(r.pickup_ms->p50);
        c.pickup_p95.push_back(r.pickup_ms->p95);
        c.pickup_p99.push_back(r.pickup_ms->p99);
      }
      if (r.e2e_ms) c.e2e_p50.push_back(r.e2e_ms->p50);
      fmt::print(
          "run {} {}: drain {} jobs/s (claims {:.2f} ms mean), pickup p50 {:.2f} ms p95 {:.2f} "
          "ms; load {}\n",
          i + 1, c.name, thousands(d.completed_per_s), d.claim_ms_mean,
          r.pickup_ms ? r.pickup_ms->p50 : -1.0, r.pickup_ms ? r.pickup_ms->p95 : -1.0, loadavg());
    }
  }

  TablePrinter table({{"client connections"},
                      {"drain/s", TablePrinter::Align::kRight},
                      {"vs direct", TablePrinter::Align::kRight},
                      {"claim ms", TablePrinter::Align::kRight},
                      {"pickup p50", TablePrinter::Align::kRight},
                      {"p95", TablePrinter::Align::kRight},
                      {"p99", TablePrinter::Align::kRight},
                      {"e2e p50", TablePrinter::Align::kRight}});
  const double direct_drain = median(cells[0].drain_per_s);
  nlohmann::json json_cells = nlohmann::json::array();
  for (const auto& c : cells) {
    const double drain = median(c.drain_per_s);
    table.add_row({c.name, thousands(drain), fmt::format("{:.2f}", drain / direct_drain),
                   ms(c.claims_ms), ms(c.pickup_p50), ms(c.pickup_p95), ms(c.pickup_p99),
                   ms(c.e2e_p50)});
    const auto med = [](const std::vector<double>& v) {
      return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(median(v));
    };
    json_cells.push_back(
        {{"cell", c.name},
         {"pooled", c.pooled},
         {"direct_url", c.direct},
         {"drain_per_s", drain},
         {"drain_vs_direct", drain / direct_drain},
         {"claim_ms_mean", med(c.claims_ms)},
         {"pickup_ms",
          {{"p50", med(c.pickup_p50)}, {"p95", med(c.pickup_p95)}, {"p99", med(c.pickup_p99)}}},
         {"e2e_ms_p50", med(c.e2e_p50)},
         {"drain_runs", c.drain_per_s},
         {"pickup_p50_runs", c.pickup_p50}});
  }
  fmt::print("\nMedians of {} run(s), latencies in ms:\n{}\n", runs, table.render());
  const nlohmann::json doc{{"benchmark", "e2e"},
                           {"mode", "pooler"},
                           {"cells", json_cells},
                           {"options",
                            {{"jobs", st.jobs},
                             {"seconds", st.seconds},
                             {"idle_rate", kIdleRate},
                             {"workers", st.workers},
                             {"shards", st.shards},
                             {"poll_ms", st.poll_ms},
                             {"runs", runs}}},
                           {"loadavg_at_end", loadavg()},
                           {"machine", machine.to_json()}};
  fmt::print("{}\n", doc.dump());
  if (!json_path.empty()) {
    write_json(json_path, doc);
    fmt::print("wrote {}\n", json_path);
  }
  return 0;
}

}  // namespace awa::bench
