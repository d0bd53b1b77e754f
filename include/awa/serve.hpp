// The dashboard's HTTP server and its JSON API under /api/ (docs/api.md, "HTTP API"): what
// `awa serve` runs, and what a service can embed (CMake target awa::serve, beside
// awa::awa). Implemented in serve/ on the public API only, like cli/; httplib stays out of
// this header.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace awa::serve {

struct ServerOptions {
  std::string database_url;
  std::string schema = "awa";
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: the kernel picks one (port() says which)
  // Every POST under /api/ answers 403 and changes nothing.
  bool read_only = false;
  // Set: every /api/ request needs `Authorization: Bearer <token>` or the session cookie
  // POST /login sets. Required to bind anything but a loopback address.
  std::optional<std::string> token;
  // Idle database connections kept for reuse; requests beyond it connect anew.
  int max_idle_connections = 4;
  // Set: POST /api/callbacks/{id}/complete|fail|heartbeat is enabled for other systems,
  // signed with this secret (awa/callback.hpp) instead of the token; unset: those answer
  // 404. At least 16 characters.
  std::optional<std::string> callback_secret;
  // A login session (the cookie POST /login sets) ends this long after the login; POST
  // /logout ends it at once. Default: 12 h.
  std::chrono::seconds session_ttl{std::chrono::hours(12)};
};

// "127.0.0.1" (any 127.x.y.z), "::1" and "localhost": reachable from this host only.
bool is_loopback(std::string_view host);

// The token in `path`, trailing whitespace removed. InvalidArgument when the file cannot
// be read or the token is shorter than 16 characters (a guessable token is no token).
std::string read_token_file(const std::string& path);
// The same rules for the callback secret; errors name --callback-secret-file.
std::string read_callback_secret_file(const std::string& path);

class Server {
 public:
  // InvalidArgument for a non-loopback host without a token, a bad schema name or a port
  // outside 0..65535. Nothing is bound yet.
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Connects once (fails fast on a bad URL: ConnectionError), binds and serves on a
  // thread of its own. Error when the address cannot be bound.
  void start();
  // Stops accepting, finishes the requests in progress, joins. Idempotent.
  void stop();
  // The bound port after start(); 0 before.
  int port() const noexcept;
  const ServerOptions& options() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace awa::serve
