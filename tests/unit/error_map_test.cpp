#include "pg/error_map.hpp"

#include <gtest/gtest.h>

#include <string>

namespace awa::pg {
namespace {

struct Row {
  const char* sqlstate;
  ErrorKind kind;
  Retry retry;
};

constexpr Row kTable[] = {
    {"08000", ErrorKind::kConnection, Retry::kRetryCall},  // connection_exception
    {"08003", ErrorKind::kConnection, Retry::kRetryCall},  // connection_does_not_exist
    {"08006", ErrorKind::kConnection, Retry::kRetryCall},  // connection_failure
    {"08P01", ErrorKind::kConnection, Retry::kRetryCall},  // protocol_violation
    {"57P01", ErrorKind::kConnection, Retry::kRetryCall},  // admin_shutdown
    {"57P02", ErrorKind::kConnection, Retry::kRetryCall},  // crash_shutdown
    {"57P03", ErrorKind::kConnection, Retry::kRetryCall},  // cannot_connect_now
    {"53300", ErrorKind::kConnection, Retry::kRetryCall},  // too_many_connections
    {"40001", ErrorKind::kTransactionRollback, Retry::kRetryTransaction},  // serialization
    {"40P01", ErrorKind::kTransactionRollback, Retry::kRetryTransaction},  // deadlock
    {"40002", ErrorKind::kTransactionRollback, Retry::kRetryTransaction},
    {"23505", ErrorKind::kConstraint, Retry::kDoNotRetry},  // unique_violation
    {"23503", ErrorKind::kConstraint, Retry::kDoNotRetry},  // foreign_key_violation
    {"23502", ErrorKind::kConstraint, Retry::kDoNotRetry},  // not_null_violation
    {"23514", ErrorKind::kConstraint, Retry::kDoNotRetry},  // check_violation
    {"57014", ErrorKind::kQueryCanceled, Retry::kRetryCall},
    {"25006", ErrorKind::kServerWide, Retry::kRetryCall},   // read_only_sql_transaction
    {"57P04", ErrorKind::kServerWide, Retry::kDoNotRetry},  // database_dropped
    {"42725", ErrorKind::kServerWide, Retry::kDoNotRetry},  // ambiguous_function
    {"42883", ErrorKind::kServerWide, Retry::kDoNotRetry},  // undefined_function
    {"0A000", ErrorKind::kServerWide, Retry::kDoNotRetry},  // feature_not_supported
    {"55P03", ErrorKind::kOther, Retry::kRetryCall},        // lock_not_available
    {"53100", ErrorKind::kOther, Retry::kRetryCall},        // disk_full
    {"53200", ErrorKind::kOther, Retry::kRetryCall},        // out_of_memory
    {"42P01", ErrorKind::kOther, Retry::kDoNotRetry},       // undefined_table
    {"42601", ErrorKind::kOther, Retry::kDoNotRetry},       // syntax_error
    {"22P02", ErrorKind::kOther, Retry::kDoNotRetry},       // invalid_text_representation
    {"25P02", ErrorKind::kOther, Retry::kDoNotRetry},       // in_failed_sql_transaction
    {"XX000", ErrorKind::kOther, Retry::kDoNotRetry},       // internal_error
    {"", ErrorKind::kOther, Retry::kDoNotRetry},            // libpq-generated, no SQLSTATE
};

TEST(ErrorMapTest, ClassifiesEverySqlstateOfTheTable) {
  for (const Row& row : kTable) {
    SCOPED_TRACE(row.sqlstate);
    const Classification c = classify_sqlstate(row.sqlstate);
    EXPECT_EQ(c.kind, row.kind);
    EXPECT_EQ(c.retry, row.retry) << to_string(c.retry) << " != " << to_string(row.retry);
  }
}

TEST(ErrorMapTest, ThrowErrorPicksTheSubclassOfTheClassification) {
  ErrorInfo info{"duplicate key", "23505", "Key (id)=(1) already exists.", "",
                 classify_sqlstate("23505")};
  try {
    throw_error(info);
    FAIL() << "throw_error returned";
  } catch (const ConstraintViolation& e) {
    EXPECT_EQ(e.sqlstate(), "23505");
    EXPECT_EQ(e.detail(), "Key (id)=(1) already exists.");
    EXPECT_EQ(e.retry(), Retry::kDoNotRetry);
  }
  info.sqlstate = "40P01";
  info.classification = classify_sqlstate(info.sqlstate);
  EXPECT_THROW(throw_error(info), TransactionRollback);
  info.sqlstate = "57P01";
  info.classification = classify_sqlstate(info.sqlstate);
  EXPECT_THROW(throw_error(info), ConnectionError);
  info.sqlstate = "57014";
  info.classification = classify_sqlstate(info.sqlstate);
  EXPECT_THROW(throw_error(info), QueryCanceled);
}

TEST(ErrorMapTest, PipelineErrorKeepsTheCauseAndNamesTheIndex) {
  const DatabaseError cause("boom", Retry::kRetryTransaction, "40001", "d", "h");
  const PipelineError e(cause, 7);
  EXPECT_EQ(e.index(), 7u);
  EXPECT_EQ(e.sqlstate(), "40001");
  EXPECT_EQ(e.retry(), Retry::kRetryTransaction);
  EXPECT_EQ(e.detail(), "d");
  EXPECT_EQ(e.hint(), "h");
  EXPECT_EQ(std::string(e.what()), "pipeline statement 7: boom");
}

TEST(ErrorMapTest, StatementContextIsTheFirstLine) {
  EXPECT_EQ(statement_context("  SELECT 1"), "SELECT 1");
  EXPECT_EQ(statement_context("\nINSERT INTO t\nVALUES (1)"), "INSERT INTO t ...");
  EXPECT_EQ(statement_context(std::string(100, 'x')), std::string(80, 'x') + "...");
}

}  // namespace
}  // namespace awa::pg
