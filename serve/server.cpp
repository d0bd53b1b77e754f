// The server: httplib set-up, the checks every /api/ request passes (docs/api.md,
// "HTTP API: security"), the login cookie, the connection pool and the error mapping.
#include <openssl/rand.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "api.hpp"
#include "awa/callback.hpp"
#include "awa/error.hpp"
#include "awa/serve.hpp"

namespace awa::serve {

using detail::HttpError;
using detail::send_json;

namespace {

constexpr const char* kSessionCookie = "awa_session";
constexpr const char* kCsrfHeader = "X-Awa-Csrf";

// Constant time in the contents: every byte of the longer string is looked at whatever
// the first difference (the length itself is not secret).
bool equal_constant_time(std::string_view a, std::string_view b) {
  const std::size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0U : 1U;
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

// Session ids from OpenSSL's CSPRNG: std::random_device promises no cryptographic quality.
std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1)
    throw Error("awa serve: OpenSSL could not produce random bytes for a session id");
  std::string out;
  for (const unsigned char b : buf) out += fmt::format("{:02x}", b);
  return out;
}

// Whether the client reached us over https: directly never (this server speaks plain
// HTTP), so only through a TLS-terminating proxy that says so. The header is trusted only
// to add the cookie's Secure attribute and to accept an https Origin at login, neither of
// which a forged header can turn against the user.
bool via_https(const httplib::Request& req) {
  return req.get_header_value("X-Forwarded-Proto") == "https";
}

std::optional<std::string> cookie_value(const httplib::Request& req, std::string_view name) {
  const std::string header = req.get_header_value("Cookie");
  std::string_view rest = header;
  while (!rest.empty()) {
    const auto semi = rest.find(';');
    std::string_view part = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    const auto eq = part.find('=');
    if (eq != std::string_view::npos && part.substr(0, eq) == name)
      return std::string(part.substr(eq + 1));
  }
  return std::nullopt;
}

// The host name of a Host header: "[::1]:8080" -> "::1", "localhost:8080" -> "localhost".
std::string host_of(const std::string& host_header) {
  if (!host_header.empty() && host_header.front() == '[') {
    const auto close = host_header.find(']');
    return close == std::string::npos ? host_header : host_header.substr(1, close - 1);
  }
  return host_header.substr(0, host_header.find(':'));
}

}  // namespace

bool is_loopback(std::string_view host) {
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8, dotted quad only.
  if (host.substr(0, 4) != "127.") return false;
  int parts = 0;
  std::string_view rest = host;
  while (true) {
    const auto dot = rest.find('.');
    const auto part = rest.substr(0, dot);
    int v = -1;
    const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || part.size() > 3 || ec != std::errc() || p != part.data() + part.size() ||
        v > 255)
      return false;
    ++parts;
    if (dot == std::string_view::npos) break;
    rest = rest.substr(dot + 1);
  }
  return parts == 4;
}

namespace {

std::string read_secret_file(const std::string& path, std::string_view option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument(fmt::format("{} {}: cannot read it", option, path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.size() < 16)
    throw InvalidArgument(fmt::format(
        "{} {}: it must hold at least 16 characters (e.g. openssl rand -hex 32)", option, path));
  for (const char c : token) {
    if (c <= ' ' || c == 0x7f)
      throw InvalidArgument(
          fmt::format("{} {}: it must hold one line of printable characters", option, path));
  }
  return token;
}

}  // namespace

std::string read_token_file(const std::string& path) {
  return read_secret_file(path, "--token-file");
}

std::string read_callback_secret_file(const std::string& path) {
  return read_secret_file(path, "--callback-secret-file");
}

struct Server::Impl : detail::Router {
  explicit Impl(ServerOptions o)
      : options(std::move(o)),
        admin(options.schema),
        pool(options.database_url,
             static_cast<std::size_t>(std::max(0, options.max_idle_connections))) {}

  ServerOptions options;
  Admin admin;
  detail::ConnectionPool pool;

  // Login sessions: a new random id per login, valid until its expiry or its logout.
  // Guarded by sessions_mu (the server's threads log in, out and check concurrently).
  std::mutex sessions_mu;
  std::map<std::string, std::chrono::steady_clock::time_point> sessions;

  std::string open_session() {
    const auto now = std::chrono::steady_clock::now();
    std::string id = random_hex(32);
    std::lock_guard lock(sessions_mu);
    std::erase_if(sessions, [&](const auto& s) { return s.second <= now; });
    sessions.emplace(id, now + options.session_ttl);
    return id;
  }
  void close_session(const std::string& id) {
    std::lock_guard lock(sessions_mu);
    sessions.erase(id);
  }
  bool session_valid(const std::string& id) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(sessions_mu);
    // Compared in constant time against every live session: the lookup itself must not
    // tell how much of a guessed id matched.
    bool found = false;
    for (const auto& [sid, expires] : sessions)
      found = (equal_constant_time(sid, id) && expires > now) || found;
    return found;
  }

  std::mutex mu;  // serialises start() and stop()
  std::unique_ptr<httplib::Server> http;
  std::thread thread;
  std::atomic<bool> listen_returned{false};
  std::atomic<int> bound_port{0};

  enum class Access { kRead, kWrite, kSigned };

  // Signed callbacks seen within their window (docs/api.md, "Signing a callback"): each
  // is accepted once. Shared by the server's threads; CallbackReplayCache locks itself.
  CallbackReplayCache replays;

  // 404/403/415/401/409/503 unless a signed callback request may proceed
  // (awa/callback.hpp). Everything the callback routes read is signed: the path (id and
  // action), the query's parameters as the routes see them, and the raw body, which is
  // read as JSON whatever headers say (a body under another Content-Type is refused, so
  // an unsigned header cannot make the routes ignore it).
  void check_signed(const httplib::Request& req) {
    if (!options.callback_secret)
      throw HttpError(404,
                      "callbacks are not enabled: start awa serve with --callback-secret-file");
    if (options.read_only)
      throw HttpError(403, "read-only: awa serve was started with --read-only");
    // Params and the completion read a body only under this prefix; a form body would
    // also land in req.params beside the query's parameters.
    if (!req.body.empty() && req.get_header_value("Content-Type").rfind("application/json", 0) != 0)
      throw HttpError(415,
                      "a signed callback's body must be JSON (Content-Type: "
                      "application/json), or empty");
    const std::string ts_text = req.get_header_value(kCallbackTimestampHeader);
    const std::string signature = req.get_header_value(kCallbackSignatureHeader);
    if (ts_text.empty() || signature.empty())
      throw HttpError(401, fmt::format("callback requests must be signed: headers {} and {}",
                                       kCallbackTimestampHeader, kCallbackSignatureHeader));
    std::int64_t ts = 0;
    const auto [p, ec] = std::from_chars(ts_text.data(), ts_text.data() + ts_text.size(), ts);
    // One spelling per second ("0017..." or "-0" would sign another string than sent).
    if (ec != std::errc() || p != ts_text.data() + ts_text.size() || ts_text != std::to_string(ts))
      throw HttpError(401, fmt::format("{} must be unix seconds", kCallbackTimestampHeader));
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    if (ts < now - kCallbackMaxSkew.count() || ts > now + kCallbackMaxSkew.count())
      throw HttpError(401, fmt::format("{} is more than {} s away from the server's clock",
                                       kCallbackTimestampHeader, kCallbackMaxSkew.count()));
    // The path as sent (the route matched its decoded form, a function of it); the query
    // as httplib parsed it into req.params, which is what the routes read (the body is
    // not a form: refused above), re-encoded into the canonical form the sender signed.
    const std::string_view target = req.target;
    const std::string_view path = target.substr(0, target.find('?'));
    if (path.empty() || path.front() != '/')
      throw HttpError(400, "the request target must begin with the path");
    CallbackRequest signed_request;
    signed_request.method = req.method;
    signed_request.path = std::string(path);
    signed_request.query = callback_query_string(
        std::vector<CallbackQueryParam>(req.params.begin(), req.params.end()));
    signed_request.body = req.body;
    if (!callback_signature_valid(*options.callback_secret, ts, signed_request, signature, now))
      throw HttpError(401,
                      "callback signature does not match the request (method, path, query and "
                      "body, signed at the timestamp given; docs/api.md, \"Signing a "
                      "callback\")");
    switch (replays.admit(signature, ts, now)) {
      case CallbackReplayCache::Admission::kAdmitted:
        return;
      case CallbackReplayCache::Admission::kReplayed:
        throw HttpError(409,
                        "replayed: this signed request was accepted already; nothing changed "
                        "(a new request needs a new signature: sign it again, with the "
                        "current time)",
                        {{"replayed", true}});
      case CallbackReplayCache::Admission::kFull:
        throw HttpError(503, fmt::format("too many signed callbacks in the last {} s to remember "
                                         "them all; nothing changed: sign it again and retry later",
                                         kCallbackMaxSkew.count()));
    }
  }

  // 401/403 unless the request may proceed; see docs/api.md for the order.
  void check(const httplib::Request& req, Access access) {
    if (access == Access::kSigned) return check_signed(req);
    const bool state_changing = access == Access::kWrite;
    if (!options.token) {
      // Bound to loopback without a token: a page of another site that got its name
      // resolved to 127.0.0.1 (DNS rebinding) would be same-origin; its Host header
      // still names that site.
      if (!is_loopback(host_of(req.get_header_value("Host"))))
        throw HttpError(403, "Host header must name a loopback address when no token is set");
    } else if (!authenticated(req)) {
      throw HttpError(401,
                      "authentication required: Authorization: Bearer <token>, or POST /login");
    }
    if (!state_changing) return;
    if (options.read_only)
      throw HttpError(403, "read-only: awa serve was started with --read-only");
    // Browsers send a custom header cross-origin only after a CORS preflight, which this
    // server never grants: a form or fetch from another origin cannot carry it.
    if (req.get_header_value(kCsrfHeader) != "1")
      throw HttpError(403, fmt::format("CSRF check failed: state-changing requests need the "
                                       "header {}: 1",
                                       kCsrfHeader));
  }

  bool authenticated(const httplib::Request& req) {
    const std::string auth = req.get_header_value("Authorization");
    constexpr std::string_view bearer = "Bearer ";
    if (auth.size() > bearer.size() && std::string_view(auth).substr(0, bearer.size()) == bearer)
      return equal_constant_time(std::string_view(auth).substr(bearer.size()), *options.token);
    if (const auto c = cookie_value(req, kSessionCookie)) return session_valid(*c);
    return false;
  }

  void handle(const httplib::Request& req, httplib::Response& res, Access access,
              const detail::Handler& h) {
    try {
      check(req, access);
      auto conn = pool.take();
      bool keep = true;
      try {
        h(req, res, conn, admin);
      } catch (const HttpError&) {
        keep = !conn.in_transaction();
        if (keep) pool.give(std::move(conn));
        throw;
      } catch (const InvalidArgument&) {
        // Refused before any statement ran: the connection is as it was.
        keep = !conn.in_transaction();
        if (keep) pool.give(std::move(conn));
        throw;
      }
      if (!conn.in_transaction()) pool.give(std::move(conn));
    } catch (const HttpError& e) {
      auto body = e.extra();
      body["error"] = e.what();
      send_json(res, e.status(), body);
    } catch (const InvalidArgument& e) {
      send_json(res, 400, {{"error", e.what()}});
    } catch (const ConstraintViolation& e) {
      send_json(res, 400, error_body(e));
    } catch (const ConnectionError& e) {
      send_json(res, 503, error_body(e));
    } catch (const DatabaseError& e) {
      auto body = error_body(e);
      if (e.sqlstate() == "42P01" || e.sqlstate() == "3F000" || e.sqlstate() == "42883")
        body["hint"] = fmt::format(
            "schema {} holds no awa tables (not migrated?): run awa "
            "migrate --schema {}",
            options.schema, options.schema);
      send_json(res, 500, body);
    } catch (const std::exception& e) {
      send_json(res, 500, {{"error", e.what()}});
    }
  }

  static nlohmann::json error_body(const Error& e) {
    nlohmann::json body{{"error", e.what()}};
    if (!e.sqlstate().empty()) body["sqlstate"] = e.sqlstate();
    if (!e.detail().empty()) body["detail"] = e.detail();
    if (!e.hint().empty()) body["hint"] = e.hint();
    return body;
  }

  const ServerOptions& server_options() const override { return options; }
  void get(const std::string& pattern, detail::Handler h) override {
    http->Get(pattern,
              [this, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
                handle(req, res, Access::kRead, h);
              });
  }
  void post(const std::string& pattern, detail::Handler h) override {
    http->Post(pattern,
               [this, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
                 handle(req, res, Access::kWrite, h);
               });
  }
  void post_signed(const std::string& pattern, detail::Handler h) override {
    http->Post(pattern,
               [this, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
                 handle(req, res, Access::kSigned, h);
               });
  }

  void add_pages() {
    detail::add_page_routes(*http, [this](const httplib::Request& req, httplib::Response& res) {
      if (options.token || is_loopback(host_of(req.get_header_value("Host")))) return true;
      send_json(res, 403, {{"error", "Host header must name a loopback address"}});
      return false;
    });
    // The token in a form field or JSON {"token": ...}; answers with the session cookie.
    http->Post("/login", [this](const httplib::Request& req, httplib::Response& res) {
      try {
        if (!options.token) throw HttpError(404, "no token is set: nothing to log in to");
        // Login CSRF: a browser always sends Origin on a cross-origin POST. Behind a
        // TLS-terminating proxy (which must pass the Host header on) the page's origin is
        // https; no other site can be https://<our host>.
        const std::string origin = req.get_header_value("Origin");
        const std::string host = req.get_header_value("Host");
        if (!origin.empty() && origin != "http://" + host && origin != "https://" + host)
          throw HttpError(403, "CSRF check failed: Origin does not match Host");
        const detail::Params p(req, {"token"});
        const auto token = p.text("token");
        if (!token || !equal_constant_time(*token, *options.token))
          throw HttpError(401, "wrong token");
        res.set_header("Set-Cookie",
                       fmt::format("{}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict{}",
                                   kSessionCookie, open_session(), options.session_ttl.count(),
                                   via_https(req) ? "; Secure" : ""));
        send_json(res, 200, {{"logged_in", true}});
      } catch (const HttpError& e) {
        send_json(res, e.status(), {{"error", e.what()}});
      }
    });
    // Ends the session on the server too: the cookie, replayed, no longer works.
    http->Post("/logout", [this](const httplib::Request& req, httplib::Response& res) {
      if (const auto c = cookie_value(req, kSessionCookie)) close_session(*c);
      res.set_header("Set-Cookie",
                     fmt::format("{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}",
                                 kSessionCookie, via_https(req) ? "; Secure" : ""));
      send_json(res, 200, {{"logged_in", false}});
    });
    // Anything unrouted (or a handler's bare status) gets a JSON body too.
    const httplib::Server::HandlerWithResponse on_error = [](const httplib::Request& req,
                                                             httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      const std::string message = res.status == 404
                                      ? fmt::format("no such endpoint: {} {}", req.method, req.path)
                                      : fmt::format("HTTP {}", res.status);
      send_json(res, res.status, nlohmann::json{{"error", message}});
      return httplib::Server::HandlerResponse::Handled;
    };
    http->set_error_handler(on_error);
  }
};

Server::Server(ServerOptions options) {
  if (options.port < 0 || options.port > 65535)
    throw InvalidArgument("awa serve: port outside 0..65535");
  if (options.token && options.token->empty()) options.token.reset();
  if (options.callback_secret && options.callback_secret->empty()) options.callback_secret.reset();
  if (!is_loopback(options.host) && !options.token) {
    throw InvalidArgument(fmt::format(
        "awa serve: refusing to listen on {} without a token: other hosts could read and "
        "change every queue. Pass --token-file FILE, or bind a loopback address "
        "(127.0.0.1, ::1)",
        options.host));
  }
  impl_ = std::make_unique<Impl>(std::move(options));  // Admin checks the schema name
}

Server::~Server() { stop(); }

void Server::start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->http) return;
  // Fail fast on a bad URL or an unreachable database, before binding.
  impl_->pool.give(impl_->pool.take());

  impl_->http = std::make_unique<httplib::Server>();
  auto& http = *impl_->http;
  // No SO_REUSEPORT (httplib's default): a second server must not share the port.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http.set_read_timeout(std::chrono::seconds(10));
  // stop() waits for idle keep-alive connections to time out: a dashboard left open
  // would otherwise hold a SIGTERM for httplib's default 5 s.
  http.set_keep_alive_timeout(1);
  http.set_write_timeout(std::chrono::seconds(10));
  http.set_payload_max_length(1 << 20);
  http.set_default_headers({{"Cache-Control", "no-store"}, {"X-Content-Type-Options", "nosniff"}});
  impl_->add_pages();
  detail::add_queue_routes(*impl_);
  detail::add_job_routes(*impl_);
  detail::add_dlq_routes(*impl_);
  detail::add_system_routes(*impl_);
  detail::add_rate_routes(*impl_);
  detail::add_callback_routes(*impl_);
  detail::add_batch_routes(*impl_);

  int port = impl_->options.port;
  if (port == 0) {
    port = http.bind_to_any_port(impl_->options.host);
  } else if (!http.bind_to_port(impl_->options.host, port)) {
    port = -1;
  }
  if (port <= 0) {
    impl_->http.reset();
    throw Error(
        fmt::format("awa serve: cannot bind {}:{}", impl_->options.host, impl_->options.port));
  }
  impl_->bound_port.store(port);
  impl_->listen_returned.store(false);
  impl_->thread = std::thread([this, srv = &http] {
    srv->listen_after_bind();
    impl_->listen_returned.store(true);
  });
  // httplib's stop() does nothing until the accept loop runs: wait for it.
  while (!http.is_running() && !impl_->listen_returned.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Server::stop() {
  if (!impl_) return;
  std::lock_guard lock(impl_->mu);
  if (!impl_->http) return;
  impl_->http->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->http.reset();
  impl_->bound_port.store(0);
}

int Server::port() const noexcept { return impl_->bound_port.load(); }

const ServerOptions& Server::options() const noexcept { return impl_->options; }

}  // namespace awa::serve
