// The internal connection behind the public awa::Connection, for the library's own code
// (storage, runtime, admin), its tests and benchmarks. Not installed: users see only
// awa::Connection.
#pragma once

#include <memory>

#include "awa/connection.hpp"
#include "pg/connection.hpp"

namespace awa {

struct Connection::Impl {
  pg::Connection conn;
};

namespace detail {
struct ConnectionAccess {
  static pg::Connection& native(Connection& c) noexcept { return c.impl_->conn; }
  static Connection adopt(pg::Connection conn) {
    return Connection(std::make_unique<Connection::Impl>(Connection::Impl{std::move(conn)}));
  }
};
}  // namespace detail

namespace pg {
// The pg::Connection inside a public connection.
inline Connection& native(awa::Connection& c) noexcept {
  return awa::detail::ConnectionAccess::native(c);
}
// Wraps an internal connection in the public type.
inline awa::Connection adopt(Connection conn) {
  return awa::detail::ConnectionAccess::adopt(std::move(conn));
}
}  // namespace pg

}  // namespace awa
