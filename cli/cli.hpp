// The `awa` command-line tool. main() calls run(); everything else is a library so that
// tests can drive the commands in-process.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace CLI {
class App;
}

namespace awa::cli {

// Options shared by every subcommand.
struct Context {
  std::string database_url;  // --database-url, else $DATABASE_URL
  std::string schema = "awa";
  std::function<int()> action;  // set by the chosen subcommand's callback

  // The database URL, or an InvalidArgument that says how to provide one.
  const std::string& require_database_url() const;
};

// Returns the process exit code: 0 on success, 1 on a reported error, 2 on bad usage.
int run(int argc, char** argv);

// One per subcommand file (cli/cmd_*.cpp).
void add_migrate(CLI::App& app, Context& ctx);
void add_version(CLI::App& app, Context& ctx);
void add_demo(CLI::App& app, Context& ctx);
void add_enqueue(CLI::App& app, Context& ctx);
void add_queue(CLI::App& app, Context& ctx);
void add_work(CLI::App& app, Context& ctx);
void add_storage(CLI::App& app, Context& ctx);
void add_roles(CLI::App& app, Context& ctx);
void add_job(CLI::App& app, Context& ctx);
void add_dlq(CLI::App& app, Context& ctx);
void add_health(CLI::App& app, Context& ctx);
void add_serve(CLI::App& app, Context& ctx);

}  // namespace awa::cli
