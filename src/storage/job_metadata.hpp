// The metadata column's value of a new job: its metadata with its trace context merged in
// (InsertOpts::trace; else the thread's trace::current() unless the metadata names a
// traceparent; inside the insert's send span, that span's context). Internal.
#pragma once

#include <optional>
#include <string>

#include "awa/job.hpp"

namespace awa::storage {

// The JSON text to store, or nullopt for NULL (no metadata and no trace context). Throws
// nlohmann::json::type_error on invalid UTF-8 (validate_job reports it first).
std::optional<std::string> metadata_text(const NewJob& job);

// The trace context metadata_text merges in, or nullptr when it stores the metadata as
// given.
const trace::Context* merged_trace(const NewJob& job);

}  // namespace awa::storage
