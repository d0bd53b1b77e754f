// awa::Connection / awa::Transaction: the public face of pg::Connection.
#include "awa/connection.hpp"

#include "pg/connection.hpp"
#include "pg/native.hpp"

namespace awa {

Connection Connection::connect(const std::string& url, std::chrono::milliseconds timeout) {
  ConnectionOptions options;
  options.timeout = timeout;
  return connect(url, options);
}

Connection Connection::connect(const std::string& url, const ConnectionOptions& options) {
  pg::ConnectOptions o;
  o.url = url;
  o.connect_timeout = options.timeout;
  o.pooled = options.pooled;
  return pg::adopt(pg::Connection::connect(o));
}

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

void Connection::execute(std::string_view sql) { impl_->conn.exec(sql); }
bool Connection::in_transaction() const { return impl_->conn.in_transaction(); }

struct Transaction::Impl {
  explicit Impl(pg::Connection& conn) : tx(conn) {}
  pg::Transaction tx;
};

Transaction::Transaction(Connection& conn) : impl_(std::make_unique<Impl>(pg::native(conn))) {}
Transaction::~Transaction() = default;  // pg::Transaction rolls back unless committed
void Transaction::commit() { impl_->tx.commit(); }
void Transaction::rollback() { impl_->tx.rollback(); }

}  // namespace awa
