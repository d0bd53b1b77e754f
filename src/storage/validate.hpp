// Producer input validation: the rules of the SQL function validate_job
// (sql/functions/0010_routing.sql) plus what PostgreSQL could only reject mid-batch
// (invalid UTF-8, NUL bytes, \u0000 in jsonb) and the size limits of include/awa/job.hpp.
// Throws awa::InvalidArgument naming the job and field; never touches the database.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "awa/job.hpp"

namespace awa::storage {

void validate_queue_name(std::string_view queue);
// `index` is the job's position in its batch, for the message.
void validate_job(const NewJob& job, std::size_t index);

// A JSON document the caller hands over as text (an external callback's result): valid
// JSON, at most `limit` bytes, no \u0000. Throws InvalidArgument starting with `what`.
void validate_json_text(std::string_view what, std::string_view json, std::size_t limit);

// `text` for an error message: at most `limit` bytes, control characters and invalid
// UTF-8 shown as \xNN.
std::string printable(std::string_view text, std::size_t limit = 64);

}  // namespace awa::storage
