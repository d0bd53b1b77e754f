// The insert path of unique jobs (InsertOpts::unique; docs/scheduling.md "Unique jobs").
//
// A lone unique job is one statement: insert_job_compat with p_unique, which computes the
// unique key, claims it (claim_unique_key: concurrent inserters of one key serialise on
// its row) and enqueues through the SQL producer only when no equal job holds the key.
// A call with several jobs claims its keys first and writes its jobs through the bulk
// path (insert_with_unique). Keys are computed in SQL only (unique_key), so the C++
// producer and SQL callers of insert_job_compat agree by construction.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "awa/job.hpp"
#include "awa/metrics.hpp"
#include "pg/connection.hpp"

namespace awa::storage {

// The unique options as insert_job_compat's p_unique takes them.
std::string unique_json(const UniqueOpts& unique);

class UniqueInserter {
 public:
  // Counts into `metrics` (its registry must outlive the inserter).
  UniqueInserter(const std::string& quoted_schema, metrics::EngineMetrics& metrics);
  // REQUIRES: job.opts.unique is set and job passed validate_job. Runs in the caller's
  // transaction, or as one self-committing statement.
  InsertResult insert(pg::Connection& conn, const NewJob& job) const;

  // The statements of insert_with_unique's calls with several jobs.
  const std::string& claim_keys_sql() const { return claim_keys_sql_; }
  const std::string& set_holders_sql() const { return set_holders_sql_; }

 private:
  metrics::EngineMetrics& metrics_;
  std::string sql_;
  std::string claim_keys_sql_;
  std::string set_holders_sql_;
};

bool any_unique(std::span<const NewJob> jobs);

// One step of the leader's purge of unique keys whose holder left the key's states
// (purge_unique_keys in sql/functions/0025_unique.sql): scans at most `limit` keys after
// `after` (in key order; unset: from the start) and deletes the freed ones.
struct UniquePurge {
  int purged = 0;
  std::optional<std::string> next;  // where the next step starts; unset: from the start
};
UniquePurge purge_unique_keys(pg::Connection& conn, const std::string& quoted_schema,
                              const std::optional<std::string>& after, int limit);

// A call with unique jobs: validates every job (InvalidArgument, nothing written). One job
// alone goes through UniqueInserter::insert. Several: (1) claims every unique job's key in
// key order (claim_unique_keys) before any lane lock, (2) writes the jobs that are not
// duplicates — unique or not — with one call of `bulk`, which takes the lanes in their
// global order, (3) names the claimed keys' jobs (set_unique_key_holders). Keys before
// lanes, each in one global order: two such calls cannot deadlock on each other. All in
// one transaction (the caller's, or one of its own). Results in input order; a job equal
// to an earlier one of the same call is a duplicate of it.
std::vector<InsertResult> insert_with_unique(
    pg::Connection& conn, std::span<const NewJob> jobs, const UniqueInserter& unique,
    const std::function<std::vector<JobId>(std::span<const NewJob>)>& bulk);

}  // namespace awa::storage
