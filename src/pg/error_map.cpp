#include "pg/error_map.hpp"

#include <libpq-fe.h>

#include <string>

namespace awa::pg {
namespace {

// libpq's messages end in a newline and may span lines ("server closed the connection
// unexpectedly\n\tThis probably means..."): one line reads better in an exception.
std::string trim(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool gap = false;
  for (const char c : s) {
    if (c == '\n' || c == '\r' || c == '\t') {
      gap = true;
      continue;
    }
    if (gap && !out.empty() && out.back() != ' ' && c != ' ') out += ' ';
    gap = false;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string field(const PGresult* res, int code) {
  if (res == nullptr) return {};
  const char* v = PQresultErrorField(res, code);
  return v != nullptr ? std::string(v) : std::string();
}

std::string with_context(std::string_view context, std::string_view message) {
  if (context.empty()) return std::string(message);
  std::string out(context);
  out += ": ";
  out += message;
  return out;
}

bool connection_broken(const PGconn* conn) {
  return conn == nullptr || PQstatus(conn) != CONNECTION_OK;
}

}  // namespace

Classification classify_sqlstate(std::string_view s) {
  if (s.size() != 5) return {ErrorKind::kOther, Retry::kDoNotRetry};
  const std::string_view cls = s.substr(0, 2);
  if (cls == "08" || s == "57P01" || s == "57P02" || s == "57P03" || s == "53300") {
    return {ErrorKind::kConnection, Retry::kRetryCall};
  }
  // 40001 serialization_failure and 40P01 deadlock_detected are the common members; the
  // whole class means the server has rolled the transaction back.
  if (cls == "40") return {ErrorKind::kTransactionRollback, Retry::kRetryTransaction};
  if (cls == "23") return {ErrorKind::kConstraint, Retry::kDoNotRetry};
  if (s == "57014") return {ErrorKind::kQueryCanceled, Retry::kRetryCall};
  // A fail-over can leave a connection on the demoted, now read-only, server; a new
  // connection reaches the new primary, so the call is worth repeating.
  if (s == "25006") return {ErrorKind::kServerWide, Retry::kRetryCall};
  // The rest need an operator (a restored database, a migration matching the code), after
  // which the same call succeeds.
  if (s == "57P04" || s == "42725" || s == "42883" || s == "0A000") {
    return {ErrorKind::kServerWide, Retry::kDoNotRetry};
  }
  // lock_not_available (NOWAIT / lock_timeout) and insufficient resources (disk full, out
  // of memory) are transient: the same call may succeed later.
  if (s == "55P03" || cls == "53") return {ErrorKind::kOther, Retry::kRetryCall};
  return {ErrorKind::kOther, Retry::kDoNotRetry};
}

ErrorInfo describe_result_error(const pg_result* res, const pg_conn* conn,
                                std::string_view context) {
  ErrorInfo info;
  info.sqlstate = field(res, PG_DIAG_SQLSTATE);
  info.detail = field(res, PG_DIAG_MESSAGE_DETAIL);
  info.hint = field(res, PG_DIAG_MESSAGE_HINT);
  std::string primary = field(res, PG_DIAG_MESSAGE_PRIMARY);
  if (primary.empty() && res != nullptr) primary = trim(PQresultErrorMessage(res));
  if (primary.empty() && conn != nullptr) primary = trim(PQerrorMessage(conn));
  if (primary.empty()) primary = "unknown error (no result from libpq)";
  info.message = with_context(context, primary);
  info.classification = classify_sqlstate(info.sqlstate);
  if (connection_broken(conn)) info.classification = {ErrorKind::kConnection, Retry::kRetryCall};
  return info;
}

void throw_error(const ErrorInfo& info) {
  const Retry retry = info.classification.retry;
  switch (info.classification.kind) {
    case ErrorKind::kConnection:
      throw ConnectionError(info.message, retry, info.sqlstate, info.detail, info.hint);
    case ErrorKind::kConstraint:
      throw ConstraintViolation(info.message, retry, info.sqlstate, info.detail, info.hint);
    case ErrorKind::kTransactionRollback:
      throw TransactionRollback(info.message, retry, info.sqlstate, info.detail, info.hint);
    case ErrorKind::kQueryCanceled:
      throw QueryCanceled(info.message, retry, info.sqlstate, info.detail, info.hint);
    case ErrorKind::kServerWide:
    case ErrorKind::kOther:
      break;
  }
  throw DatabaseError(info.message, retry, info.sqlstate, info.detail, info.hint);
}

void throw_result_error(const pg_result* res, const pg_conn* conn, std::string_view context) {
  throw_error(describe_result_error(res, conn, context));
}

std::exception_ptr make_result_error(const pg_result* res, const pg_conn* conn,
                                     std::string_view context) {
  try {
    throw_result_error(res, conn, context);
  } catch (...) {
    return std::current_exception();
  }
}

void throw_connection_error(const pg_conn* conn, std::string_view context) {
  std::string message = conn != nullptr ? trim(PQerrorMessage(conn)) : std::string();
  if (message.empty()) message = conn != nullptr ? "connection failed" : "out of memory";
  throw ConnectionError(with_context(context, message), Retry::kRetryCall);
}

std::string statement_context(std::string_view sql) {
  constexpr std::size_t kMax = 80;
  while (!sql.empty() && (sql.front() == ' ' || sql.front() == '\n' || sql.front() == '\t' ||
                          sql.front() == '\r')) {
    sql.remove_prefix(1);
  }
  const auto eol = sql.find('\n');
  std::string_view line = sql.substr(0, eol);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.size() > kMax) return std::string(line.substr(0, kMax)) + "...";
  if (eol != std::string_view::npos) return std::string(line) + " ...";
  return std::string(line);
}

}  // namespace awa::pg
