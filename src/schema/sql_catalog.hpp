// The SQL files of sql/, embedded at build time (cmake/embed_sql.cmake).
//
// Names are paths relative to sql/, e.g. "migrations/0001_queue_storage.sql" or
// "queries/enqueue/reserve_lane.sql". SQL text may contain the token {schema}, which the
// caller replaces with the quoted target schema (see render()).
//
// Thread safety: everything here is immutable after static initialisation.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace awa::sql {

struct SqlFile {
  std::string_view name;
  std::string_view text;
};

// Every embedded file, sorted by name.
std::span<const SqlFile> all_files();

// The text of one file. Throws awa::Error if no such file was embedded (a programming
// error: the name is a literal in the caller).
std::string_view file(std::string_view name);

// `text` with every "{schema}" replaced by `quoted_schema` (already quoted with
// quote_schema()).
std::string render(std::string_view text, std::string_view quoted_schema);

// Validates a schema name (letters, digits and underscores, not starting with a digit,
// at most 63 bytes) and returns it double-quoted. Throws awa::InvalidArgument otherwise.
std::string quote_schema(std::string_view schema);

// The statement queries/<folder>/<name>.sql rendered for `quoted_schema`.
std::string query(std::string_view folder, std::string_view name, std::string_view quoted_schema);

}  // namespace awa::sql
