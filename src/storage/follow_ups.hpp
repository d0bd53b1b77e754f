// Follow-up jobs as close_attempts takes them (docs/workflows.md, "Follow-up jobs"): one
// JSON array per attempt, each element a job in insert_jobs_compat's form plus its
// trigger ("on": "completed" or "exhausted"); enqueue_follow_ups
// (sql/functions/0069_batches.sql) enqueues the ones whose trigger matches the end.
#pragma once

#include <span>
#include <string>

#include "awa/job.hpp"

namespace awa::storage {

// REQUIRES: every follow-up passed validate_follow_up (its args are JSON text, its
// ordering key UTF-8 text), which is why the args are embedded as they are.
std::string follow_ups_json(std::span<const FollowUp> follow_ups);

}  // namespace awa::storage
