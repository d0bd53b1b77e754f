// A database connection as the public API sees it, for transactional enqueue:
//
//   awa::Connection conn = awa::Connection::connect(url);
//   awa::Transaction tx(conn);
//   conn.execute("UPDATE orders SET state = $1 WHERE id = $2", {"paid", order_id});
//   storage.insert(conn, awa::NewJob("send_receipt", {{"order", order_id}}));
//   tx.commit();  // the job becomes visible with the order update, or neither does
//
// Move-only; one thread at a time. libpq stays out of this header: a PGconn appears only
// as libpq's own struct name, declared below.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct pg_conn;  // libpq's PGconn (typedef struct pg_conn PGconn in libpq-fe.h)

namespace awa {

namespace detail {
struct ConnectionAccess;
}  // namespace detail

struct ConnectionOptions {
  std::chrono::milliseconds timeout{5000};
  // The URL leads to a transaction-mode pooler (PgBouncer pool_mode = transaction), where
  // consecutive transactions may run on different server sessions shared with other
  // clients: nothing is prepared on the server and no session state is set. Producers
  // and Admin calls then work through the pooler; `awa migrate` and LISTEN still need a
  // direct URL (docs/deployment.md).
  bool pooled = false;
};

// A parameter of Connection::execute / query: sent apart from the SQL text (never
// spliced into it), in PostgreSQL's text form, which the server converts to the type the
// statement expects. std::nullopt, or an empty optional, is NULL.
class SqlParam {
 public:
  SqlParam(std::nullopt_t) noexcept {}  // NOLINT: implicit by design
  SqlParam(std::string_view text) : value_(std::string(text)) {}
  SqlParam(const std::string& text) : value_(text) {}
  SqlParam(const char* text) : value_(std::string(text)) {}
  SqlParam(bool value) : value_(value ? "true" : "false") {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) SqlParam(T value) : value_(std::to_string(value)) {}
  SqlParam(double value);  // shortest text that reads back as the same double
  template <class T>
  SqlParam(const std::optional<T>& value)
      : value_(value ? SqlParam(*value).value_ : std::nullopt) {}

  const std::optional<std::string>& value() const noexcept { return value_; }

 private:
  std::optional<std::string> value_;
};

// What Connection::query returns: every value in its text form, std::nullopt for NULL.
struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;
  // PostgreSQL's row count of the command: rows an INSERT, UPDATE or DELETE touched, rows a
  // SELECT returned; 0 for commands without one.
  std::int64_t affected_rows = 0;
};

class Connection {
 public:
  // Throws ConnectionError when the database cannot be reached within the timeout.
  static Connection connect(const std::string& url,
                            std::chrono::milliseconds timeout = std::chrono::seconds(5));
  static Connection connect(const std::string& url, const ConnectionOptions& options);
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  ~Connection();

  // Wraps a connection the application opened with libpq and takes it over: PQfinish at
  // destruction, unless release() hands it back first. It must be connected and not inside
  // a transaction block. adopt() sets TimeZone = UTC, DateStyle = ISO and client_encoding
  // = UTF8 on the session (the library reads timestamps and text in those forms); they
  // stay set after release(). InvalidArgument for a null, broken or busy connection.
  static Connection adopt(pg_conn* native, const ConnectionOptions& options = {});
  // Hands the libpq connection back to the caller, who owns it from then on. The object
  // is left empty: any further call on it throws.
  pg_conn* release() noexcept;

  // Runs SQL without parameters (the application's own statements; several statements
  // separated by semicolons run in one round trip).
  void execute(std::string_view sql);
  // Runs one statement with $1, $2, ... bound to `params`. Returns its row count (rows an
  // INSERT, UPDATE or DELETE touched).
  // awa::Error with the server's SQLSTATE when the statement fails.
  std::int64_t execute(std::string_view sql, const std::vector<SqlParam>& params);
  // Runs one statement with $1, $2, ... bound to `params` and returns its rows.
  QueryResult query(std::string_view sql, const std::vector<SqlParam>& params = {});
  bool in_transaction() const;

  struct Impl;

 private:
  friend struct detail::ConnectionAccess;
  explicit Connection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// BEGIN on construction; rolls back on destruction unless commit() was called.
class Transaction {
 public:
  explicit Transaction(Connection& conn);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  // Throws when the server rolled the transaction back instead (an earlier statement
  // failed): a commit that stored nothing never looks like success.
  void commit();
  void rollback();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace awa
