#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "pg/connection.hpp"
#include "schema/migrator.hpp"

namespace awa::cli {

void add_demo(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("demo", "migrate, enqueue and work a sample workload");
  cmd->callback([&ctx] {
    ctx.action = [&ctx] {
      const auto& url = ctx.require_database_url();
      auto conn = pg::Connection::connect({url});
      const auto report = schema::Migrator(ctx.schema).migrate(conn);
      fmt::print("database: {}\n", url);
      fmt::print("schema {}: {} migration(s) applied now, version {}\n", report.schema,
                 report.applied.size(), report.version);
      return 0;
    };
  });
}

}  // namespace awa::cli
