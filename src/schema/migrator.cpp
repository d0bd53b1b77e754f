#include "schema/migrator.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/function_catalogue.hpp"
#include "schema/sql_catalog.hpp"

namespace awa::schema {
namespace {

constexpr std::string_view kMigrationsDir = "migrations/";
constexpr std::string_view kFunctionsDir = "functions/";
constexpr std::string_view kFunctionSettings = "security/function_settings.sql";

// Migrations whose storage change older builds cannot run against: 0002_rings dropped the
// per-job receipt table (lease_claims) that an older worker's claims and completions
// write; 0018_queue_ids replaced the hot tables' queue name columns, which an older
// producer's and worker's statements write, by queue ids. Migrations are append-only
// (checksummed), so the list lives here rather than in the files. A migration belongs here
// when a build from before it, running against the schema after it, fails (the upgrade
// rehearsal, scripts/upgrade-rehearsal, shows it).
constexpr int kBreaksRunningWorkers[] = {2, 18};

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Case-insensitive match of `word` at `pos`, then any whitespace; npos if no match.
std::size_t skip_word(std::string_view s, std::size_t pos, std::string_view word) {
  if (s.size() - pos < word.size()) return std::string_view::npos;
  for (std::size_t i = 0; i < word.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(s[pos + i])) != word[i]) {
      return std::string_view::npos;
    }
  }
  pos += word.size();
  if (pos < s.size() && is_ident(s[pos])) return std::string_view::npos;
  while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos])) != 0) ++pos;
  return pos;
}

struct Catalogue {
  int catalogue = 0;  // 0: functions installed before catalogues existed
  int oldest_compatible = 0;
};

Catalogue read_catalogue(pg::Connection& conn, const std::string& quoted) {
  const auto rows = conn.exec(sql::render(sql::file("queries/migrator/catalogue.sql"), quoted));
  if (rows.rows() == 0) return {};
  return {rows.get<int>(0, 0), rows.get<int>(0, 1)};
}

// MigrationError when the schema's functions no longer support this build's catalogue.
void refuse_if_unsupported(const std::string& schema, const Catalogue& installed) {
  if (kFunctionCatalogue >= installed.oldest_compatible) return;
  throw MigrationError(fmt::format(
      "schema {} holds functions of catalogue {}, which support builds of catalogue {} or "
      "newer; this build's catalogue is {}: refusing to run it against them (deploy a "
      "build of catalogue {} or newer; docs/upgrading.md)",
      schema, installed.catalogue, installed.oldest_compatible, kFunctionCatalogue,
      installed.oldest_compatible));
}

}  // namespace

std::vector<std::string> created_function_names(std::string_view text) {
  static constexpr std::string_view kSchemaDot = "{schema}.";
  std::vector<std::string> names;
  std::size_t line_start = 0;
  while (line_start < text.size()) {
    auto line_end = text.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = text.size();
    std::string_view line = text.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    std::size_t pos = 0;
    while (pos < line.size() && std::isspace(static_cast<unsigned char>(line[pos])) != 0) ++pos;
    pos = skip_word(line, pos, "CREATE");
    if (pos == std::string_view::npos) continue;  // also skips "-- CREATE ..." comments
    if (const auto after_or = skip_word(line, pos, "OR"); after_or != std::string_view::npos) {
      pos = skip_word(line, after_or, "REPLACE");
      if (pos == std::string_view::npos) continue;
    }
    pos = skip_word(line, pos, "FUNCTION");
    if (pos == std::string_view::npos || line.substr(pos, kSchemaDot.size()) != kSchemaDot) {
      continue;
    }
    pos += kSchemaDot.size();
    std::size_t end = pos;
    while (end < line.size() && is_ident(line[end])) ++end;
    if (end == pos) continue;
    std::string name(line.substr(pos, end - pos));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

std::string function_set_hash() {
  std::string all;
  for (const auto& f : sql::all_files()) {
    if (!starts_with(f.name, kFunctionsDir) && f.name != kFunctionSettings) continue;
    all.append(f.name);
    all.push_back('\0');
    all.append(f.text);
    all.push_back('\0');
  }
  return checksum(all);
}

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

Migrator::Migrator(std::string schema, MigrateOptions options)
    : schema_(std::move(schema)), quoted_(sql::quote_schema(schema_)), options_(options) {}

void Migrator::refuse_if_workers_run(pg::Connection& conn,
                                     const std::vector<std::string>& pending) const {
  if (options_.allow_running_workers || pending.empty()) return;
  std::vector<std::string> alive;
  const auto sessions = conn.query(sql::file("queries/migrator/live_sessions.sql"), quoted_ + ".");
  for (int r = 0; r < sessions.rows(); ++r) alive.push_back(sessions.get<std::string>(r, 0));
  const bool registry =
      !conn.query("SELECT to_regclass($1) IS NULL", quoted_ + ".runtime_instances").get<bool>(0, 0);
  if (registry) {
    const auto instances =
        conn.exec(sql::render(sql::file("queries/migrator/live_instances.sql"), quoted_));
    for (int r = 0; r < instances.rows(); ++r) alive.push_back(instances.get<std::string>(r, 0));
  }
  if (alive.empty()) return;
  throw MigrationError(
      fmt::format("schema {}: migration {} changes the storage format that running workers of "
                  "an older build use, and {} worker(s) look alive: {}; nothing was changed",
                  schema_, fmt::join(pending, ", "), alive.size(), fmt::join(alive, "; ")),
      Retry::kDoNotRetry, "55006", "",
      "stop the workers of this schema (a graceful stop finishes what they run), migrate, then "
      "start workers of this build (docs/upgrading.md); if a session named is not a worker, "
      "migrate with allow_running_workers (awa migrate --allow-running-workers)");
}

void Migrator::drop_stale_overloads(
    pg::Connection& conn, const MigrationReport& report,
    const std::map<std::string, std::vector<std::string>>& creators) const {
  // A signature change (a parameter added, a type changed) creates a second function of
  // the same name next to the old one; calls that match both fail with 42725, so the old
  // one must go. Candidates are the names of the re-applied files, unless an unchanged
  // file creates the name too: its overload is current, only not rewritten this time.
  std::string names;
  for (const auto& [fn, files] : creators) {
    const bool all_reapplied = std::all_of(files.begin(), files.end(), [&](const std::string& f) {
      return std::find(report.functions_updated.begin(), report.functions_updated.end(), f) !=
             report.functions_updated.end();
    });
    if (!all_reapplied) continue;
    if (!names.empty()) names.push_back(',');
    names.append(fn);
  }
  if (names.empty()) return;
  const auto stale =
      conn.query(sql::render(sql::file("queries/migrator/stale_overloads.sql"), quoted_), names);
  for (int r = 0; r < stale.rows(); ++r) {
    const auto signature = stale.get<std::string>(r, 0);
    const auto& file = creators.at(stale.get<std::string>(r, 2)).front();
    try {
      // Without CASCADE: a view or trigger of the operator's own that still uses the old
      // signature must not disappear silently.
      conn.exec("DROP FUNCTION " + stale.get<std::string>(r, 1));
    } catch (const Error& e) {
      throw MigrationError(
          fmt::format("function file {} no longer defines {}, an overload an older build left "
                      "in schema {}, and it cannot be dropped: {}",
                      file, signature, schema_, e.what()),
          e.retry(), e.sqlstate(), e.detail(),
          "drop or change what depends on the old signature (see DETAIL), then migrate again");
    }
    spdlog::info("schema {}: dropped {}, a stale overload ({} no longer defines it)", schema_,
                 signature, file);
  }
}

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

  // Migrations that older builds cannot run against (the storage format their running
  // workers use changes): checked only for a schema that has migrations already.
  std::vector<std::string> breaking;
  for (const auto& m : migrations) {
    if (applied.count(m.version) == 0 && !applied.empty() &&
        std::find(std::begin(kBreaksRunningWorkers), std::end(kBreaksRunningWorkers), m.version) !=
            std::end(kBreaksRunningWorkers)) {
      breaking.push_back(m.name);
    }
  }
  refuse_if_workers_run(conn, breaking);

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

  // The function catalogue: never replace a newer build's functions (docs/upgrading.md).
  const Catalogue installed = read_catalogue(conn, quoted_);
  if (installed.catalogue > kFunctionCatalogue) {
    refuse_if_unsupported(schema_, installed);
    spdlog::warn(
        "schema {} holds functions of catalogue {}, newer than this build's {}: left as they "
        "are; this build runs against them (docs/upgrading.md)",
        schema_, installed.catalogue, kFunctionCatalogue);
    report.function_catalogue = installed.catalogue;
    report.newer_functions_kept = true;
    tx.commit();
    return report;
  }

  std::map<std::string, std::string> fn_applied;
  {
    const auto rows =
        conn.exec(fmt::format("SELECT name, checksum FROM {}.schema_functions", quoted_));
    for (int r = 0; r < rows.rows(); ++r) {
      fn_applied[rows.get<std::string>(r, 0)] = rows.get<std::string>(r, 1);
    }
  }
  // Function name -> the files that create it (normally one).
  std::map<std::string, std::vector<std::string>> creators;
  // And this build's function files, one per line, for forget_removed_functions.sql.
  std::string file_names;
  for (const auto& f : sql::all_files()) {
    if (!starts_with(f.name, kFunctionsDir)) continue;
    if (!file_names.empty()) file_names.push_back('\n');
    file_names.append(f.name.substr(kFunctionsDir.size()));
    for (auto& fn : created_function_names(f.text)) {
      creators[fn].emplace_back(f.name.substr(kFunctionsDir.size()));
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
  drop_stale_overloads(conn, report, creators);
  conn.query(sql::query("queries/migrator/forget_removed_functions.sql", quoted_), file_names);
  // Function attributes (a fixed search_path, SECURITY DEFINER for the producer path) in
  // one place, every time: re-applying a function file resets them.
  try {
    conn.exec(sql::render(sql::file(kFunctionSettings), quoted_));
  } catch (const Error& e) {
    throw MigrationError(fmt::format("{} failed: {}", kFunctionSettings, e.what()), e.retry(),
                         e.sqlstate(), e.detail(), e.hint());
  }
  conn.query(sql::render(sql::file("queries/migrator/set_catalogue.sql"), quoted_),
             kFunctionCatalogue, kOldestCompatibleCatalogue);
  report.function_catalogue = kFunctionCatalogue;
  tx.commit();
  return report;
}

void Migrator::check_compatible(pg::Connection& conn) const {
  const auto tables = conn.query(sql::file("queries/migrator/schema_tables.sql"), schema_);
  if (!tables.get<bool>(0, 0)) {
    throw MigrationError(fmt::format(
        "schema {} is not migrated and this client does not migrate (migrate = false): run "
        "`awa migrate --schema {}` with this build first (docs/upgrading.md)",
        schema_, schema_));
  }
  std::set<int> applied;
  const auto rows =
      conn.exec(sql::render(sql::file("queries/migrator/applied_versions.sql"), quoted_));
  for (int r = 0; r < rows.rows(); ++r) applied.insert(rows.get<int>(r, 0));
  for (const auto& m : embedded_migrations()) {
    if (applied.count(m.version) == 0) {
      throw MigrationError(
          fmt::format("schema {} lacks migration {} of this build and this client does not migrate "
                      "(migrate = false): run `awa migrate --schema {}` with this build first "
                      "(docs/upgrading.md)",
                      schema_, m.name, schema_));
    }
  }
  const Catalogue installed = tables.get<bool>(0, 1) ? read_catalogue(conn, quoted_) : Catalogue{};
  if (installed.catalogue < kFunctionCatalogue) {
    throw MigrationError(fmt::format(
        "schema {} holds functions of catalogue {}, older than this build's {}, and this "
        "client does not migrate (migrate = false): run `awa migrate --schema {}` with this "
        "build first (docs/upgrading.md)",
        schema_, installed.catalogue, kFunctionCatalogue, schema_));
  }
  refuse_if_unsupported(schema_, installed);
}

}  // namespace awa::schema

namespace awa {

MigrationReport migrate(Connection& conn, const std::string& schema,
                        const MigrateOptions& options) {
  return schema::Migrator(schema, options).migrate(pg::native(conn));
}

}  // namespace awa
