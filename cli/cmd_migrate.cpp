#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "awa/connection.hpp"
#include "awa/migrate.hpp"
#include "cli.hpp"

namespace awa::cli {

void add_migrate(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("migrate", "create or upgrade the queue schema");
  auto options = std::make_shared<MigrateOptions>();
  cmd->add_flag("--allow-running-workers", options->allow_running_workers,
                "apply a migration older workers cannot run against even while workers of the "
                "schema look alive");
  cmd->callback([&ctx, options] {
    ctx.action = [&ctx, options] {
      // One transaction under a transaction-scoped advisory lock: it runs through a
      // transaction pooler (--pooled) as well as directly.
      auto conn = ctx.connect();
      const auto report = migrate(conn, ctx.schema, *options);
      if (report.newer_functions_kept) {
        // Not "up to date": the schema is ahead of this build, which is allowed (a rollback,
        // or a rolling deploy not finished) but is for the operator to know.
        for (const auto& m : report.applied) fmt::print("applied migration {}\n", m);
        fmt::print(
            "schema {} is at version {}; its functions are of catalogue {}, newer than this "
            "build's, and were left as they are (this build runs against them; "
            "docs/upgrading.md)\n",
            report.schema, report.version, report.function_catalogue);
      } else if (report.applied.empty() && report.functions_updated.empty()) {
        fmt::print("schema {} is up to date (version {})\n", report.schema, report.version);
      } else {
        for (const auto& m : report.applied) fmt::print("applied migration {}\n", m);
        for (const auto& f : report.functions_updated) fmt::print("applied functions {}\n", f);
        fmt::print("schema {} is at version {}\n", report.schema, report.version);
      }
      return 0;
    };
  });
}

void add_version(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("version", "print the version");
  cmd->callback([&ctx] {
    ctx.action = [] {
      fmt::print("awa {}\n", AWA_VERSION);
      return 0;
    };
  });
}

}  // namespace awa::cli
