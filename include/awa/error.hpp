// The one error model of awa-cpp.
//
// Every failure the library reports is an awa::Error (or a subclass). An error carries
// what the caller needs to decide what to do next:
//   - sqlstate(): the five-character SQLSTATE when PostgreSQL reported the error, else "".
//   - detail() / hint(): PostgreSQL's DETAIL and HINT fields, when present.
//   - retry(): whether retrying can help — retry the same call (the connection broke or
//     the server was busy), retry the whole transaction (serialization failure, deadlock),
//     or do not retry until something is fixed (bad input, constraint violation, bug).
//
// SQLSTATEs are mapped to classes in exactly one place (src/pg/error_map.cpp).
#pragma once

#include <stdexcept>
#include <string>

namespace awa {

enum class Retry {
  kRetryCall,         // transient: a new attempt of the same call may succeed
  kRetryTransaction,  // the transaction was rolled back by the server; run it again
  kDoNotRetry,        // retrying will fail the same way until the cause is fixed
};

const char* to_string(Retry retry);

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, Retry retry = Retry::kDoNotRetry,
                 std::string sqlstate = {}, std::string detail = {}, std::string hint = {});

  const std::string& sqlstate() const noexcept { return sqlstate_; }
  const std::string& detail() const noexcept { return detail_; }
  const std::string& hint() const noexcept { return hint_; }
  Retry retry() const noexcept { return retry_; }

 private:
  Retry retry_;
  std::string sqlstate_;
  std::string detail_;
  std::string hint_;
};

// The caller passed a value the library rejects before touching the database
// (priority outside 1..4, invalid JSON, bad schema name, ...). Nothing was written.
class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& message)
      : Error(message, Retry::kDoNotRetry, "22023") {}
};

// A job's stored args or metadata have no nlohmann::json form: a number beyond a double's
// range (jsonb keeps 1e400 as numeric) or nesting deeper than kMaxDecodedJsonDepth. SQL
// and other languages' producers can store such values. JobContext::args() / metadata()
// throw it; the text is at JobContext::args_json() / metadata_json(). Escaping a handler,
// it fails the job without retry (it would never decode), with this message.
class UndecodableJson : public Error {
 public:
  explicit UndecodableJson(const std::string& message) : Error(message, Retry::kDoNotRetry) {}
};

// Could not connect, or the connection was lost (SQLSTATE class 08, 57P01..57P03, or a
// libpq-level failure with no SQLSTATE). The connection is unusable afterwards.
class ConnectionError : public Error {
 public:
  using Error::Error;
};

// PostgreSQL reported an error for a statement.
class DatabaseError : public Error {
 public:
  using Error::Error;
};

// Class 23: unique, foreign-key, check or not-null violation.
class ConstraintViolation : public DatabaseError {
 public:
  using DatabaseError::DatabaseError;
};

// Class 40: serialization failure or deadlock; the transaction must be run again.
class TransactionRollback : public DatabaseError {
 public:
  using DatabaseError::DatabaseError;
};

// 57014: the statement was cancelled (statement_timeout or a cancel request).
class QueryCanceled : public DatabaseError {
 public:
  using DatabaseError::DatabaseError;
};

// A statement of a pipeline failed; index() is its position (0-based) in the pipeline.
// Statements after it were not executed.
class PipelineError : public DatabaseError {
 public:
  PipelineError(const DatabaseError& cause, std::size_t index);
  std::size_t index() const noexcept { return index_; }

 private:
  std::size_t index_;
};

// The migrator refused to run (an applied migration changed, or the database is newer
// than this binary).
class MigrationError : public Error {
 public:
  using Error::Error;
};

}  // namespace awa
