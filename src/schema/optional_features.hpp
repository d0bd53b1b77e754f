// The function set without its optional features, for measuring what plain jobs pay for
// them (AWA_BENCH_FEATURES=off in the benchmarks, docs/benchmarks.md "Optional features
// off").
//
// A function file marks the code of an optional feature (a rate limit, a concurrency
// limit, priority aging, attempt deadlines, unique keys) as a block:
//
//     -- optional(limits) {
//     IF v_max_rate IS NOT NULL THEN ... END IF;
//     --off <a line that stands in for the block>
//     -- optional }
//
// Stripped, a block keeps only its "--off" lines, without that prefix; everything else
// in it goes. The marks are comments, so the installed functions are the files as
// written. Blocks do not nest.
#pragma once

#include <string>
#include <string_view>

namespace awa::pg {
class Connection;
}

namespace awa::schema {

// `text` with every optional block replaced by its "--off" lines. Throws
// awa::InvalidArgument for an unbalanced or nested mark, naming the line.
std::string strip_optional_features(std::string_view text);

// Re-installs, in `schema` (already migrated by this build), every function file that has
// optional blocks, stripped. Returns how many files it installed. The schema's catalogue
// record is left alone: a Migrator run of the same build will not put the full functions
// back, so only use it on throw-away schemas.
int install_without_optional_features(pg::Connection& conn, std::string_view schema);

}  // namespace awa::schema
