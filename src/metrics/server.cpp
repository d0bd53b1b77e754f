// The /metrics endpoint, on cpp-httplib. httplib stays out of the public header.
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "awa/error.hpp"
#include "awa/metrics.hpp"

namespace awa::metrics {

struct Server::Impl {
  // An empty address means loopback, never "every interface" (kDefaultMetricsHost in
  // awa/metrics.hpp).
  Impl(std::string a, int p, Registry& r)
      : address(a.empty() ? std::string(kDefaultMetricsHost) : std::move(a)),
        requested_port(p),
        registry(r) {}

  const std::string address;
  const int requested_port;
  Registry& registry;

  std::function<Readiness()> readiness;  // set before start()
  std::mutex mu;                         // serialises start() and stop()
  std::unique_ptr<httplib::Server> http;
  std::thread thread;
  std::atomic<bool> listen_returned{false};
  std::atomic<int> bound_port{0};
};

Server::Server(std::string address, int port, Registry& registry)
    : impl_(std::make_unique<Impl>(std::move(address), port, registry)) {
  if (port < 0 || port > 65535) throw InvalidArgument("metrics server: port outside 0..65535");
}

Server::~Server() { stop(); }

void Server::set_readiness(std::function<Readiness()> check) {
  std::lock_guard lock(impl_->mu);
  impl_->readiness = std::move(check);
}

void Server::start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->http) return;
  auto http = std::make_unique<httplib::Server>();
  // A scrape endpoint needs little: two workers, and no keep-alive so that stop() never
  // waits out an idle scraper's connection (httplib holds a worker per kept-alive socket).
  http->new_task_queue = [] { return new httplib::ThreadPool(2); };
  http->set_keep_alive_max_count(1);
  // httplib's default sets SO_REUSEPORT, which lets a second process bind the same port
  // and have the kernel split scrapes between the two: a metrics port must be exclusive.
  // SO_REUSEADDR alone still allows a quick restart over TIME_WAIT sockets.
  http->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http->set_read_timeout(std::chrono::seconds(5));
  http->set_write_timeout(std::chrono::seconds(5));

  Registry* registry = &impl_->registry;
  http->Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->expose(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain; charset=utf-8");
  });
  http->Get("/readyz", [check = impl_->readiness](const httplib::Request&, httplib::Response& res) {
    Readiness r;
    if (check) {
      try {
        r = check();
      } catch (const std::exception& e) {
        r = Readiness{false, {std::string("the readiness check failed: ") + e.what()}};
      }
    }
    res.status = r.ready ? 200 : 503;
    res.set_content(nlohmann::json{{"ready", r.ready}, {"reasons", r.reasons}}.dump() + "\n",
                    "application/json");
  });

  int port = impl_->requested_port;
  if (port == 0) {
    port = http->bind_to_any_port(impl_->address);
  } else if (!http->bind_to_port(impl_->address, port)) {
    port = -1;
  }
  if (port <= 0) {
    throw Error("metrics server: cannot bind " + impl_->address + ":" +
                    std::to_string(impl_->requested_port),
                Retry::kDoNotRetry);
  }
  impl_->bound_port.store(port);
  impl_->listen_returned.store(false);
  impl_->thread = std::thread([this, srv = http.get()] {
    srv->listen_after_bind();
    impl_->listen_returned.store(true);
  });
  // httplib's stop() does nothing until the accept loop has marked itself running, so a
  // stop() right after start() would leave the thread listening forever. Wait for it.
  while (!http->is_running() && !impl_->listen_returned.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->http = std::move(http);
}

void Server::stop() {
  std::lock_guard lock(impl_->mu);
  if (!impl_->http) return;
  impl_->http->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->http.reset();
  impl_->bound_port.store(0);
}

int Server::port() const noexcept { return impl_->bound_port.load(); }

const std::string& Server::address() const noexcept { return impl_->address; }

}  // namespace awa::metrics
