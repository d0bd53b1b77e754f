// scripts/bench enqueue-contention's sweep and report (see enqueue_contention.cpp): the
// interleaved runs over every cell, and the throughput, target and wait-event tables with
// their JSON.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "enqueue_cells.hpp"
#include "pg/connection.hpp"

namespace awa::bench::contention {

// The report's ratio and formatting helpers: a missing measurement stays missing.
inline std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b <= 0) return std::nullopt;
  return *a / *b;
}

inline std::string fmt_opt(std::optional<double> v, std::string_view spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
}

inline nlohmann::json json_opt(std::optional<double> v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// One cell of the sweep and its measurements, one slot per run.
struct Cell {
  Mode mode;
  int shards;                                  // 0 for the ceilings
  std::vector<std::optional<double>> rate;     // jobs/s
  std::vector<std::optional<double>> seconds;  // timed wall time
  std::vector<std::optional<double>> wal;      // WAL bytes per job over the timed window
  std::uint64_t lane_creations_timed = 0;
  std::optional<WaitProfile> waits;  // summed over the runs that sampled this cell

  std::vector<double> rates() const {
    std::vector<double> v;
    for (const auto& r : rate) {
      if (r) v.push_back(*r);
    }
    return v;
  }
  std::vector<double> wals() const {
    std::vector<double> v;
    for (const auto& b : wal) {
      if (b) v.push_back(*b);
    }
    return v;
  }
  std::optional<double> median_wal() const {
    const auto v = wals();
    return v.empty() ? std::nullopt : std::optional<double>(median(v));
  }
  bool measured() const { return !rates().empty(); }
  double mean_rate() const { return mean(rates()); }
  double median_rate() const { return median(rates()); }
  std::string label() const {
    if (mode == Mode::kBareReady) return fmt::format("{} S={}", mode_label(), shards);
    return is_ceiling(mode) ? mode_label() : fmt::format("{} S={}", mode_name(mode), shards);
  }
  std::string mode_label() const {
    switch (mode) {
      case Mode::kCeiling:
        return "plain table (ceiling)";
      case Mode::kCeilingNotify:
        return "plain table + notify";
      case Mode::kSingleRow:
        return "raw single-row commits";
      case Mode::kBareReady:
        return "bare ready table";
      default:
        return mode_name(mode);
    }
  }
  std::string shards_label() const { return is_ceiling(mode) ? "-" : std::to_string(shards); }
};

struct Report {
  std::vector<Cell> cells;  // the order of a run: ceilings, then each mode by ascending S
  std::map<Mode, std::string> errors;  // modes that failed, and how
  double total_seconds = 0;

  const Cell& ceiling() const { return cells.front(); }
  // The raw single-row commit reference, when measured (--batch 1).
  const Cell* single_row() const { return measured(Mode::kSingleRow); }
  // The bare ready table, when measured.
  const Cell* bare_ready() const { return measured(Mode::kBareReady); }
  const Cell* measured(Mode mode) const {
    for (const auto& c : cells) {
      if (c.mode == mode) return c.measured() ? &c : nullptr;
    }
    return nullptr;
  }
  const Cell* find(Mode mode, int shards) const {
    for (const auto& c : cells) {
      if (c.mode == mode && c.shards == shards) return &c;
    }
    return nullptr;
  }
  // The S=<smallest S> cell of the same mode, for "vs S=1"; nullptr for the ceilings.
  const Cell* base_of(const Cell& c, const Options& o) const {
    return is_reference(c.mode) ? nullptr : find(c.mode, o.shards.front());
  }
};

// Runs every cell of every run, in the interleaved order. A mode whose enqueue call fails
// is reported and skipped from then on; a ceiling failure or a verification failure ends
// the sweep (nothing would be comparable, or the numbers would be wrong).
Report run_sweep(pg::Connection& admin, const Options& o, const Workload& w);

struct ThroughputJson {
  nlohmann::json results = nlohmann::json::array();  // the queue's cells
  nlohmann::json ceiling_notify = nullptr;
  nlohmann::json bare_ready = nullptr;
};

// Prints the summary and per-run tables; returns their JSON.
ThroughputJson print_throughput(const Report& report, const Options& o);

// The targets, judged on ratios within each run. Batched (--batch > 1): insert at S=8 (the
// largest S when 8 is not swept) against the plain-table ceiling (>= 0.80), and its WAL
// per job against the plain table's per row (<= 1.15). Single-job (--batch 1): insert at
// S=16 (or the largest S) against raw single-row commits (>= 0.60) and against the bare
// ready table (>= 0.90). Both: copy against insert at each S (>= 1). When the bare ready
// table was measured, the same threshold is applied to it as a bound: where the bare table
// misses it, no enqueue logic on that table can meet it.
nlohmann::json print_targets(const Report& report, const Options& o);

// The wait tables of the end cells; returns every sampled cell's waits as JSON.
nlohmann::json print_waits(const Report& report, const Options& o);

}  // namespace awa::bench::contention
