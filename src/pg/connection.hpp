// One PostgreSQL connection: RAII over PGconn, move-only, used by one thread at a time.
//
// Every method throws an awa::Error subclass on failure (mapped from SQLSTATE in
// error_map.cpp); none returns an error code. After a ConnectionError the connection is
// broken (ok() is false) and should be dropped; the pool does that on return.
//
// Sessions are set to TimeZone=UTC, DateStyle=ISO and client_encoding=UTF8 at connect,
// which the Result accessors rely on.
//
// A pooled connection (ConnectOptions::pooled) goes through a transaction-mode pooler
// (PgBouncer pool_mode = transaction): consecutive transactions may run on different
// server sessions, shared with other clients. It keeps no state in the server session
// beyond the three settings above, which PgBouncer tracks per client and re-applies (they
// are reported parameters): prepared statements are unnamed (parsed per call), and
// connect() leaves the server-side keepalive settings alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "pg/params.hpp"
#include "pg/result.hpp"

struct pg_conn;  // PGconn

namespace awa::pg {

struct ConnectOptions {
  std::string url;  // a libpq connection URI or key=value string
  // Default: 5 s. Rounded up to whole seconds (libpq's connect_timeout unit), min 2 s.
  std::chrono::milliseconds connect_timeout{5000};
  std::string application_name = "awa";
  // Through a transaction-mode pooler (see above): exec_cached, exec_prepared and the
  // pipeline's cached statements send the statement text each time (unnamed statement)
  // instead of preparing it in the server session. Default: false.
  bool pooled = false;
  // Settings (name, value) for this connection's statements. Direct: SET for the session
  // at connect. Pooled: set_config(name, value, true) before each parameterised statement,
  // in the same implicit transaction (one pipeline, one Sync: no extra round trip), so a
  // setting never outlives our transaction on a shared server session. Default: none.
  std::vector<std::pair<std::string, std::string>> settings{};
};

struct Notification {
  std::string channel;
  std::string payload;
  int backend_pid = 0;
};

class Pipeline;
class CopyWriter;

class Connection {
 public:
  // Connects; throws ConnectionError with libpq's message (and the target host/port,
  // never the password) when that fails or times out.
  static Connection connect(const ConnectOptions& options);
  // Takes over a connection the caller opened with libpq (awa::Connection::adopt says
  // what it requires and sets). The caller's handle is PQfinish'ed at destruction unless
  // release() gives it back.
  static Connection adopt(pg_conn* conn, bool pooled);
  pg_conn* release() noexcept { return conn_.release(); }

  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  ~Connection();

  // One or more statements without parameters (simple query protocol). Returns the
  // last statement's result.
  Result exec(std::string_view sql);
  // One statement with parameters (extended protocol, unnamed statement); on a pooled
  // connection with settings, preceded by them in the same implicit transaction.
  // `format`: the format of the result columns (result.hpp).
  Result exec(std::string_view sql, const Params& params, Format format = Format::kText);
  template <class... Args>
  Result query(std::string_view sql, const Args&... args) {
    return exec(sql, make_params(args...));
  }

  // Prepared statements. exec_cached prepares `sql` on first use on this connection
  // (named after a hash of the text) and executes the prepared statement afterwards: the
  // hot path's way to skip parse/plan per call. On a pooled connection nothing is prepared
  // on the server: prepare() only remembers the text under its name, and exec_prepared
  // and exec_cached run it as an unnamed statement (PQexecParams), so a statement never
  // depends on which server session the pooler picks.
  void prepare(const std::string& name, std::string_view sql);
  Result exec_prepared(const std::string& name, const Params& params,
                       Format format = Format::kText);
  // A statement the session lost (26000), or one whose result type changed since it was
  // prepared (0A000: a function or table it reads was re-created), is prepared again and
  // run once more, unless the failure aborted the caller's transaction: then the error is
  // thrown and the next call prepares it.
  Result exec_cached(std::string_view sql, const Params& params, Format format = Format::kText);
  // The name exec_cached uses for `sql`: "awa_" + 16 hex digits of a 64-bit hash of it, or,
  // for a statement of sql/queries/ (its text starts with "-- awa:<folder>/<name>", which
  // the build adds), "awa_<folder>_<name>_" + the same 16 digits, the tag cut to keep the
  // name within PostgreSQL's 63 bytes: pg_prepared_statements says which statement it is.
  static std::string cached_statement_name(std::string_view sql);
  // Prepares `sql` under cached_statement_name() unless already done; returns the name.
  std::string ensure_prepared(std::string_view sql);

  // A pipeline on this connection (see pipeline.hpp). The connection must not be used
  // for anything else until the pipeline is run or destroyed.
  Pipeline pipeline();

  // COPY ... FROM STDIN (see copy.hpp).
  CopyWriter copy_in(std::string_view copy_sql);

  // LISTEN / UNLISTEN; the channel is quoted as an identifier.
  void listen(std::string_view channel);
  void unlisten(std::string_view channel);
  // Waits on the socket (poll, no busy loop) until a notification arrives or `timeout`
  // passes. Returns notifications already received first.
  std::optional<Notification> wait_notification(std::chrono::milliseconds timeout);

  // Closes the connection now (PQfinish); ok() is false afterwards, so a pool drops it
  // on return. For a session the caller knows is on the wrong server (25006: a read-only
  // standby after a fail-over): the next connection may reach the new primary.
  void close() noexcept;

  bool pooled() const noexcept { return pooled_; }
  bool ok() const;              // the connection is usable (PQstatus == CONNECTION_OK)
  bool idle() const;            // ok() and not inside a transaction block
  bool in_transaction() const;  // inside a transaction block (also if it failed)
  int backend_pid() const;
  std::string quote_identifier(std::string_view name) const;
  // A string literal for SQL sent without parameters (PQescapeLiteral), quotes included.
  std::string quote_literal(std::string_view value) const;

  // For src/pg internals only (pipeline, copy).
  pg_conn* native() const noexcept { return conn_.get(); }

 private:
  struct Deleter {
    void operator()(pg_conn* c) const noexcept;
  };
  Connection(pg_conn* c, bool pooled);
  pg_conn* require_open() const;
  // Checks a result of a synchronous call; throws (after draining) on failure.
  Result check(pg_result* res, std::string_view sql);
  std::unique_ptr<pg_conn, Deleter> conn_;
  std::unordered_set<std::string> prepared_;  // statement names prepared on this session
  // Prepared on this session, but refused since (0A000): DEALLOCATE before preparing again.
  std::unordered_set<std::string> outdated_;
  bool pooled_ = false;
  std::vector<std::pair<std::string, std::string>> settings_;  // pooled: per statement
  // Pooled: the text of each "prepared" statement by name; nothing lives on the server.
  std::unordered_map<std::string, std::string> unnamed_;
};

// Rolls back on destruction unless commit() was called.
class Transaction {
 public:
  // `begin_sql` lets callers choose e.g. "BEGIN ISOLATION LEVEL REPEATABLE READ".
  explicit Transaction(Connection& conn, std::string_view begin_sql = "BEGIN");
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  void commit();
  void rollback();
  Connection& conn() noexcept { return conn_; }

 private:
  Connection& conn_;
  bool open_ = true;
};

}  // namespace awa::pg
