#include "storage/validate.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/error.hpp"

namespace awa::storage {
namespace {

bool queue_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '-';
}

// jsonb cannot store U+0000; PostgreSQL would reject the row (22P05) and abort the
// caller's transaction. Backslashes occur only inside JSON strings, each starting a
// two-character escape (or \uXXXX), so a linear scan finds \u0000 exactly.
bool has_nul_escape(std::string_view json) {
  for (std::size_t i = 0; i + 1 < json.size(); ++i) {
    if (json[i] != '\\') continue;
    if (json[i + 1] == 'u' && json.substr(i + 2, 4) == "0000") return true;
    ++i;  // skip the escaped character (an escaped backslash must not start a new escape)
  }
  return false;
}

}  // namespace

void validate_queue_name(std::string_view queue) {
  if (queue.empty() || queue.size() > kMaxNameBytes ||
      !std::all_of(queue.begin(), queue.end(), queue_char)) {
    throw InvalidArgument(
        fmt::format("invalid queue name \"{}\": use 1..{} characters from A-Z a-z 0-9 _ . : -",
                    queue, kMaxNameBytes));
  }
}

void validate_job(const NewJob& job, std::size_t index) {
  const auto fail = [&](const std::string& what) {
    throw InvalidArgument(fmt::format("job {} (kind \"{}\"): {}", index, job.kind, what));
  };
  if (job.kind.empty() || job.kind.size() > kMaxNameBytes) {
    fail(fmt::format("kind must be 1..{} bytes", kMaxNameBytes));
  }
  try {
    validate_queue_name(job.opts.queue);
  } catch (const InvalidArgument& e) {
    fail(e.what());
  }
  if (job.opts.priority < 1 || job.opts.priority > 4) {
    fail(fmt::format("priority {} is outside 1..4", job.opts.priority));
  }
  if (job.opts.max_attempts < 1 || job.opts.max_attempts > 1000) {
    fail(fmt::format("max_attempts {} is outside 1..1000", job.opts.max_attempts));
  }
  if (job.opts.ordering_key && job.opts.ordering_key->size() > kMaxOrderingKeyBytes) {
    fail(fmt::format("ordering_key is {} bytes; the limit is {}", job.opts.ordering_key->size(),
                     kMaxOrderingKeyBytes));
  }
  if (!nlohmann::json::accept(job.args_json)) {
    fail("args are not valid JSON");
  }
  if (has_nul_escape(job.args_json)) {
    fail("args contain \\u0000, which PostgreSQL's jsonb cannot store");
  }
  if (!job.opts.metadata.is_null() && !job.opts.metadata.is_object()) {
    fail("metadata must be a JSON object");
  }
}

}  // namespace awa::storage
