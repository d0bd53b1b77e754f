// Producer threads: transactional enqueue through the public API (awa::QueueStorage on an
// awa::Connection) of keyed and unkeyed jobs, through faults. A transaction makes one to
// four enqueue calls (insert() and insert_many(), keyed and unkeyed mixed), the way an
// order handler enqueues one job per line, so lane lock order across calls is exercised.
//
// Failures are sorted: a lost connection or a server shutting down (SQLSTATE classes 08
// and 57P, awa::ConnectionError) is what the faults cause; anything else a producer sees
// (a 40P01 deadlock, a constraint or data error) is a producer error, counted and kept
// as a message, and the harness fails on any.
//
// A job counts as committed only when its COMMIT returned success. When the COMMIT itself
// failed (the connection dropped mid-commit, the server crashed) the outcome is unknown:
// the job is recorded as such with its unique marker (args "m") and resolved later by
// looking the marker up (ledger.cpp). A producer never re-sends such a job, so a marker
// names at most one job. Errors before COMMIT mean nothing was committed.
//
// Batches (docs/workflows.md, "Batches"): a producer keeps at most one open batch. One
// transaction in eight, when it has none, it opens one (WorkflowAdmin::open_batch, an
// autocommit statement of its own) named c-p<producer>-<n>, whose completion job is a
// kBatchCallbackKind on the producers' queue; its next one to three transactions put some
// of their jobs in it (InsertOpts::batch), and then it seals it (autocommit; sealing again
// changes nothing). An open or a seal whose outcome a fault made unknown is retried: the
// open after looking the batch up (WorkflowAdmin::batch; SQLSTATE 23505 also says it
// exists), the seal as it is. A member job is recorded like any other, with its batch's
// name; a transaction with an unknown outcome takes its memberships with it. A batch
// counts as sealed (SealedBatch) only once a seal returned success; stop() seals the open
// one, bounded.
//
// Thread safety: start() / stop() / results() from one thread; results() after stop().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace chaos {

// Whether a failure is one the faults cause: the connection was lost or refused, or the
// server is shutting down, restarting or recovering.
bool caused_by_fault(const std::exception& e);

// Sleeps up to `d`, returning early when `stop` is set.
void nap(const std::atomic<bool>& stop, std::chrono::milliseconds d);

enum class CommitState { kCommitted, kUnknown };

// The completion job's kind: a built-in kind of `awa work` (which has no kind of its own
// for it), told apart from the producers' jobs by its args, which carry "batch" (the
// producers' never do) and no marker "m".
inline constexpr const char* kBatchCallbackKind = "noop";

struct ProducedJob {
  std::int64_t job_id = 0;  // as insert returned it (also for an unknown commit)
  int producer = 0;
  std::int64_t seq = 0;  // the producer's enqueue order (a producer commits serially)
  std::string marker;    // unique in the run; args "m"
  std::string kind;
  std::optional<std::string> ordering_key;
  CommitState commit = CommitState::kCommitted;
  std::optional<std::string> batch;  // the batch it joined (InsertOpts::batch), if any
};

// A batch a producer sealed (its seal returned success).
struct SealedBatch {
  std::string name;
  int producer = 0;  // also the completion job's args "p" (given at open)
};

struct ProducerOptions {
  std::string url;
  std::string queue;
  int producers = 3;
  // Target enqueue transactions per second per producer.
  double rate = 20.0;
  std::uint64_t seed = 1;
  // Where a few jobs of kind "credit" go (the exactly-once worker's queue); empty: none.
  std::string credit_queue;
};

struct ProducerStats {
  std::int64_t committed = 0;    // jobs
  std::int64_t unknown = 0;      // jobs whose COMMIT outcome is unknown
  std::int64_t rolled_back = 0;  // transactions that failed before COMMIT
  std::int64_t reconnects = 0;
  std::int64_t errors = 0;  // producer errors: failures the faults do not explain
  std::int64_t batches_opened = 0;
  std::int64_t batches_sealed = 0;
  std::int64_t batch_members = 0;     // jobs committed (or unknown) as members of a batch
  std::vector<std::string> messages;  // the first few producer errors, for the report
};

class Producers {
 public:
  explicit Producers(ProducerOptions options);
  ~Producers();
  Producers(const Producers&) = delete;
  Producers& operator=(const Producers&) = delete;

  void start();
  void stop();  // signals and joins; bounded by the connect timeout
  std::vector<ProducedJob> results() const;
  std::vector<SealedBatch> sealed_batches() const;
  ProducerStats stats() const;

 private:
  void run(int index);

  ProducerOptions options_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  // One per producer, written only by its thread until stop() joined it.
  std::vector<std::vector<ProducedJob>> jobs_;
  std::vector<std::vector<SealedBatch>> sealed_;
  std::vector<ProducerStats> stats_;
};

}  // namespace chaos
