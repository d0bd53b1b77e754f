// SQLSTATE -> error class: the single place where PostgreSQL error codes are interpreted.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include "awa/error.hpp"

struct pg_result;
struct pg_conn;

namespace awa::pg {

enum class ErrorKind {
  kConnection,           // class 08, 57P01..57P03, 53300 (too many connections)
  kConstraint,           // class 23
  kTransactionRollback,  // class 40
  kQueryCanceled,        // 57014
  // The server or the schema refuses every statement of its kind, whatever its arguments:
  // 25006 (read-only: a standby after a fail-over), 57P04 (database dropped), 42725 /
  // 42883 (ambiguous / undefined function: code and schema out of step), 0A000 (feature
  // not supported, also "cached plan must not change result type"). Batched work must not
  // blame one of its rows for it.
  kServerWide,
  kOther,
};

struct Classification {
  ErrorKind kind;
  Retry retry;
};

// The table itself; unit-tested.
Classification classify_sqlstate(std::string_view sqlstate);

// What a failed result (or a failed connection) says, before it becomes an exception.
struct ErrorInfo {
  std::string message;  // context-prefixed primary message
  std::string sqlstate;
  std::string detail;
  std::string hint;
  Classification classification{ErrorKind::kOther, Retry::kDoNotRetry};
};

// Reads the error fields of `res` (may be null: then libpq's connection message is used).
// A result whose connection is broken is classified as kConnection whatever its SQLSTATE,
// because libpq-generated errors ("server closed the connection unexpectedly") carry none.
ErrorInfo describe_result_error(const pg_result* res, const pg_conn* conn,
                                std::string_view context = {});
// Throws the awa::Error subclass that `info.classification` names.
[[noreturn]] void throw_error(const ErrorInfo& info);

// Throws the awa::Error subclass for a failed result (message, SQLSTATE, detail, hint).
// `context` (may be empty) is prefixed to the message, e.g. the statement's first line.
[[noreturn]] void throw_result_error(const pg_result* res, const pg_conn* conn,
                                     std::string_view context = {});
// Builds (without throwing) the error for a failed result. Returned as an exception_ptr
// so the dynamic type (ConstraintViolation, ...) survives.
std::exception_ptr make_result_error(const pg_result* res, const pg_conn* conn,
                                     std::string_view context = {});
// Throws ConnectionError with libpq's connection-level message.
[[noreturn]] void throw_connection_error(const pg_conn* conn, std::string_view context);

// A short label for a statement in error messages: its first non-blank line, truncated.
std::string statement_context(std::string_view sql);

}  // namespace awa::pg
