// Periodic jobs on internal connections (include/awa/periodic.hpp is the public side):
// the maintenance leader's fire call and Client::start()'s declaration.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "awa/periodic.hpp"
#include "pg/connection.hpp"

namespace awa::storage {

// One row of fire_due_periodic: a job enqueued (job_id set) or a schedule whose fire
// failed (error set; the schedule was not advanced).
struct PeriodicFire {
  std::string name;
  std::optional<std::string> occurrence;  // ISO 8601 UTC
  std::optional<JobId> job_id;
  std::optional<std::string> error;
};

// fire_due_periodic (sql/functions/0110_periodic.sql) in one statement, so one
// transaction: at most `limit` schedules, `catch_up_limit` jobs per catch-up schedule.
std::vector<PeriodicFire> fire_due_periodic(pg::Connection& conn, const std::string& schema,
                                            int limit, int catch_up_limit);

// PeriodicAdmin::declare on an internal connection.
std::vector<PeriodicUpsert> declare_periodic(pg::Connection& conn, const std::string& schema,
                                             std::span<const PeriodicJob> jobs);

}  // namespace awa::storage
