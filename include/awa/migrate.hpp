// Creating and upgrading the queue schema, for programs that manage it themselves (the
// `awa migrate` command, deployment jobs) rather than letting a Client migrate on start.
//
// Versioned migrations are append-only: each is applied once, in version order, and
// recorded with a checksum of its text; if an applied migration's text changed since, or
// the database records a version this build does not know, migrate() refuses with
// MigrationError and changes nothing. The schema's SQL functions are re-applied whenever
// their text changed. Everything runs in one transaction under an advisory lock keyed by
// the schema name, so any number of processes may migrate the same schema at once: one
// applies, the others wait and then find nothing to do.
//
// Thread safety: uses only the connection passed in (one thread at a time).
#pragma once

#include <string>
#include <vector>

#include "awa/connection.hpp"

namespace awa {

struct MigrationReport {
  std::string schema;
  std::vector<std::string> applied;            // migration file names applied now
  std::vector<std::string> functions_updated;  // function file names (re)applied now
  int version = 0;                             // schema version afterwards
};

// Brings `schema` (default "awa") up to this build's version. Throws InvalidArgument
// for a bad schema name, MigrationError as described above, DatabaseError otherwise.
MigrationReport migrate(Connection& conn, const std::string& schema = "awa");

}  // namespace awa
