#include "cli.hpp"

#include <cstdlib>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "awa/error.hpp"
#include "awa/url.hpp"

namespace awa::cli {

std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const std::string& Context::require_database_url() const {
  if (database_url.empty()) {
    throw InvalidArgument(
        "no database: pass --database-url URL or set DATABASE_URL "
        "(scripts/pg start; scripts/pg url prints a local one)");
  }
  return database_url;
}

Connection Context::connect() const {
  ConnectionOptions o;
  o.pooled = pooled;
  return Connection::connect(require_database_url(), o);
}

namespace {

// One line, with the SQLSTATE when PostgreSQL produced the error; DETAIL and HINT follow
// on their own lines only when present, since they often say what to do. The connection
// string's password is scrubbed from all of it, whatever produced the message.
void report(const Error& e, const std::string& url) {
  std::string line = fmt::format("awa: error: {}", e.what());
  if (!e.sqlstate().empty() && e.sqlstate() != "22023")
    line += fmt::format(" [SQLSTATE {}]", e.sqlstate());
  std::cerr << scrub_password(line, url) << "\n";
  if (!e.detail().empty()) std::cerr << "  detail: " << scrub_password(e.detail(), url) << "\n";
  if (!e.hint().empty()) std::cerr << "  hint: " << scrub_password(e.hint(), url) << "\n";
}

// A schema that was never migrated surfaces as "relation ... does not exist" (or a
// missing schema or function) with the statement's first line for context; say what to
// do instead. Every subcommand but migrate reads the schema's tables.
void report_database_error(const DatabaseError& e, const Context& ctx) {
  if (e.sqlstate() == "42P01" || e.sqlstate() == "3F000" || e.sqlstate() == "42883") {
    report(DatabaseError(fmt::format("schema {} holds no awa tables (not migrated?)", ctx.schema),
                         e.retry(), e.sqlstate(), e.what(),
                         fmt::format("run: awa migrate --schema {}", ctx.schema)),
           ctx.database_url);
    return;
  }
  report(e, ctx.database_url);
}

}  // namespace

int run(int argc, char** argv) {
  Context ctx;
  CLI::App app{"awa: a PostgreSQL-native job queue (sharded enqueue heads)", "awa"};
  app.require_subcommand(1);
  app.fallthrough();
  if (const char* env = std::getenv("DATABASE_URL")) ctx.database_url = env;
  // Never capture_default_str(): the value may come from $DATABASE_URL and hold a password.
  app.add_option("--database-url", ctx.database_url,
                 "PostgreSQL connection URI (default: $DATABASE_URL)");
  app.add_option("--schema", ctx.schema, "schema holding the queue tables")->capture_default_str();
  app.add_flag("--pooled", ctx.pooled,
               "the database URL leads to a transaction-mode pooler (PgBouncer): prepare "
               "nothing on the server, keep no session state");

  add_migrate(app, ctx);
  add_version(app, ctx);
  add_demo(app, ctx);
  add_enqueue(app, ctx);
  add_queue(app, ctx);
  add_work(app, ctx);
  add_storage(app, ctx);
  add_roles(app, ctx);
  add_job(app, ctx);
  add_dlq(app, ctx);
  add_health(app, ctx);
  add_serve(app, ctx);
  add_cron(app, ctx);
  add_callback(app, ctx);
  add_batch(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and usage errors may echo arguments (a URL given in the wrong place).
    std::ostringstream out;
    std::ostringstream err;
    const int code = app.exit(e, out, err);
    std::cout << scrub_password(out.str(), ctx.database_url);
    std::cerr << scrub_password(err.str(), ctx.database_url);
    // CLI11's own codes (105, 106, 109 ...) all mean bad usage: one code for scripts.
    return code == 0 ? 0 : 2;
  }
  try {
    return ctx.action ? ctx.action() : 0;
  } catch (const DatabaseError& e) {
    report_database_error(e, ctx);
    return 1;
  } catch (const Error& e) {
    report(e, ctx.database_url);
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "awa: error: " << scrub_password(e.what(), ctx.database_url) << "\n";
    return 1;
  }
}

}  // namespace awa::cli
