// A bounded pool of connections handing out exclusive leases.
//
// acquire() returns an idle connection, or opens a new one while fewer than max_size
// exist, or waits (up to the timeout) for a lease to come back. When a lease is returned
// the pool checks the connection: a broken one (lost backend, failed COPY, ...) is closed
// and its place freed; one left inside a transaction is rolled back first. So a
// terminated backend costs one failed call, never a poisoned pool.
//
// Thread safety: all methods may be called from any thread. A Lease belongs to one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "pg/connection.hpp"

namespace awa::pg {

class Pool {
 public:
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    Connection& operator*() noexcept { return *conn_; }
    Connection* operator->() noexcept { return conn_.get(); }
    Connection& get() noexcept { return *conn_; }

   private:
    friend class Pool;
    Lease(Pool* pool, std::unique_ptr<Connection> conn) : pool_(pool), conn_(std::move(conn)) {}
    Pool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  // max_size: Default 10, at least 1.
  explicit Pool(ConnectOptions options, std::size_t max_size = 10);
  ~Pool();  // REQUIRES: every lease has been returned

  // Throws ConnectionError if no connection could be had within `timeout`.
  Lease acquire(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  std::size_t max_size() const noexcept { return max_size_; }
  std::size_t open_connections() const;  // idle + leased
  std::size_t idle_connections() const;
  const ConnectOptions& options() const noexcept { return options_; }

 private:
  void give_back(std::unique_ptr<Connection> conn);

  const ConnectOptions options_;
  const std::size_t max_size_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mu_
  std::size_t open_ = 0;                           // guarded by mu_
};

}  // namespace awa::pg
