// The insert path of batch members (InsertOpts::batch; docs/workflows.md, "Batches").
//
// The jobs are written by the usual paths (with the batch left out), then each batch's new
// members are recorded by one add_batch_members statement (sql/functions/0069_batches.sql),
// all in one transaction (the caller's, or one of the call's own): a missing or sealed
// batch rolls the whole call back. Calls without batch members never come here.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "awa/job.hpp"
#include "pg/connection.hpp"

namespace awa::storage {

bool any_batch(std::span<const NewJob> jobs);

// Validates every job (InvalidArgument, nothing written), writes them all through `rest`
// without their batch, then records the members of each batch, in batch-name order.
// Results in input order.
std::vector<InsertResult> insert_with_batches(
    pg::Connection& conn, std::span<const NewJob> jobs, const std::string& add_members_sql,
    const std::function<std::vector<InsertResult>(std::span<const NewJob>)>& rest);

}  // namespace awa::storage
