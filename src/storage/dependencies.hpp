// The maintenance leader's and the handlers' side of job dependencies
// (sql/functions/0067_dependencies.sql; docs/workflows.md, "Dependencies"). Internal.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "awa/job.hpp"
#include "pg/connection.hpp"

namespace awa::storage {

// Re-checks at most `limit` waiting jobs committed since the last call: a parent that
// ended while a child's transaction was still open is applied now. Returns the number of
// jobs checked (0: none was new).
int verify_waiting_jobs(pg::Connection& conn, const std::string& quoted_schema, int limit);

// Deletes dependency edges applied longer than `keep` ago whose child no longer waits, and
// batches finished longer than `keep` ago with their members. Returns the rows deleted.
int purge_dependencies(pg::Connection& conn, const std::string& quoted_schema,
                       std::chrono::seconds keep);

// The results of `job`'s parents that completed with one, as (parent id, JSON text), by
// parent id.
std::vector<std::pair<JobId, std::string>> parent_results(pg::Connection& conn,
                                                          const std::string& quoted_schema,
                                                          JobId job);

}  // namespace awa::storage
