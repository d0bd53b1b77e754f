// scripts/bench enqueue-contention's cells (see enqueue_contention.cpp for what the
// benchmark measures): the workload, the write paths and references, and one timed cell
// with its verification.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "awa/job.hpp"
#include "bench_common.hpp"
#include "pg/connection.hpp"

namespace awa::bench::contention {

inline constexpr std::string_view kQueue = "bench";
inline constexpr int kPriority = 2;
inline constexpr std::string_view kKind = "bench";
inline constexpr std::size_t kWarmupJobs = 10;

// kCeilingNotify is a diagnostic: the ceiling's INSERT, then after its commit the pg_notify
// statement the enqueue path sends, with every batch (the enqueue path coalesces them). It
// bounds what the notification costs apart from the queue's own tables and locks.
// kSingleRow is the raw single-row commit reference (one row per transaction, whatever
// --batch says), measured when --batch is 1.
// kBareReady is the bare ready table (see the top of enqueue_contention.cpp), measured at the S of
// the target (8 batched, 16 single-job, or the largest S swept).
enum class Mode { kCeiling, kCeilingNotify, kSingleRow, kBareReady, kInsert, kCopy };

// The plain-table references.
bool is_ceiling(Mode m);
// Every cell that is not the queue's own enqueue path.
bool is_reference(Mode m);
const char* mode_name(Mode m);

// Which cells the wait sampler watches. Sampling costs the server a little CPU, so by
// default every cell pays it alike and the ratios between cells stay fair.
enum class WaitCells { kAll, kEnds, kNone };

struct Options {
  std::vector<int> shards{1, 2, 4, 8};
  std::string shards_source = "--shards";
  int producers = 16;
  int jobs_per_producer = 15000;
  int batch = 500;
  std::vector<Mode> modes{Mode::kInsert, Mode::kCopy};
  int runs = 3;
  std::string json_path;
  WaitCells wait_cells = WaitCells::kAll;
  int sample_ms = 5;
  int statement_timeout_s = 120;
  bool checkpoint = true;
  bool notify_ceiling = true;
  bool single_row_cell = true;  // measured only when batch == 1
  bool bare_ready_cell = true;
};

// The S that issue 11's target names (8 batched, 16 single-job), or the largest S swept.
int target_shards(const Options& o);

// A verification failure: the benchmark measured something other than it claims.
class VerificationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Workload {
  std::vector<std::vector<NewJob>> timed;   // per producer: jobs_per_producer jobs
  std::vector<std::vector<NewJob>> warmup;  // per producer: warm-up batches, flattened
  std::size_t warmup_batches = 1;
  std::uint64_t timed_jobs = 0;
  std::uint64_t warmup_jobs = 0;
};

// Per producer: the timed jobs, and enough warm-up batches that every lane exists before
// timing starts.
Workload make_workload(const Options& o);

struct CellOutcome {
  double jobs_per_s = 0;
  double seconds = 0;
  std::uint64_t jobs = 0;
  std::uint64_t lane_creations_timed = 0;  // should be 0: warm-up creates every lane
  // WAL written over the timed window (pg_current_wal_lsn at the release and after the
  // last producer returned) per timed job. The cluster's WAL: nothing else should write.
  double wal_bytes_per_job = 0;
  std::optional<WaitProfile> waits;
};

// One timed cell in a fresh schema: warm-up, the producers' timed batches, then the
// verification (row count, and the shards the rows landed on). Throws VerificationError
// when the rows are not where they should be.
CellOutcome run_cell(pg::Connection& admin, const Options& o, const Workload& w, Mode mode,
                     int shards, bool sample);

}  // namespace awa::bench::contention
