// awa::Connection / awa::Transaction: the public face of pg::Connection.
#include "awa/connection.hpp"

#include <array>
#include <charconv>
#include <system_error>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "pg/params.hpp"
#include "pg/result.hpp"

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

Connection Connection::adopt(pg_conn* native, const ConnectionOptions& options) {
  return pg::adopt(pg::Connection::adopt(native, options.pooled));
}

pg_conn* Connection::release() noexcept { return impl_ ? impl_->conn.release() : nullptr; }

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

namespace {

pg::Params to_params(const std::vector<SqlParam>& params) {
  pg::Params p;
  for (const auto& v : params) {
    if (v.value()) {
      p.add(std::string_view(*v.value()));
    } else {
      p.null();
    }
  }
  return p;
}

}  // namespace

SqlParam::SqlParam(double value) {
  std::array<char, 32> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), value);
  if (ec != std::errc()) throw InvalidArgument("SqlParam: cannot format a double");
  value_ = std::string(buf.data(), end);
}

void Connection::execute(std::string_view sql) { impl_->conn.exec(sql); }

std::int64_t Connection::execute(std::string_view sql, const std::vector<SqlParam>& params) {
  return impl_->conn.exec(sql, to_params(params)).affected_rows();
}

QueryResult Connection::query(std::string_view sql, const std::vector<SqlParam>& params) {
  const pg::Result r = impl_->conn.exec(sql, to_params(params));
  QueryResult out;
  out.affected_rows = r.affected_rows();
  for (int c = 0; c < r.columns(); ++c) out.columns.emplace_back(r.column_name(c));
  out.rows.reserve(static_cast<std::size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) {
    auto& values = out.rows.emplace_back();
    values.reserve(out.columns.size());
    for (int c = 0; c < r.columns(); ++c) {
      if (r.is_null(row, c)) {
        values.emplace_back(std::nullopt);
      } else {
        values.emplace_back(std::string(r.text(row, c)));
      }
    }
  }
  return out;
}

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
