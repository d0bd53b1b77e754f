#include "sql.hpp"

#include <libpq-fe.h>

#include <string>

#include "awa/error.hpp"

namespace chaos {

void Db::Deleter::operator()(pg_conn* c) const noexcept { PQfinish(c); }
Db::Db(pg_conn* c) : conn_(c) {}
Db::Db(Db&&) noexcept = default;
Db& Db::operator=(Db&&) noexcept = default;
Db::~Db() = default;

Db Db::connect(const std::string& url, const std::string& application_name) {
  const char* const keys[] = {"dbname", "connect_timeout", "application_name", nullptr};
  const char* const values[] = {url.c_str(), "3", application_name.c_str(), nullptr};
  Db db(PQconnectdbParams(keys, values, 1));
  if (!db.conn_) throw awa::ConnectionError("libpq: out of memory");
  if (PQstatus(db.conn_.get()) != CONNECTION_OK)
    throw awa::ConnectionError(std::string("connect: ") + PQerrorMessage(db.conn_.get()),
                               awa::Retry::kRetryCall);
  return db;
}

bool Db::ok() const { return conn_ && PQstatus(conn_.get()) == CONNECTION_OK; }

namespace {

// Throws the error a failed result stands for.
[[noreturn]] void raise(pg_conn* conn, const PGresult* res) {
  std::string message = PQerrorMessage(conn);
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const std::string sqlstate = state != nullptr ? state : "";
  // No SQLSTATE, a class 08 one, or an administrator shutdown: the session is gone.
  if (PQstatus(conn) != CONNECTION_OK || sqlstate.empty() || sqlstate.starts_with("08") ||
      sqlstate.starts_with("57P"))
    throw awa::ConnectionError(message, awa::Retry::kRetryCall, sqlstate);
  throw awa::DatabaseError(message, awa::Retry::kDoNotRetry, sqlstate);
}

}  // namespace

void Db::script(const std::string& sql) {
  std::unique_ptr<PGresult, decltype(&PQclear)> res(PQexec(conn_.get(), sql.c_str()), &PQclear);
  const auto status = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) raise(conn_.get(), res.get());
}

std::vector<Row> Db::query(const std::string& sql, const std::vector<std::string>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  std::unique_ptr<PGresult, decltype(&PQclear)> res(
      PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                   values.data(), nullptr, nullptr, 0),
      &PQclear);
  const auto status = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) raise(conn_.get(), res.get());
  std::vector<Row> rows;
  const int n = PQntuples(res.get());
  const int m = PQnfields(res.get());
  rows.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    Row row;
    row.reserve(static_cast<std::size_t>(m));
    for (int j = 0; j < m; ++j) {
      if (PQgetisnull(res.get(), i, j) != 0)
        row.emplace_back(std::nullopt);
      else
        row.emplace_back(std::string(PQgetvalue(res.get(), i, j),
                                     static_cast<std::size_t>(PQgetlength(res.get(), i, j))));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::optional<std::string> Db::scalar(const std::string& sql,
                                      const std::vector<std::string>& params) {
  auto rows = query(sql, params);
  if (rows.empty() || rows[0].empty()) return std::nullopt;
  return rows[0][0];
}

long long to_ll(const std::optional<std::string>& v) { return v ? std::stoll(*v) : 0; }
double to_double(const std::optional<std::string>& v) { return v ? std::stod(*v) : 0.0; }

}  // namespace chaos
