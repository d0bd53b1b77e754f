// Creating and upgrading the queue schema, for programs that manage it themselves (the
// `awa migrate` command, deployment jobs) rather than letting a Client migrate on start.
//
// Versioned migrations are append-only: each is applied once, in version order, and
// recorded with a checksum of its text; if an applied migration's text changed since, or
// the database records a version this build does not know, migrate() refuses with
// MigrationError and changes nothing. The schema's SQL functions are re-applied whenever
// their text changed, and overloads an older signature left behind are dropped; but a
// build never replaces the functions of a newer release (a higher function catalogue):
// it leaves them and runs against them, or refuses with MigrationError when they no
// longer support this build (docs/upgrading.md). Everything runs in one transaction
// under an advisory lock keyed by the schema name, so any number of processes may migrate
// the same schema at once: one applies, the others wait and then find nothing to do.
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
  // The function catalogue the schema's functions belong to afterwards (0: installed
  // before catalogues existed).
  int function_catalogue = 0;
  // The schema's functions belong to a newer catalogue than this build's, which still
  // supports it: they were left as they are and this build runs against them.
  bool newer_functions_kept = false;
};

struct MigrateOptions {
  // A few migrations change the storage format in a way older builds cannot run against
  // (the first: 0002_rings, which replaced per-job receipts). Before applying one to a
  // schema that already has data, migrate() looks for workers of the schema that are
  // alive — processes in runtime_instances seen within the last minute, and sessions of
  // the database whose last statement, within the last minute, named the schema — and
  // refuses with MigrationError (SQLSTATE 55006) naming them, changing nothing: stop them
  // first (docs/upgrading.md). True skips that check (the workers are known to be
  // stopped, or a session it names is not a worker).
  bool allow_running_workers = false;
};

// Brings `schema` (default "awa") up to this build's version. Throws InvalidArgument
// for a bad schema name, MigrationError as described above, DatabaseError otherwise.
MigrationReport migrate(Connection& conn, const std::string& schema = "awa",
                        const MigrateOptions& options = {});

}  // namespace awa
