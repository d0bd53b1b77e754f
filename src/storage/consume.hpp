// The consumer side of the engine: claim, completion, promotion.
// SQL lives in sql/queries/consume/ and sql/functions/; this file only binds it.
//
// Thread safety: a Consumer is immutable; each call uses only the connection passed in.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "awa/job.hpp"
#include "awa/metrics.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"

namespace awa::storage {

// Exponential backoff with jitter for retryable failures: 2^(attempt-1) seconds, capped
// at 24 hours, scaled by a factor in [0.5, 1.0] drawn from `random` — jitter spreads a
// burst of failures so the retries do not arrive as the same burst.
std::chrono::milliseconds retry_backoff(int attempt, std::uint64_t random);

class Consumer {
 public:
  // Counts into `metrics` (its registry must outlive the consumer).
  Consumer(const std::string& quoted_schema, metrics::EngineMetrics& metrics);

  std::vector<ClaimedEntry> claim(pg::Connection& conn, const std::string& queue,
                                  const QueueStorage::ClaimOptions& options = {}) const;
  std::vector<CompletionResult> complete(pg::Connection& conn,
                                         std::span<const Completion> completions) const;
  int promote_due(pg::Connection& conn, int limit = 1000) const;
  int release(pg::Connection& conn, std::span<const ClaimedEntry> entries,
              std::string_view reason) const;
  std::vector<std::pair<JobId, std::int64_t>> heartbeat(
      pg::Connection& conn, std::span<const QueueStorage::Heartbeat> beats) const;
  std::vector<QueueStorage::Rescued> rescue(pg::Connection& conn, std::chrono::milliseconds stale,
                                            int limit = 1000) const;
  // QueueStorage::finalize_in.
  void finalize_in(pg::Connection& conn, const ClaimedEntry& entry,
                   const std::optional<std::string>& result_json) const;
  // register_callback (park = false) and wait_for_callback (park = true) of QueueStorage.
  std::optional<std::string> callback(pg::Connection& conn, const ClaimedEntry& entry,
                                      std::optional<std::chrono::milliseconds> timeout,
                                      bool park) const;

 private:
  metrics::EngineMetrics& metrics_;
  std::string claim_sql_;
  std::string complete_sql_;
  std::string complete_results_sql_;
  std::string complete_follow_ups_sql_;
  std::string finalize_sql_;
  std::string promote_sql_;
  std::string release_sql_;
  std::string heartbeat_sql_;
  std::string rescue_sql_;
  std::string callback_sql_;
};

}  // namespace awa::storage
