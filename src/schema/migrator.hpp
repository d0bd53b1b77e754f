// Applies the embedded schema to a target schema.
//
// Versioned migrations (sql/migrations/NNNN_name.sql) are append-only: each is applied
// once, in version order, and recorded with a checksum of its text; if an applied
// migration's text has changed since, or the database records a version this binary
// does not know, migrate() refuses with MigrationError and changes nothing.
// Function files (sql/functions/*.sql) are CREATE OR REPLACE definitions, re-applied
// whenever their checksum differs from the recorded one, unless the schema's functions
// belong to a newer function catalogue (function_catalogue.hpp): then they are left as
// they are, or, when that catalogue no longer supports this build's, migrate() refuses.
// After re-applying, every other overload of a name a re-applied file creates is an
// older signature's leftover and is dropped (never with CASCADE).
//
// Everything runs in one transaction under a transaction-scoped advisory lock keyed by
// the schema name, so any number of processes may migrate the same schema at once:
// one applies, the others wait and then find nothing to do.
//
// Thread safety: a Migrator is immutable; migrate() uses only the connection passed in.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "awa/migrate.hpp"
#include "pg/connection.hpp"

namespace awa::schema {

struct Migration {
  int version;
  std::string name;      // file name, e.g. "0001_queue_storage.sql"
  std::string checksum;  // hex of a 64-bit hash of the file text
  std::string_view text;
};

// The public report type (include/awa/migrate.hpp).
using MigrationReport = awa::MigrationReport;

// The embedded migrations in version order. Throws MigrationError if two files share a
// version or a name does not match NNNN_name.sql.
std::vector<Migration> embedded_migrations();

std::string checksum(std::string_view text);

// The functions a function file creates: the names of its `CREATE [OR REPLACE] FUNCTION
// {schema}.name` lines, lower case, each once, in order. Lines starting with `--` do not count.
std::vector<std::string> created_function_names(std::string_view text);

// A checksum of every function file and security/function_settings.sql, names included:
// what the catalogue number of function_catalogue.hpp stands for.
std::string function_set_hash();

class Migrator {
 public:
  // Throws InvalidArgument for a bad schema name. Default: "awa".
  explicit Migrator(std::string schema = "awa", MigrateOptions options = {});

  MigrationReport migrate(pg::Connection& conn) const;

  // For a client that does not migrate (ClientOptions::migrate = false): throws
  // MigrationError, saying what to run, unless the schema has every migration of this
  // build and functions this build can run against — its catalogue or a newer one that
  // still supports it (docs/upgrading.md). Reads only; needs SELECT on schema_migrations
  // and schema_catalogue (the worker role has it).
  void check_compatible(pg::Connection& conn) const;

  const std::string& schema() const noexcept { return schema_; }

 private:
  void drop_stale_overloads(pg::Connection& conn, const MigrationReport& report,
                            const std::map<std::string, std::vector<std::string>>& creators) const;

  // Throws MigrationError (55006) when `pending` holds a migration older workers cannot
  // run against and workers of the schema look alive (MigrateOptions).
  void refuse_if_workers_run(pg::Connection& conn, const std::vector<std::string>& pending) const;

  std::string schema_;
  std::string quoted_;
  MigrateOptions options_;
};

}  // namespace awa::schema
