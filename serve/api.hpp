// Internals of awa_serve shared by server.cpp and the routes_*.cpp files.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/serve.hpp"

namespace awa::serve::detail {

// A request the API refuses before or instead of doing anything: answered with `status`
// and {"error": message} plus `extra` fields.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message, nlohmann::json extra = nlohmann::json::object())
      : std::runtime_error(message), status_(status), extra_(std::move(extra)) {}
  int status() const noexcept { return status_; }
  const nlohmann::json& extra() const noexcept { return extra_; }

 private:
  int status_;
  nlohmann::json extra_;
};

// User text (job args, errors, ordering keys) may hold any bytes: dump() never throws.
std::string dump(const nlohmann::json& j);
void send_json(httplib::Response& res, int status, const nlohmann::json& body);

// The request's parameters: the query string, a form body, or a JSON object body, merged.
// A name given twice, or one outside `allowed`, is a 400.
class Params {
 public:
  Params(const httplib::Request& req, std::initializer_list<const char*> allowed);
  std::optional<std::string> text(const std::string& name) const;
  // A decimal integer in [min, max], else 400.
  std::optional<std::int64_t> integer(const std::string& name, std::int64_t min,
                                      std::int64_t max) const;
  // "true"/"1" or "false"/"0", else 400.
  bool flag(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
};

// A job id from the path: a positive decimal integer, else 400.
JobId parse_job_id(const std::string& text);

// Idle connections for reuse; one thread per connection at a time (the mutex guards the
// idle list only).
class ConnectionPool {
 public:
  ConnectionPool(std::string url, std::size_t max_idle)
      : url_(std::move(url)), max_idle_(max_idle) {}
  Connection take();
  void give(Connection conn);

 private:
  std::string url_;
  std::size_t max_idle_;
  std::mutex mu_;
  std::vector<Connection> idle_;
};

using Handler =
    std::function<void(const httplib::Request&, httplib::Response&, Connection&, const Admin&)>;

// Registers API routes behind the server's checks: authentication, the Host check, and
// for POST the read-only refusal and the CSRF header. Each handler gets a database
// connection; errors become JSON responses.
class Router {
 public:
  virtual ~Router() = default;
  virtual const ServerOptions& server_options() const = 0;
  virtual void get(const std::string& pattern, Handler h) = 0;
  virtual void post(const std::string& pattern, Handler h) = 0;
  // A POST from another system, authenticated by its HMAC signature (awa/callback.hpp)
  // over the method, path, query and body instead of the token, session and CSRF header;
  // refused when no callback secret is set (404), on a read-only server (403), for a body
  // that is not JSON (415), a bad signature (401) and a signature accepted before (409).
  // The handler reads only what was signed: the path, req.params (the query's) and a JSON
  // body.
  virtual void post_signed(const std::string& pattern, Handler h) = 0;
};

void add_queue_routes(Router& r);
void add_job_routes(Router& r);
void add_dlq_routes(Router& r);
void add_system_routes(Router& r);
void add_rate_routes(Router& r);
void add_callback_routes(Router& r);
void add_batch_routes(Router& r);

// The "minutes" parameter of the rate endpoints: 1..kMaxRateWindowMinutes, else 400.
std::chrono::minutes rate_window(const Params& p, int default_minutes);

// False (and the response written) when a page or asset must not be served: a Host
// header naming no loopback address while no token is set (DNS rebinding).
using HostCheck = std::function<bool(const httplib::Request&, httplib::Response&)>;
void add_page_routes(httplib::Server& http, const HostCheck& host_ok);

}  // namespace awa::serve::detail
