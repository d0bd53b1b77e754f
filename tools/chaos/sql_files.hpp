// The harness's SQL files (tools/chaos/sql/), embedded at build time by
// cmake/embed_sql.cmake into this namespace: chaos::sql, apart from the library's own
// catalogue awa::sql, which is linked into the same binary.
//
// Names are paths relative to tools/chaos/sql/, e.g. "ledger/lost_jobs.sql". The text is
// run as it is: the harness works on schema `awa` only and names it in the files.
//
// Thread safety: everything here is immutable after static initialisation.
#pragma once

#include <span>
#include <string_view>

#include "schema/sql_catalog.hpp"

namespace chaos::sql {

using awa::sql::SqlFile;

// Every embedded file, sorted by name (generated).
std::span<const SqlFile> all_files();

// The text of one file. Throws awa::Error if no such file was embedded (a programming
// error: the name is a literal in the caller).
std::string_view file(std::string_view name);

}  // namespace chaos::sql
