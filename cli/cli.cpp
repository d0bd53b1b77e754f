#include "cli.hpp"

#include <cstdlib>
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "awa/error.hpp"

namespace awa::cli {

const std::string& Context::require_database_url() const {
  if (database_url.empty()) {
    throw InvalidArgument(
        "no database: pass --database-url URL or set DATABASE_URL "
        "(scripts/pg start; scripts/pg url prints a local one)");
  }
  return database_url;
}

namespace {

// One line, with the SQLSTATE when PostgreSQL produced the error; DETAIL and HINT follow
// on their own lines only when present, since they often say what to do.
void report(const Error& e) {
  std::string line = fmt::format("awa: error: {}", e.what());
  if (!e.sqlstate().empty() && e.sqlstate() != "22023")
    line += fmt::format(" [SQLSTATE {}]", e.sqlstate());
  std::cerr << line << "\n";
  if (!e.detail().empty()) std::cerr << "  detail: " << e.detail() << "\n";
  if (!e.hint().empty()) std::cerr << "  hint: " << e.hint() << "\n";
}

}  // namespace

int run(int argc, char** argv) {
  Context ctx;
  CLI::App app{"awa: a PostgreSQL-native job queue (sharded enqueue heads, ADR-025)", "awa"};
  app.require_subcommand(1);
  app.fallthrough();
  if (const char* env = std::getenv("DATABASE_URL")) ctx.database_url = env;
  app.add_option("--database-url", ctx.database_url,
                 "PostgreSQL connection URI (default: $DATABASE_URL)");
  app.add_option("--schema", ctx.schema, "schema holding the queue tables")->capture_default_str();

  add_migrate(app, ctx);
  add_version(app, ctx);
  add_demo(app, ctx);
  add_enqueue(app, ctx);
  add_queue(app, ctx);
  add_work(app, ctx);
  add_storage(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return ctx.action ? ctx.action() : 0;
  } catch (const Error& e) {
    report(e);
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "awa: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace awa::cli
