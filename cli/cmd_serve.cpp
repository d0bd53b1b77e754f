// awa serve [--addr 127.0.0.1:8080] [--read-only] [--token-file F] [--callback-secret-file F]:
// the dashboard's HTTP server (serve/; docs/api.md, "HTTP API"). Runs until SIGINT or
// SIGTERM.

#include <csignal>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "awa/serve.hpp"
#include "cli.hpp"

namespace awa::cli {

int serve_until_signal(serve::ServerOptions options) {
  // Blocked before the server starts its threads, so only sigwait() below receives them.
  StopSignals signals;
  serve::Server server(std::move(options));
  server.start();
  const auto& opts = server.options();
  const bool v6 = opts.host.find(':') != std::string::npos;
  fmt::print("awa serve: listening on http://{}{}{}:{}/ (schema {}{}{})\n", v6 ? "[" : "",
             opts.host, v6 ? "]" : "", server.port(), opts.schema,
             opts.read_only ? ", read-only" : "", opts.token ? ", token required" : "");
  std::fflush(stdout);
  const int sig = signals.wait();
  std::cerr << "awa serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << " received, stopping\n";
  server.stop();
  return 0;
}

namespace {

struct ServeArgs {
  std::string addr = "127.0.0.1:8080";
  bool read_only = false;
  std::string token_file;
  std::string callback_secret_file;
};

int serve(const Context& ctx, const ServeArgs& a) {
  serve::ServerOptions o;
  o.database_url = ctx.require_database_url();
  o.schema = ctx.schema;
  o.read_only = a.read_only;
  metrics::ListenAddress addr;
  try {
    addr = metrics::parse_listen_address(a.addr);
  } catch (const InvalidArgument&) {
    throw InvalidArgument(fmt::format(
        "--addr \"{}\": use HOST:PORT, e.g. 127.0.0.1:8080, [::1]:8080 or 0.0.0.0:8080 (with "
        "--token-file)",
        a.addr));
  }
  o.host = addr.host;
  o.port = addr.port;
  if (!a.token_file.empty()) o.token = serve::read_token_file(a.token_file);
  if (!a.callback_secret_file.empty())
    o.callback_secret = serve::read_callback_secret_file(a.callback_secret_file);

  return serve_until_signal(std::move(o));
}

}  // namespace

void add_serve(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "serve the dashboard and its JSON API under /api/ until SIGINT or SIGTERM");
  cmd->add_option("--addr", a->addr,
                  "HOST:PORT to listen on; other than loopback only with --token-file")
      ->capture_default_str();
  cmd->add_flag("--read-only", a->read_only, "refuse every state-changing request (403)");
  cmd->add_option("--token-file", a->token_file,
                  "file holding the bearer token every /api request must carry");
  cmd->add_option("--callback-secret-file", a->callback_secret_file,
                  "file holding the secret that signs POST /api/callbacks/... (enables them)");
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return serve(ctx, *a); }; });
}

}  // namespace awa::cli
