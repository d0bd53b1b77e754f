#include "pg/pool.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <utility>

#include "awa/error.hpp"

namespace awa::pg {
namespace {

// Whether a connection can be handed out again as is. A pipeline or COPY left unfinished,
// or a command still running, would surprise the next user: such connections are closed.
bool reusable(const Connection& conn) {
  PGconn* c = conn.native();
  if (c == nullptr || PQstatus(c) != CONNECTION_OK) return false;
  if (PQpipelineStatus(c) != PQ_PIPELINE_OFF || PQisnonblocking(c) != 0) return false;
  const auto tx = PQtransactionStatus(c);
  return tx == PQTRANS_IDLE || tx == PQTRANS_INTRANS || tx == PQTRANS_INERROR;
}

// An idle connection whose backend went away (terminated, server restart) still reports
// CONNECTION_OK until it is used; the server's goodbye is already readable on the socket.
// Reading it without blocking catches most such deaths before a caller trips over them.
bool still_alive(Connection& conn) {
  PGconn* c = conn.native();
  if (c == nullptr || PQstatus(c) != CONNECTION_OK) return false;
  pollfd pfd{};
  pfd.fd = PQsocket(c);
  pfd.events = POLLIN;
  if (pfd.fd < 0) return false;
  // The goodbye is an ErrorResponse followed by EOF: the first read returns the message
  // (which libpq, idle, treats as a notice), only a later one sees the EOF. A healthy
  // connection stops being readable at once, so the loop ends without waiting.
  for (int i = 0; i < 4 && ::poll(&pfd, 1, 0) > 0; ++i) {
    if (PQconsumeInput(c) == 0) return false;
    (void)PQisBusy(c);  // parses what was read, so it is not seen as readable again
  }
  return PQstatus(c) == CONNECTION_OK;
}

}  // namespace

Pool::Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), conn_(std::move(other.conn_)) {}

Pool::Lease::~Lease() {
  if (pool_ != nullptr && conn_) pool_->give_back(std::move(conn_));
}

Pool::Pool(ConnectOptions options, std::size_t max_size)
    : options_(std::move(options)), max_size_(std::max<std::size_t>(max_size, 1)) {
  idle_.reserve(max_size_);  // give_back() then never allocates
}

Pool::~Pool() {
  std::lock_guard lock(mu_);
  idle_.clear();
}

Pool::Lease Pool::acquire(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mu_);
  for (;;) {
    while (!idle_.empty()) {
      std::unique_ptr<Connection> conn = std::move(idle_.back());
      idle_.pop_back();
      lock.unlock();
      if (still_alive(*conn)) return Lease(this, std::move(conn));
      conn.reset();  // close outside the lock
      lock.lock();
      --open_;
    }
    if (open_ < max_size_) {
      ++open_;  // reserve the slot, then connect without holding the lock
      lock.unlock();
      try {
        return Lease(this, std::make_unique<Connection>(Connection::connect(options_)));
      } catch (...) {
        lock.lock();
        --open_;
        cv_.notify_one();
        throw;
      }
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= max_size_) {
      throw ConnectionError("no PostgreSQL connection available within " +
                                std::to_string(timeout.count()) + " ms: all " +
                                std::to_string(max_size_) + " pool connections are in use",
                            Retry::kRetryCall);
    }
  }
}

void Pool::give_back(std::unique_ptr<Connection> conn) {
  bool keep = reusable(*conn);
  if (keep && conn->in_transaction()) {
    try {
      conn->exec("ROLLBACK");
      keep = conn->idle();
    } catch (...) {
      keep = false;
    }
  }
  if (!keep) conn.reset();  // PQfinish outside the lock: it talks to the server
  {
    std::lock_guard lock(mu_);
    if (keep) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;
    }
  }
  cv_.notify_one();
}

std::size_t Pool::open_connections() const {
  std::lock_guard lock(mu_);
  return open_;
}

std::size_t Pool::idle_connections() const {
  std::lock_guard lock(mu_);
  return idle_.size();
}

}  // namespace awa::pg
