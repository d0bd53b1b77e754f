#include "schema/migrator.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include <fmt/format.h>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"

namespace awa::schema {
namespace {

constexpr std::string_view kMigrationsDir = "migrations/";
constexpr std::string_view kFunctionsDir = "functions/";
constexpr std::string_view kFunctionSettings = "security/function_settings.sql";

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::string checksum(std::string_view text) {
  // FNV-1a 64: a change detector for migration files, not a security boundary.
  std::uint64_t h = 14695981039346656037ULL;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", h);
}

std::vector<Migration> embedded_migrations() {
  std::vector<Migration> out;
  for (const auto& f : sql::all_files()) {
    if (!starts_with(f.name, kMigrationsDir)) continue;
    const std::string_view file = f.name.substr(kMigrationsDir.size());
    int version = 0;
    const auto [ptr, ec] = std::from_chars(file.data(), file.data() + file.size(), version);
    const bool ok = ec == std::errc() && ptr - file.data() == 4 && file.size() > 9 &&
                    file[4] == '_' && file.substr(file.size() - 4) == ".sql" && version > 0;
    if (!ok) {
      throw MigrationError("migration file name must be NNNN_name.sql: " + std::string(file));
    }
    out.push_back(Migration{version, std::string(file), checksum(f.text), f.text});
  }
  std::sort(out.begin(), out.end(),
            [](const Migration& a, const Migration& b) { return a.version < b.version; });
  for (std::size_t i = 1; i < out.size(); ++i) {
    if (out[i].version == out[i - 1].version) {
      throw MigrationError(fmt::format("two migrations share version {}: {} and {}", out[i].version,
                                       out[i - 1].name, out[i].name));
    }
  }
  return out;
}

Migrator::Migrator(std::string schema)
    : schema_(std::move(schema)), quoted_(sql::quote_schema(schema_)) {}

MigrationReport Migrator::migrate(pg::Connection& conn) const {
  MigrationReport report;
  report.schema = schema_;
  const auto migrations = embedded_migrations();

  pg::Transaction tx(conn);
  // Serialise migrators of this schema; the lock ends with the transaction.
  conn.query("SELECT pg_advisory_xact_lock(hashtextextended('awa-migrate:' || $1, 0))", schema_);
  conn.exec(fmt::format("CREATE SCHEMA IF NOT EXISTS {}", quoted_));
  conn.exec(
      fmt::format("CREATE TABLE IF NOT EXISTS {0}.schema_migrations ("
                  " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
                  " applied_at timestamptz NOT NULL DEFAULT now());"
                  "CREATE TABLE IF NOT EXISTS {0}.schema_functions ("
                  " name text PRIMARY KEY, checksum text NOT NULL,"
                  " applied_at timestamptz NOT NULL DEFAULT now())",
                  quoted_));

  std::map<int, std::pair<std::string, std::string>> applied;  // version -> (name, checksum)
  {
    const auto rows =
        conn.exec(fmt::format("SELECT version, name, checksum FROM {}.schema_migrations", quoted_));
    for (int r = 0; r < rows.rows(); ++r) {
      applied[rows.get<int>(r, 0)] = {rows.get<std::string>(r, 1), rows.get<std::string>(r, 2)};
    }
  }
  for (const auto& [version, row] : applied) {
    const auto it = std::find_if(migrations.begin(), migrations.end(),
                                 [v = version](const Migration& m) { return m.version == v; });
    if (it == migrations.end()) {
      throw MigrationError(fmt::format(
          "schema {} has migration {} ({}) that this binary does not know; refusing to run an "
          "older awa against a newer schema",
          schema_, version, row.first));
    }
    if (it->checksum != row.second) {
      throw MigrationError(fmt::format(
          "migration {} was changed after it was applied to schema {} (checksum {} in the "
          "database, {} now); migrations are append-only: add a new one instead",
          it->name, schema_, row.second, it->checksum));
    }
  }

  for (const auto& m : migrations) {
    if (applied.count(m.version) != 0) continue;
    try {
      conn.exec(sql::render(m.text, quoted_));
    } catch (const Error& e) {
      throw MigrationError(fmt::format("migration {} failed: {}", m.name, e.what()), e.retry(),
                           e.sqlstate(), e.detail(), e.hint());
    }
    conn.query(fmt::format("INSERT INTO {}.schema_migrations (version, name, checksum) "
                           "VALUES ($1, $2, $3)",
                           quoted_),
               m.version, m.name, m.checksum);
    report.applied.push_back(m.name);
  }
  report.version = migrations.empty() ? 0 : migrations.back().version;

  std::map<std::string, std::string> fn_applied;
  {
    const auto rows =
        conn.exec(fmt::format("SELECT name, checksum FROM {}.schema_functions", quoted_));
    for (int r = 0; r < rows.rows(); ++r) {
      fn_applied[rows.get<std::string>(r, 0)] = rows.get<std::string>(r, 1);
    }
  }
  for (const auto& f : sql::all_files()) {
    if (!starts_with(f.name, kFunctionsDir)) continue;
    const std::string name(f.name.substr(kFunctionsDir.size()));
    const std::string sum = checksum(f.text);
    const auto it = fn_applied.find(name);
    if (it != fn_applied.end() && it->second == sum) continue;
    try {
      conn.exec(sql::render(f.text, quoted_));
    } catch (const Error& e) {
      throw MigrationError(fmt::format("function file {} failed: {}", name, e.what()), e.retry(),
                           e.sqlstate(), e.detail(), e.hint());
    }
    conn.query(fmt::format("INSERT INTO {}.schema_functions (name, checksum) VALUES ($1, $2) "
                           "ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, "
                           "applied_at = now()",
                           quoted_),
               name, sum);
    report.functions_updated.push_back(name);
  }
  // Function attributes (a fixed search_path, SECURITY DEFINER for the producer path) in
  // one place, every time: re-applying a function file resets them.
  try {
    conn.exec(sql::render(sql::file(kFunctionSettings), quoted_));
  } catch (const Error& e) {
    throw MigrationError(fmt::format("{} failed: {}", kFunctionSettings, e.what()), e.retry(),
                         e.sqlstate(), e.detail(), e.hint());
  }
  tx.commit();
  return report;
}

}  // namespace awa::schema

namespace awa {

MigrationReport migrate(Connection& conn, const std::string& schema) {
  return schema::Migrator(schema).migrate(pg::native(conn));
}

}  // namespace awa
