// SQLSTATE -> error class: the single place where PostgreSQL error codes are interpreted.
#pragma once

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
  kOther,
};

struct Classification {
  ErrorKind kind;
  Retry retry;
};

// The table itself; unit-tested.
Classification classify_sqlstate(std::string_view sqlstate);

// Throws the awa::Error subclass for a failed result (message, SQLSTATE, detail, hint).
// `context` (may be empty) is prefixed to the message, e.g. the statement's first line.
[[noreturn]] void throw_result_error(const pg_result* res, const pg_conn* conn,
                                     std::string_view context = {});
// Builds (without throwing) the error for a failed result.
DatabaseError make_result_error(const pg_result* res, const pg_conn* conn,
                                std::string_view context = {});
// Throws ConnectionError with libpq's connection-level message.
[[noreturn]] void throw_connection_error(const pg_conn* conn, std::string_view context);

}  // namespace awa::pg
