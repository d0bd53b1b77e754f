// awa::Connection / awa::Transaction: the public face of pg::Connection.
#include "awa/connection.hpp"

#include "pg/connection.hpp"

namespace awa {

Connection Connection::connect(const std::string& url, std::chrono::milliseconds timeout) {
  pg::ConnectOptions o;
  o.url = url;
  o.connect_timeout = timeout;
  return Connection(std::make_unique<pg::Connection>(pg::Connection::connect(o)));
}

Connection::Connection(std::unique_ptr<pg::Connection> conn) : conn_(std::move(conn)) {}
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

void Connection::execute(std::string_view sql) { conn_->exec(sql); }
bool Connection::in_transaction() const { return conn_->in_transaction(); }

Transaction::Transaction(Connection& conn)
    : tx_(std::make_unique<pg::Transaction>(conn.native())) {}
Transaction::~Transaction() = default;  // pg::Transaction rolls back unless committed
void Transaction::commit() { tx_->commit(); }
void Transaction::rollback() { tx_->rollback(); }

}  // namespace awa
