// Producer input validation: the same rules as the SQL function validate_job
// (sql/functions/0010_routing.sql). Throws awa::InvalidArgument naming the job and field.
#pragma once

#include <cstddef>
#include <string_view>

#include "awa/job.hpp"

namespace awa::storage {

void validate_queue_name(std::string_view queue);
// `index` is the job's position in its batch, for the message.
void validate_job(const NewJob& job, std::size_t index);

}  // namespace awa::storage
