#include "enqueue_report.hpp"

#include <cstdio>
#include <exception>
#include <string_view>

#include <fmt/format.h>

namespace awa::bench::contention {
namespace {

constexpr std::size_t kTopWaits = 8;

// The cells whose wait tables are printed: the ceilings and the smallest and largest S of
// each mode (the JSON has every sampled cell).
bool is_end(const Options& o, const Cell& c) {
  return is_reference(c.mode) || c.shards == o.shards.front() || c.shards == o.shards.back();
}

bool sampled(const Options& o, const Cell& c) {
  switch (o.wait_cells) {
    case WaitCells::kNone:
      return false;
    case WaitCells::kAll:
      return true;
    case WaitCells::kEnds:
      return is_end(o, c);
  }
  return false;
}

void print_progress(const Report& report, const Options& o, const Cell& cell, std::size_t r,
                    const CellOutcome& out) {
  std::string suffix;
  if (cell.mode != Mode::kCeiling) {
    suffix += fmt_opt(ratio(cell.rate[r], report.ceiling().rate[r]), "  vs ceiling {:.2f}");
  }
  if (const Cell* base = report.base_of(cell, o); base != nullptr && base != &cell) {
    suffix += fmt::format("  vs S={} ", base->shards) +
              fmt_opt(ratio(cell.rate[r], base->rate[r]), "{:.2f}x");
  }
  if (const Cell* one = report.find(Mode::kSingleRow, 0);
      one != nullptr && !is_ceiling(cell.mode)) {
    suffix += fmt_opt(ratio(cell.rate[r], one->rate[r]), "  vs 1-row commits {:.2f}");
  }
  for (const auto& bare : report.cells) {
    if (bare.mode == Mode::kBareReady && !is_reference(cell.mode)) {
      suffix += fmt_opt(ratio(cell.rate[r], bare.rate[r]), "  vs bare {:.2f}");
    }
  }
  fmt::print("run {}/{}  {:<20} {:>10} jobs/s  ({} jobs in {:.2f} s){}\n", r + 1, o.runs,
             cell.label(), thousands(out.jobs_per_s), out.jobs, out.seconds, suffix);
  std::fflush(stdout);
}

struct Target {
  std::string name;
  double threshold;
  std::vector<std::optional<double>> per_run;
  std::optional<double> of_means;
  bool at_most = false;  // met when the ratio is <= threshold (WAL), else >= (throughput)

  bool met(double v) const { return at_most ? v <= threshold : v >= threshold; }
};

Target make_target(std::string name, double threshold, const Cell& a, const Cell& b) {
  Target t{std::move(name), threshold, {}, ratio(a.mean_rate(), b.mean_rate())};
  for (std::size_t r = 0; r < a.rate.size(); ++r) t.per_run.push_back(ratio(a.rate[r], b.rate[r]));
  return t;
}

// WAL per job of `a` against `b`, run by run; "of the means" is the ratio of the medians.
Target make_wal_target(std::string name, double threshold, const Cell& a, const Cell& b) {
  Target t{std::move(name), threshold, {}, ratio(a.median_wal(), b.median_wal()), true};
  for (std::size_t r = 0; r < a.wal.size(); ++r) t.per_run.push_back(ratio(a.wal[r], b.wal[r]));
  return t;
}

}  // namespace

Report run_sweep(pg::Connection& admin, const Options& o, const Workload& w) {
  Report report;
  const auto runs = static_cast<std::size_t>(o.runs);
  const auto add_cell = [&](Mode m, int shards) {
    report.cells.push_back(Cell{m, shards, std::vector<std::optional<double>>(runs),
                                std::vector<std::optional<double>>(runs),
                                std::vector<std::optional<double>>(runs), 0, std::nullopt});
  };
  add_cell(Mode::kCeiling, 0);
  if (o.notify_ceiling) add_cell(Mode::kCeilingNotify, 0);
  if (o.single_row_cell && o.batch == 1) add_cell(Mode::kSingleRow, 0);
  if (o.bare_ready_cell) add_cell(Mode::kBareReady, target_shards(o));
  for (const auto m : o.modes) {
    for (const int s : o.shards) add_cell(m, s);
  }

  const auto started = Clock::now();
  for (std::size_t r = 0; r < runs; ++r) {
    for (auto& cell : report.cells) {
      if (report.errors.count(cell.mode) != 0) continue;
      try {
        const CellOutcome out = run_cell(admin, o, w, cell.mode, cell.shards, sampled(o, cell));
        cell.rate[r] = out.jobs_per_s;
        cell.seconds[r] = out.seconds;
        cell.wal[r] = out.wal_bytes_per_job;
        cell.lane_creations_timed += out.lane_creations_timed;
        if (out.waits) {
          if (!cell.waits) cell.waits.emplace();
          cell.waits->merge(*out.waits);
        }
        print_progress(report, o, cell, r, out);
      } catch (const VerificationError&) {
        throw;
      } catch (const std::exception& e) {
        if (is_reference(cell.mode)) throw;
        auto& error = report.errors[cell.mode];
        error = fmt::format("{} (run {}): {}", cell.label(), r + 1, e.what());
        fmt::print(stderr, "ERROR: {} mode failed; skipping it from now on: {}\n",
                   mode_name(cell.mode), error);
      }
    }
  }
  report.total_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return report;
}

ThroughputJson print_throughput(const Report& report, const Options& o) {
  const auto runs = static_cast<std::size_t>(o.runs);
  const Cell& ceiling = report.ceiling();
  const Cell* one = report.single_row();
  const Cell* bare = report.bare_ready();
  const std::string vs_base = fmt::format("vs S={}", o.shards.front());
  std::vector<TablePrinter::Column> summary_columns{
      {"shards", TablePrinter::Align::kRight},
      {"mode"},
      {"mean jobs/s", TablePrinter::Align::kRight},
      {"median jobs/s", TablePrinter::Align::kRight},
      {vs_base, TablePrinter::Align::kRight},
      {"vs ceiling", TablePrinter::Align::kRight},
      {"WAL B/job", TablePrinter::Align::kRight},
      {"WAL vs ceiling", TablePrinter::Align::kRight}};
  if (one != nullptr) summary_columns.push_back({"vs 1-row commits", TablePrinter::Align::kRight});
  if (bare != nullptr) summary_columns.push_back({"vs bare ready", TablePrinter::Align::kRight});
  TablePrinter summary(std::move(summary_columns));
  std::vector<TablePrinter::Column> per_run_columns{{"shards", TablePrinter::Align::kRight},
                                                    {"mode"}};
  for (std::size_t r = 0; r < runs; ++r) {
    per_run_columns.push_back({fmt::format("run {}: jobs/s, vs ceiling, {}{}", r + 1, vs_base,
                                           one != nullptr ? ", vs 1-row commits" : ""),
                               TablePrinter::Align::kRight});
  }
  TablePrinter per_run(std::move(per_run_columns));

  ThroughputJson out;
  for (const auto& cell : report.cells) {
    if (!cell.measured()) continue;
    const Cell* base = report.base_of(cell, o);
    const std::optional<double> vs_s1 = base != nullptr && base->measured()
                                            ? ratio(cell.mean_rate(), base->mean_rate())
                                            : std::nullopt;
    const std::optional<double> vs_ceiling = ratio(cell.mean_rate(), ceiling.mean_rate());
    const std::optional<double> vs_one =
        one != nullptr ? ratio(cell.mean_rate(), one->mean_rate()) : std::nullopt;
    std::vector<std::string> summary_row{
        cell.shards_label(),
        cell.mode_label(),
        thousands(cell.mean_rate()),
        thousands(cell.median_rate()),
        fmt_opt(vs_s1, "{:.2f}x"),
        fmt_opt(vs_ceiling, "{:.2f}"),
        fmt_opt(cell.median_wal(), "{:.0f}"),
        fmt_opt(ratio(cell.median_wal(), ceiling.median_wal()), "{:.2f}")};
    if (one != nullptr) summary_row.push_back(fmt_opt(vs_one, "{:.2f}"));
    const std::optional<double> vs_bare = bare != nullptr && !is_ceiling(cell.mode)
                                              ? ratio(cell.mean_rate(), bare->mean_rate())
                                              : std::nullopt;
    if (bare != nullptr) summary_row.push_back(fmt_opt(vs_bare, "{:.2f}"));
    summary.add_row(std::move(summary_row));

    std::vector<std::string> row{cell.shards_label(), cell.mode_label()};
    nlohmann::json rate_runs = nlohmann::json::array(), seconds_runs = nlohmann::json::array(),
                   vs_s1_runs = nlohmann::json::array(), vs_ceiling_runs = nlohmann::json::array(),
                   vs_one_runs = nlohmann::json::array(), vs_bare_runs = nlohmann::json::array(),
                   wal_runs = nlohmann::json::array();
    for (std::size_t r = 0; r < runs; ++r) {
      const auto rc = ratio(cell.rate[r], ceiling.rate[r]);
      const auto rs = base != nullptr ? ratio(cell.rate[r], base->rate[r]) : std::nullopt;
      const auto r1 = one != nullptr ? ratio(cell.rate[r], one->rate[r]) : std::nullopt;
      std::string text = "-";
      if (cell.rate[r]) {
        text = fmt::format("{} / {} / {}", thousands(*cell.rate[r]), fmt_opt(rc, "{:.2f}"),
                           fmt_opt(rs, "{:.2f}x"));
        if (one != nullptr) text += " / " + fmt_opt(r1, "{:.2f}");
      }
      row.push_back(std::move(text));
      rate_runs.push_back(json_opt(cell.rate[r]));
      seconds_runs.push_back(json_opt(cell.seconds[r]));
      wal_runs.push_back(json_opt(cell.wal[r]));
      vs_s1_runs.push_back(json_opt(rs));
      vs_ceiling_runs.push_back(json_opt(rc));
      vs_one_runs.push_back(json_opt(r1));
      vs_bare_runs.push_back(json_opt(bare != nullptr && !is_reference(cell.mode)
                                          ? ratio(cell.rate[r], bare->rate[r])
                                          : std::nullopt));
    }
    per_run.add_row(std::move(row));

    nlohmann::json entry{{"mode", mode_name(cell.mode)},
                         {"jobs_per_s", cell.mean_rate()},
                         {"median_jobs_per_s", cell.median_rate()},
                         {"vs_ceiling", json_opt(vs_ceiling)},
                         {"runs_jobs_per_s", rate_runs},
                         {"runs_seconds", seconds_runs},
                         {"runs_vs_ceiling", vs_ceiling_runs},
                         {"wal_bytes_per_job", json_opt(cell.median_wal())},
                         {"runs_wal_bytes_per_job", wal_runs}};
    if (cell.mode == Mode::kCeilingNotify) out.ceiling_notify = std::move(entry);
    if (cell.mode == Mode::kBareReady) {
      entry["shards"] = cell.shards;
      out.bare_ready = std::move(entry);
    }
    if (is_reference(cell.mode)) continue;
    if (bare != nullptr) {
      entry["vs_bare_ready"] = json_opt(vs_bare);
      entry["runs_vs_bare_ready"] = vs_bare_runs;
    }
    if (one != nullptr) {
      entry["vs_single_row_commit"] = json_opt(vs_one);
      entry["runs_vs_single_row_commit"] = vs_one_runs;
    }
    entry["shards"] = cell.shards;
    entry["vs_s1"] = json_opt(vs_s1);
    entry["runs_vs_s1"] = vs_s1_runs;
    entry["lane_creations_timed"] = cell.lane_creations_timed;
    out.results.push_back(std::move(entry));
  }

  fmt::print("\nThroughput ({} runs; mean and median across runs; ratios of the means)\n\n{}", runs,
             summary.render());
  fmt::print("\nPer run (ratios within the run)\n\n{}", per_run.render());
  return out;
}

nlohmann::json print_targets(const Report& report, const Options& o) {
  std::vector<Target> targets;
  const int target_s = target_shards(o);
  const Cell* bare = report.bare_ready();
  const auto add = [&](std::string_view yardstick, double threshold, const Cell& against) {
    if (const Cell* c = report.find(Mode::kInsert, target_s); c != nullptr && c->measured()) {
      targets.push_back(
          make_target(fmt::format("insert S={} >= {:.2f} x {}", target_s, threshold, yardstick),
                      threshold, *c, against));
    }
    if (bare != nullptr) {
      targets.push_back(make_target(
          fmt::format("(bound) bare ready S={} >= {:.2f} x {}", bare->shards, threshold, yardstick),
          threshold, *bare, against));
    }
  };
  if (o.batch > 1) {
    add("plain-table ceiling", 0.80, report.ceiling());
    if (const Cell* c = report.find(Mode::kInsert, target_s); c != nullptr && c->measured()) {
      targets.push_back(
          make_wal_target(fmt::format("insert S={} WAL/job <= 1.15 x plain table's", target_s),
                          1.15, *c, report.ceiling()));
    }
  } else if (const Cell* one = report.single_row(); one != nullptr) {
    add("raw single-row commits", 0.60, *one);
    const Cell* c = report.find(Mode::kInsert, target_s);
    if (bare != nullptr && c != nullptr && c->measured()) {
      targets.push_back(
          make_target(fmt::format("insert S={} >= 0.90 x bare ready S={}", target_s, bare->shards),
                      0.90, *c, *bare));
    }
  }
  for (const int s : o.shards) {
    const Cell* ins = report.find(Mode::kInsert, s);
    const Cell* cp = report.find(Mode::kCopy, s);
    if (ins == nullptr || cp == nullptr || !ins->measured() || !cp->measured()) continue;
    targets.push_back(make_target(fmt::format("copy S={} >= insert S={}", s, s), 1.0, *cp, *ins));
  }

  nlohmann::json out = nlohmann::json::array();
  if (targets.empty()) return out;
  TablePrinter table({{"target"},
                      {"per run", TablePrinter::Align::kRight},
                      {"of the means", TablePrinter::Align::kRight},
                      {"met in runs", TablePrinter::Align::kRight}});
  for (const auto& t : targets) {
    std::string per;
    int met = 0;
    int measured = 0;
    nlohmann::json per_json = nlohmann::json::array();
    for (const auto& v : t.per_run) {
      if (!per.empty()) per += ' ';
      per += fmt_opt(v, "{:.2f}");
      per_json.push_back(json_opt(v));
      if (!v) continue;
      ++measured;
      if (t.met(*v)) ++met;
    }
    table.add_row(
        {t.name, per, fmt_opt(t.of_means, "{:.2f}"), fmt::format("{}/{}", met, measured)});
    out.push_back({{"target", t.name},
                   {"threshold", t.threshold},
                   {"runs", per_json},
                   {"of_means", json_opt(t.of_means)},
                   {"met_runs", met},
                   {"measured_runs", measured}});
  }
  fmt::print("\nTargets (ratio within each run)\n\n{}", table.render());
  return out;
}

nlohmann::json print_waits(const Report& report, const Options& o) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& cell : report.cells) {
    if (!cell.waits) continue;
    auto j = cell.waits->to_json(kTopWaits);
    j["mode"] = mode_name(cell.mode);
    if (!is_ceiling(cell.mode)) j["shards"] = cell.shards;
    out.push_back(std::move(j));
    if (!is_end(o, cell)) continue;
    fmt::print(
        "\nWait events, {} (producer backends; {} samples in {} polls every {} ms over {} "
        "runs)\n\n{}",
        cell.label(), thousands(static_cast<double>(cell.waits->samples)),
        thousands(static_cast<double>(cell.waits->polls)), o.sample_ms, o.runs,
        cell.waits->render(kTopWaits));
  }
  return out;
}

}  // namespace awa::bench::contention
