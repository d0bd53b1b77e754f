// JSON forms of awa::Admin results: one shape for the CLI's --json output and for
// `awa serve`'s /api/ (docs/api.md). Args, metadata and progress are embedded as JSON
// (stored()); optional values are null when unset.
// Ordering keys and errors may hold arbitrary bytes: dump with
// nlohmann::json::error_handler_t::replace.
#pragma once

#include <nlohmann/json.hpp>

#include "awa/admin.hpp"

namespace awa::json {

// Stored JSON text (args, metadata, progress, a callback's result) as a value to embed:
// decoded, or the text itself as a JSON string when it has no nlohmann::json form (a
// number beyond a double's range, nesting deeper than kMaxDecodedJsonDepth) or is not
// JSON. Never throws for any text, so a display shows every row.
nlohmann::json stored(const std::string& text);

nlohmann::json of(const JobSummary& job);
// The summary's fields plus args, metadata, tags, ordering_key, lane_seq, run_lease,
// errors, progress and timeline.
nlohmann::json of(const JobDetail& job);
nlohmann::json of(const DlqEntry& entry);
// One ring: slots, last rotation / prune and the reasons of skipped attempts.
nlohmann::json of(const RingStatus& ring);
nlohmann::json of(const Health& health);

}  // namespace awa::json
