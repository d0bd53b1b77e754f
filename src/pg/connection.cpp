#include "pg/connection.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <limits>

#include "awa/error.hpp"
#include "pg/copy.hpp"
#include "pg/error_map.hpp"
#include "pg/pipeline.hpp"
#include "pg/result.hpp"

namespace awa::pg {
namespace {

struct ConninfoDeleter {
  void operator()(PQconninfoOption* o) const noexcept { PQconninfoFree(o); }
};
struct FreememDeleter {
  void operator()(void* p) const noexcept { PQfreemem(p); }
};
// libpq's messages are multi-line ("...failed: Connection refused\n\tIs the server
// running..."); exception messages read better on one line.
std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool space = false;
  for (const char c : s) {
    if (c == '\n' || c == '\r' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// Parse errors quote the offending part of the connection string, which may be a
// password: drop everything between double quotes.
std::string without_quoted(std::string_view s) {
  std::string out;
  bool quoted = false;
  for (const char c : s) {
    if (c == '"') {
      if (!quoted) out += "\"...\"";
      quoted = !quoted;
    } else if (!quoted) {
      out += c;
    }
  }
  return out;
}

void redact(std::string& s, const std::string& secret) {
  if (secret.empty()) return;
  for (auto pos = s.find(secret); pos != std::string::npos; pos = s.find(secret, pos)) {
    s.replace(pos, secret.size(), "***");
  }
}

void on_notice(void*, const char* message) {
  spdlog::debug("postgres: {}", one_line(message != nullptr ? message : ""));
}

int param_count(const Params& params) {
  if (params.size() > static_cast<std::size_t>(std::numeric_limits<std::uint16_t>::max())) {
    throw InvalidArgument("too many statement parameters (" + std::to_string(params.size()) +
                          "; PostgreSQL allows 65535)");
  }
  return static_cast<int>(params.size());
}

// Discards whatever a synchronous call left behind so the connection is idle again.
void drain_results(PGconn* conn) {
  while (PGresult* r = PQgetResult(conn)) {
    const auto status = PQresultStatus(r);
    PQclear(r);
    if (status == PGRES_COPY_OUT) {
      char* buf = nullptr;
      while (PQgetCopyData(conn, &buf, 0) > 0) PQfreemem(buf);
    } else if (status == PGRES_COPY_IN) {
      PQputCopyEnd(conn, "COPY FROM STDIN must use Connection::copy_in");
    } else if (status == PGRES_COPY_BOTH) {
      return;  // replication protocol: nothing sensible to drain
    }
    if (PQstatus(conn) != CONNECTION_OK) return;
  }
}

}  // namespace

void Connection::Deleter::operator()(pg_conn* c) const noexcept { PQfinish(c); }

Connection::Connection(pg_conn* c, bool pooled) : conn_(c), pooled_(pooled) {}
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

Connection Connection::connect(const ConnectOptions& options) {
  // Parse first: a malformed string then fails with a message that cannot leak the
  // password, and the password is known so it can be scrubbed from later messages.
  std::string password;
  {
    char* err = nullptr;
    std::unique_ptr<PQconninfoOption, ConninfoDeleter> parsed(
        PQconninfoParse(options.url.c_str(), &err));
    std::unique_ptr<char, FreememDeleter> err_owner(err);
    if (!parsed) {
      throw ConnectionError(
          "invalid PostgreSQL connection string: " +
              (err != nullptr ? without_quoted(one_line(err)) : std::string("out of memory")),
          Retry::kDoNotRetry);
    }
    for (auto* o = parsed.get(); o->keyword != nullptr; ++o) {
      if (std::strcmp(o->keyword, "password") == 0 && o->val != nullptr) password = o->val;
    }
  }

  const long long timeout_ms = std::max<long long>(options.connect_timeout.count(), 0);
  const long long timeout_s = std::max<long long>(2, (timeout_ms + 999) / 1000);
  const std::string timeout = std::to_string(timeout_s);
  // Keywords before "dbname" are defaults the URL may override; those after it override
  // what the expanded URL says. TCP keepalives (ignored on Unix sockets) make a dead
  // server or a half-open connection an error within about a minute instead of whenever
  // the OS gives up (hours): keepalives_* for an idle connection, tcp_user_timeout for
  // one with unacknowledged data in flight.
  const char* const keys[] = {"keepalives",          "keepalives_idle",
                              "keepalives_interval", "keepalives_count",
                              "tcp_user_timeout",    "dbname",
                              "connect_timeout",     "application_name",
                              "client_encoding",     nullptr};
  const char* const values[] = {"1",
                                "15",
                                "5",
                                "4",
                                "60000",
                                options.url.c_str(),
                                timeout.c_str(),
                                options.application_name.c_str(),
                                "UTF8",
                                nullptr};
  Connection c(PQconnectdbParams(keys, values, /*expand_dbname=*/1), options.pooled);
  PGconn* raw = c.conn_.get();
  if (raw == nullptr) throw ConnectionError("cannot connect to PostgreSQL: out of memory");
  if (PQstatus(raw) != CONNECTION_OK) {
    const char* host = PQhost(raw);
    const char* port = PQport(raw);
    std::string message = "cannot connect to PostgreSQL at ";
    message += (host != nullptr && *host != '\0') ? host : "localhost";
    message += ':';
    message += (port != nullptr && *port != '\0') ? port : "5432";
    message += ": ";
    message += one_line(PQerrorMessage(raw));
    redact(message, password);
    throw ConnectionError(message, Retry::kRetryCall);
  }
  PQsetNoticeProcessor(raw, on_notice, nullptr);
  if (options.pooled) {
    // Through a transaction pooler: PgBouncer tracks these three (reported parameters)
    // per client and sets them on whichever server connection serves the next
    // transaction. The keepalive settings below are not tracked: on a shared server
    // session they would outlive us and apply to other clients, and they would describe
    // the pooler's socket, not ours (the pooler has keepalive settings of its own).
    c.exec("SET TimeZone='UTC'; SET DateStyle='ISO'; SET client_encoding='UTF8'");
    c.settings_ = options.settings;
    return c;
  }
  for (const auto& [name, value] : options.settings) {
    c.query("SELECT pg_catalog.set_config($1, $2, false)", name, value);
  }
  // Result accessors parse timestamps in this exact rendering. Then the server side of
  // the keepalives, unless the URL's options or the server's configuration chose
  // otherwise: a client whose host vanished releases its session
  // locks — the maintenance leader's among them — and its backend within about a minute,
  // not when the server's OS gives up on the socket. One round trip for all of it.
  c.exec(
      "SET TimeZone='UTC'; SET DateStyle='ISO'; SET client_encoding='UTF8'; "
      "SELECT set_config(s.name, k.value, false) FROM pg_catalog.pg_settings s JOIN (VALUES "
      "('tcp_keepalives_idle', '15'), ('tcp_keepalives_interval', '5'), "
      "('tcp_keepalives_count', '4'), ('tcp_user_timeout', '60000')) AS k(name, value) "
      "ON k.name = s.name WHERE s.source = 'default'");
  return c;
}

Connection Connection::adopt(pg_conn* raw, bool pooled) {
  if (raw == nullptr) throw InvalidArgument("Connection::adopt: the PGconn is null");
  if (PQstatus(raw) != CONNECTION_OK) {
    throw InvalidArgument("Connection::adopt: the PGconn is not connected: " +
                          one_line(PQerrorMessage(raw)));
  }
  if (PQtransactionStatus(raw) != PQTRANS_IDLE) {
    // SET inside the caller's transaction would be undone by its rollback.
    throw InvalidArgument(
        "Connection::adopt: the PGconn is inside a transaction block or busy; adopt it "
        "between transactions");
  }
  Connection c(raw, pooled);
  try {
    // The forms the result accessors parse (see connect()); the rest of connect()'s
    // session settings (keepalives) are the application's to choose.
    c.exec("SET TimeZone='UTC'; SET DateStyle='ISO'; SET client_encoding='UTF8'");
  } catch (...) {
    c.conn_.release();  // a failed adopt leaves the caller's connection with the caller
    throw;
  }
  return c;
}

pg_conn* Connection::require_open() const {
  if (!conn_) throw Error("use of a closed (moved-from) connection");
  return conn_.get();
}

Result Connection::check(pg_result* raw, std::string_view sql) {
  PGconn* conn = conn_.get();
  if (raw == nullptr) throw_connection_error(conn, statement_context(sql));
  ResultPtr res(raw);
  switch (PQresultStatus(raw)) {
    case PGRES_COMMAND_OK:
    case PGRES_TUPLES_OK:
    case PGRES_EMPTY_QUERY:
    case PGRES_SINGLE_TUPLE:
      return Result(res.release());
    case PGRES_COPY_IN:
    case PGRES_COPY_OUT:
    case PGRES_COPY_BOTH:
      if (PQresultStatus(raw) == PGRES_COPY_IN) {
        PQputCopyEnd(conn, "COPY FROM STDIN must use Connection::copy_in");
      } else if (PQresultStatus(raw) == PGRES_COPY_OUT) {
        char* buf = nullptr;
        while (PQgetCopyData(conn, &buf, 0) > 0) PQfreemem(buf);
      }
      res.reset();
      drain_results(conn);
      throw Error(statement_context(sql) + ": COPY is only supported through Connection::copy_in");
    case PGRES_PIPELINE_SYNC:
    case PGRES_PIPELINE_ABORTED:
    case PGRES_BAD_RESPONSE:
    case PGRES_NONFATAL_ERROR:
    case PGRES_FATAL_ERROR:
      break;
  }
  throw_result_error(raw, conn, statement_context(sql));
}

Result Connection::exec(std::string_view sql) {
  PGconn* conn = require_open();
  const std::string text(sql);
  return check(PQexec(conn, text.c_str()), sql);
}

Result Connection::exec(std::string_view sql, const Params& params, Format format) {
  PGconn* conn = require_open();
  if (!settings_.empty()) {
    // Pooled: the settings and the statement up to one Sync form one implicit
    // transaction, whichever server session the pooler gives it, and end with it.
    Pipeline p(*this);
    for (const auto& [name, value] : settings_) {
      p.add("SELECT pg_catalog.set_config($1, $2, true)", make_params(name, value));
    }
    p.add(sql, params, format);
    auto results = p.run();
    return std::move(results.back());
  }
  const std::string text(sql);
  return check(PQexecParams(conn, text.c_str(), param_count(params), nullptr, params.values(),
                            nullptr, nullptr, static_cast<int>(format)),
               sql);
}

void Connection::prepare(const std::string& name, std::string_view sql) {
  PGconn* conn = require_open();
  if (pooled_) {
    unnamed_.insert_or_assign(name, std::string(sql));
    return;
  }
  const std::string text(sql);
  check(PQprepare(conn, name.c_str(), text.c_str(), 0, nullptr), sql);
  prepared_.insert(name);
}

Result Connection::exec_prepared(const std::string& name, const Params& params, Format format) {
  PGconn* conn = require_open();
  if (pooled_) {
    const auto it = unnamed_.find(name);
    if (it == unnamed_.end()) throw Error("EXECUTE " + name + ": no statement of that name");
    return exec(it->second, params, format);
  }
  return check(PQexecPrepared(conn, name.c_str(), param_count(params), params.values(), nullptr,
                              nullptr, static_cast<int>(format)),
               "EXECUTE " + name);
}

std::string Connection::cached_statement_name(std::string_view sql) {
  // Eight bytes per step: it runs on every exec_cached call, over statements of kilobytes
  // (their comments included), and byte by byte it was the producer's largest user-space
  // cost in a single-job enqueue profile. Deterministic, so stable across processes.
  constexpr std::uint64_t kMul = 0x9e3779b97f4a7c15ull;
  const auto mix = [](std::uint64_t h, std::uint64_t word) {
    h = (h ^ word) * kMul;
    return h ^ (h >> 29);
  };
  std::uint64_t h = 14695981039346656037ull ^ sql.size();
  std::size_t i = 0;
  for (; i + 8 <= sql.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, sql.data() + i, 8);
    h = mix(h, word);
  }
  if (i < sql.size()) {
    std::uint64_t word = 0;
    std::memcpy(&word, sql.data() + i, sql.size() - i);
    h = mix(h, word);
  }
  // The final avalanche of MurmurHash3's fmix64, so every input bit reaches every digit.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name = "awa_";
  constexpr std::string_view kTag = "-- awa:";
  if (sql.starts_with(kTag)) {
    // 63 bytes at most: "awa_" + tag + "_" + 16 digits leaves 42 for the tag.
    constexpr std::size_t kMaxTag = 63 - 4 - 1 - 16;
    const std::size_t end = sql.find('\n');
    const std::string_view tag =
        sql.substr(kTag.size(), (end == std::string_view::npos ? sql.size() : end) - kTag.size());
    for (std::size_t k = 0; k < tag.size() && k < kMaxTag; ++k) {
      const char c = tag[k];
      const bool plain = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      name += plain ? c : '_';
    }
    name += '_';
  }
  for (int shift = 60; shift >= 0; shift -= 4) name += kHex[(h >> shift) & 0xf];
  return name;
}

std::string Connection::ensure_prepared(std::string_view sql) {
  std::string name = cached_statement_name(sql);
  if (pooled_) {
    if (!unnamed_.contains(name)) prepare(name, sql);
    return name;
  }
  if (prepared_.contains(name)) return name;
  if (outdated_.contains(name)) {
    // The server still holds the statement under this name; PREPARE would fail with
    // 42P05. DEALLOCATE is not transactional, so it stands even if the caller rolls back.
    try {
      exec("DEALLOCATE " + name);
    } catch (const DatabaseError& e) {
      if (e.sqlstate() != "26000") throw;  // already gone (DEALLOCATE ALL meanwhile)
    }
    outdated_.erase(name);
  }
  prepare(name, sql);
  return name;
}

Result Connection::exec_cached(std::string_view sql, const Params& params, Format format) {
  if (pooled_) return exec(sql, params, format);
  const std::string name = ensure_prepared(sql);
  try {
    return exec_prepared(name, params, format);
  } catch (const DatabaseError& e) {
    // 26000: the session lost the statement (DEALLOCATE ALL, DISCARD ALL): forget it.
    // 0A000: the statement outlived the result type it was planned for — a function or
    // table it reads was re-created or altered ("cached plan must not change result
    // type"), and the server refuses every later EXECUTE of it. Matched by SQLSTATE, not
    // by the (translatable) message: a 0A000 of another cause costs one more PREPARE and
    // fails again below. Either way, when no transaction was aborted by the failure,
    // prepare again and retry once; inside one, the next call prepares.
    if (e.sqlstate() == "26000") {
      prepared_.erase(name);
    } else if (e.sqlstate() == "0A000") {
      prepared_.erase(name);
      outdated_.insert(name);
    } else {
      throw;
    }
    if (in_transaction()) throw;
  }
  return exec_prepared(ensure_prepared(sql), params, format);
}

void Connection::close() noexcept {
  conn_.reset();
  prepared_.clear();
  outdated_.clear();
  unnamed_.clear();
}

Pipeline Connection::pipeline() {
  require_open();
  return Pipeline(*this);
}

CopyWriter Connection::copy_in(std::string_view copy_sql) { return CopyWriter(*this, copy_sql); }

void Connection::listen(std::string_view channel) { exec("LISTEN " + quote_identifier(channel)); }

void Connection::unlisten(std::string_view channel) {
  exec("UNLISTEN " + quote_identifier(channel));
}

std::optional<Notification> Connection::wait_notification(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  PGconn* conn = require_open();
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (PQconsumeInput(conn) == 0) throw_connection_error(conn, "waiting for a notification");
    if (PGnotify* raw = PQnotifies(conn)) {
      std::unique_ptr<PGnotify, FreememDeleter> n(raw);
      return Notification{raw->relname != nullptr ? raw->relname : "",
                          raw->extra != nullptr ? raw->extra : "", raw->be_pid};
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd pfd{};
    pfd.fd = PQsocket(conn);
    if (pfd.fd < 0) throw_connection_error(conn, "waiting for a notification");
    pfd.events = POLLIN;
    const int wait_ms = static_cast<int>(std::min<long long>(left.count(), INT_MAX));
    if (::poll(&pfd, 1, wait_ms) < 0 && errno != EINTR) {
      throw ConnectionError(
          std::string("poll() on the connection socket failed: ") + std::strerror(errno),
          Retry::kRetryCall);
    }
  }
}

bool Connection::ok() const { return conn_ && PQstatus(conn_.get()) == CONNECTION_OK; }

bool Connection::idle() const { return ok() && PQtransactionStatus(conn_.get()) == PQTRANS_IDLE; }

bool Connection::in_transaction() const {
  if (!conn_) return false;
  const auto status = PQtransactionStatus(conn_.get());
  return status == PQTRANS_INTRANS || status == PQTRANS_INERROR;
}

int Connection::backend_pid() const { return conn_ ? PQbackendPID(conn_.get()) : 0; }

std::string Connection::quote_identifier(std::string_view name) const {
  PGconn* conn = require_open();
  std::unique_ptr<char, FreememDeleter> quoted(PQescapeIdentifier(conn, name.data(), name.size()));
  if (!quoted) {
    throw InvalidArgument("cannot quote identifier: " + one_line(PQerrorMessage(conn)));
  }
  return quoted.get();
}

std::string Connection::quote_literal(std::string_view value) const {
  PGconn* conn = require_open();
  std::unique_ptr<char, FreememDeleter> quoted(PQescapeLiteral(conn, value.data(), value.size()));
  if (!quoted) {
    throw InvalidArgument("cannot quote literal: " + one_line(PQerrorMessage(conn)));
  }
  return quoted.get();
}

// --- Transaction ------------------------------------------------------------------------

Transaction::Transaction(Connection& conn, std::string_view begin_sql) : conn_(conn) {
  conn_.exec(begin_sql);
}

Transaction::~Transaction() {
  if (!open_) return;
  try {
    rollback();
  } catch (...) {
    // A destructor must not throw; a connection that cannot roll back is broken or left
    // in a transaction, and the pool discards or rolls it back on return.
  }
}

void Transaction::commit() {
  if (!open_) throw Error("commit() on a transaction that is already finished");
  open_ = false;
  const Result r = conn_.exec("COMMIT");
  // COMMIT of a transaction that an earlier (swallowed) error aborted succeeds with the
  // tag ROLLBACK: the caller must not believe its writes are stored.
  if (r.command_status() == "ROLLBACK") {
    throw DatabaseError(
        "COMMIT rolled back: an earlier statement of the transaction failed, nothing was "
        "stored",
        Retry::kDoNotRetry, "25P02");
  }
}

void Transaction::rollback() {
  if (!open_) return;
  open_ = false;
  if (conn_.in_transaction()) conn_.exec("ROLLBACK");
}

}  // namespace awa::pg
