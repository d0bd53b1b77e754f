// The `awa` command-line tool. main() calls run(); everything else is a library so that
// tests can drive the commands in-process.
#pragma once

#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "awa/connection.hpp"

namespace CLI {
class App;
}

namespace awa::serve {
struct ServerOptions;
}

namespace awa::cli {

// The text of --json output. Ordering keys and user text may be arbitrary bytes: invalid
// UTF-8 is replaced, never thrown on.
std::string json_text(const nlohmann::json& j);

// Options shared by every subcommand.
struct Context {
  std::string database_url;  // --database-url, else $DATABASE_URL
  std::string schema = "awa";
  // --pooled: the URL leads to a transaction-mode pooler (PgBouncer pool_mode =
  // transaction); connections prepare nothing on the server and keep no session state.
  bool pooled = false;
  std::function<int()> action;  // set by the chosen subcommand's callback

  // The database URL, or an InvalidArgument that says how to provide one.
  const std::string& require_database_url() const;
  // A connection to the database URL, in pooled mode under --pooled.
  Connection connect() const;
};

// Returns the process exit code: 0 on success, 1 on a reported error, 2 on bad usage.
int run(int argc, char** argv);

// SIGINT and SIGTERM blocked in this thread (and so in every thread started from it
// afterwards) for its lifetime; wait() receives them synchronously with sigwait(), which
// keeps the handling out of async-signal context, and no thread is killed by their
// default action midway through a graceful stop.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  int wait() const;  // the signal that arrived
  // The signal that arrives within `timeout`, or nullopt.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) const;

 private:
  sigset_t set_{};
  sigset_t old_{};
};

// awa serve's loop (cli/cmd_serve.cpp): starts the dashboard server, prints its URL and
// serves until SIGINT or SIGTERM. Call it before starting other threads, or with a
// StopSignals alive since before they started.
int serve_until_signal(serve::ServerOptions options);

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
void add_cron(CLI::App& app, Context& ctx);
void add_callback(CLI::App& app, Context& ctx);
void add_batch(CLI::App& app, Context& ctx);
// The follow-up subcommands of `awa queue` (cmd_queue_follow_ups.cpp).
void add_queue_follow_ups(CLI::App& queue_cmd, Context& ctx);

}  // namespace awa::cli
