// The ledger check: what the producers committed against what the database says happened.
//
// Works on schema `awa` of the harness's own database, after the workers stopped; needs
// the rings' full history (the harness runs workers with ring rotation off, so prune never
// removes an attempt's record). Its own tables live in schema `chaos`.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "pg/connection.hpp"
#include "producers.hpp"

namespace chaos {

struct LedgerResult {
  std::int64_t jobs = 0;              // committed (including unknown commits found applied)
  std::int64_t unknown_commits = 0;   // COMMIT outcome unknown at the producer
  std::int64_t unknown_applied = 0;   // ... of which the database has the job
  std::int64_t lost = 0;              // committed, no terminal outcome
  std::int64_t lost_pending = 0;      // ... still queued / deferred / running
  std::int64_t double_finalised = 0;  // jobs with an attempt closed twice or two terminal ends
  std::int64_t phantom = 0;           // in the database, but the producer saw a rollback
  std::int64_t resurrected = 0;       // runnable again after a terminal outcome
  std::int64_t order_violations = 0;  // keyed, never retried, out of producer order
  std::int64_t keyed_checked = 0;
  std::int64_t keyed_moves = 0;               // consecutive jobs of a key on two shards
  std::int64_t keyed_moves_checked = 0;       // of those, judged (both claims recorded)
  std::int64_t lane_violations = 0;           // cursor / claim-batch / ready-row inconsistencies
  std::int64_t dependency_edges = 0;          // (parent, child) edges whose child was claimed
  std::int64_t started_before_parents = 0;    // ... claimed before that parent had ended
  std::int64_t batches_judged = 0;            // batches the producers sealed
  std::int64_t batch_callbacks_not_once = 0;  // ... without exactly one right completion job
  std::int64_t credit_jobs = 0;               // exactly-once "credit" jobs committed
  std::int64_t credits_not_once = 0;          // ... with a credit count other than its ends'
  std::int64_t completed = 0, failed = 0, cancelled = 0, dlq = 0;
  std::int64_t retried_jobs = 0;      // jobs with more than one attempt
  std::int64_t unexpected_end = 0;    // informational: e.g. a noop that ran out of attempts
  std::vector<std::string> problems;  // one line per violation found (capped)
  bool ok() const {
    return lost == 0 && double_finalised == 0 && phantom == 0 && resurrected == 0 &&
           order_violations == 0 && lane_violations == 0 && started_before_parents == 0 &&
           batch_callbacks_not_once == 0 && credits_not_once == 0;
  }
};

// Loads the producers' record into chaos.ledger (and the batches they sealed into
// chaos.batches) and resolves unknown commits by marker. Returns the number of committed
// jobs.
std::int64_t load_ledger(awa::pg::Connection& db, const std::vector<ProducedJob>& jobs,
                         const std::vector<SealedBatch>& batches = {});

// Jobs of the queue not finished yet: waiting + available + running + scheduled +
// retryable (Admin::queue_counts, exact). The drain condition.
std::int64_t unfinished(const std::string& url, const std::string& queue);

LedgerResult check_ledger(awa::pg::Connection& db, const std::string& url,
                          const std::string& queue);

// Seconds from each time to the first successful completion of an attempt claimed after
// it (claim_batches.claimed_at > t, its 'completed' closure's closed_at); negative when
// there was none.
std::vector<double> recovery_seconds(awa::pg::Connection& db,
                                     const std::vector<std::chrono::system_clock::time_point>& at);

}  // namespace chaos
