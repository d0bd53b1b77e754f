// The insert path of jobs with parents (InsertOpts::after / after_in_call;
// docs/workflows.md, "Dependencies").
//
// Each such job is one statement, enqueue_after (sql/functions/0067_dependencies.sql),
// which checks that its parents exist, records an edge per parent and either keeps the
// job waiting or releases it at once. Plain jobs of the same call go through the usual
// paths first, so a job can name them as parents; calls without parents never come here.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "awa/job.hpp"
#include "awa/metrics.hpp"
#include "pg/connection.hpp"

namespace awa::storage {

class AfterInserter {
 public:
  // Counts into `metrics` (its registry must outlive the inserter).
  AfterInserter(const std::string& quoted_schema, metrics::EngineMetrics& metrics);
  // REQUIRES: job passed validate_job; `parents` are its parents' ids (after and the ids
  // after_in_call resolved to). Runs in the caller's transaction.
  JobId insert(pg::Connection& conn, const NewJob& job, const std::vector<JobId>& parents) const;

 private:
  metrics::EngineMetrics& metrics_;
  std::string sql_;
};

bool any_parents(std::span<const NewJob> jobs);

// A call with jobs that have parents: validates every job (InvalidArgument, nothing
// written), then in one transaction (the caller's, or one of its own) writes the jobs
// without parents through `rest` and then each job with parents in call order, so
// after_in_call can name any earlier job of the call. Results in input order.
std::vector<InsertResult> insert_with_parents(
    pg::Connection& conn, std::span<const NewJob> jobs, const AfterInserter& after,
    const std::function<std::vector<InsertResult>(std::span<const NewJob>)>& rest);

}  // namespace awa::storage
