// What the test worker programs share: the database URL from the environment, the stop
// signals, and one connection per handler thread.
#pragma once

#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "awa/connection.hpp"

namespace awa::test_workers {

// DATABASE_URL, or a message naming `program` and exit status 2.
inline std::string database_url_or_exit(const char* program) {
  const char* url = std::getenv("DATABASE_URL");
  if (url == nullptr) {
    std::cerr << program << ": DATABASE_URL is not set\n";
    std::exit(2);
  }
  return url;
}

// SIGTERM and SIGINT, blocked. Call before any thread starts, so every thread inherits the
// mask and sigwait on the returned set is the only receiver.
inline sigset_t block_stop_signals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  return stop;
}

// One connection per handler thread, opened on first use.
inline Connection& thread_connection(const std::string& url) {
  thread_local std::optional<Connection> conn;
  if (!conn) conn.emplace(Connection::connect(url));
  return *conn;
}

}  // namespace awa::test_workers
