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

// Generated at configure time from the files of sql/ (CMakeLists.txt): kFileNames, the
// name of every embedded file.
#include "awa_sql_names.hpp"

namespace awa::sql {

// Declared, never defined: SqlName calls it for a name that is not embedded. It is not
// constexpr, so the compile stops there and the error names it.
void not_an_embedded_sql_file();

// The name of an embedded file, checked while compiling: a name that is not one of
// kFileNames does not compile (the error names not_an_embedded_sql_file), so a misspelt
// statement name fails the build instead of a call at run time.
class SqlName {
 public:
  consteval SqlName(const char* name) : SqlName(std::string_view(name)) {}  // NOLINT
  consteval SqlName(std::string_view name) : name_(name) {                  // NOLINT
    bool known = false;
    for (const std::string_view n : kFileNames) known = known || n == name;
    if (!known) not_an_embedded_sql_file();
  }
  constexpr std::string_view view() const noexcept { return name_; }

 private:
  std::string_view name_;
};

struct SqlFile {
  std::string_view name;
  std::string_view text;
};

// Every embedded file, sorted by name.
std::span<const SqlFile> all_files();

// The text of one file, named by a literal checked at compile time.
std::string_view file(SqlName name);
// The same for a name computed at run time: throws awa::Error if no such file was
// embedded.
std::string_view file_named(std::string_view name);

// `text` with every "{schema}" replaced by `quoted_schema` (already quoted with
// quote_schema()).
std::string render(std::string_view text, std::string_view quoted_schema);

// Validates a schema name (letters, digits and underscores, not starting with a digit,
// at most 63 bytes) and returns it double-quoted. Throws awa::InvalidArgument otherwise.
std::string quote_schema(std::string_view schema);

// The file `name` rendered for `quoted_schema`.
std::string query(SqlName name, std::string_view quoted_schema);

}  // namespace awa::sql
