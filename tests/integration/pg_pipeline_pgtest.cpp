#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/pipeline.hpp"
#include "support.hpp"

namespace awa::pg {
namespace {

class PipelineTest : public testing::PgTest {
 protected:
  void SetUpSchema() override { conn().exec("CREATE TABLE t (id int PRIMARY KEY, v text)"); }
  std::int64_t count() { return conn().exec("SELECT count(*) FROM t").get<std::int64_t>(0, 0); }
};

TEST_F(PipelineTest, ThousandStatementsReturnThousandResultsInOrder) {
  Pipeline p = conn().pipeline();
  for (int i = 0; i < 1000; ++i) {
    const std::string v = "v" + std::to_string(i);
    if (i % 2 == 0) {
      p.add("INSERT INTO t (id, v) VALUES ($1, $2) RETURNING id", make_params(i, v));
    } else {
      p.add_cached("INSERT INTO t (id, v) VALUES ($1, $2) RETURNING id", make_params(i, v));
    }
  }
  EXPECT_EQ(p.size(), 1000u);
  const std::vector<Result> results = p.run();
  ASSERT_EQ(results.size(), 1000u);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(results[static_cast<std::size_t>(i)].get<std::int32_t>(0, "id"), i);
  }
  EXPECT_EQ(count(), 1000);
  EXPECT_TRUE(conn().idle());
}

TEST_F(PipelineTest, AbortedPipelineNamesTheFailingStatementAndCommitsNothing) {
  Pipeline p = conn().pipeline();
  for (int i = 0; i < 1000; ++i) {
    // Statement 500 repeats id 0: a unique violation.
    p.add("INSERT INTO t (id) VALUES ($1)", make_params(i == 500 ? 0 : i));
  }
  try {
    p.run();
    FAIL() << "the pipeline did not fail";
  } catch (const PipelineError& e) {
    EXPECT_EQ(e.index(), 500u);
    EXPECT_EQ(e.sqlstate(), "23505");
    EXPECT_EQ(e.retry(), Retry::kDoNotRetry);
    EXPECT_EQ(e.detail(), "Key (id)=(0) already exists.");
  }
  // Usable afterwards, and the implicit transaction took statements 0..499 with it.
  EXPECT_TRUE(conn().idle());
  EXPECT_EQ(count(), 0);
  conn().exec("INSERT INTO t (id) VALUES (1)");
  EXPECT_EQ(count(), 1);
  // A second pipeline on the same connection works.
  Pipeline again = conn().pipeline();
  again.add("SELECT $1::int AS n", make_params(42));
  EXPECT_EQ(again.run().at(0).get<std::int32_t>(0, "n"), 42);
}

TEST_F(PipelineTest, SyncedSegmentsCommitApartAndABestEffortFailureOnlyReports) {
  // Guards the enqueue path's "NOTIFY after the commit, same round trip": a Sync ends an
  // implicit transaction, a failure aborts only its own segment, and a failing best-effort
  // statement never makes run() throw.
  Pipeline p = conn().pipeline();
  p.add("INSERT INTO t (id, v) VALUES ($1, 'a')", make_params(1));
  p.add("SELECT txid_current() AS x", {});
  p.sync();
  p.add_cached_best_effort("SELECT 1 / $1::int AS n", make_params(0));  // 22012
  p.add_cached_best_effort("SELECT txid_current() AS x", {});           // same segment: aborted
  p.sync();
  p.add("SELECT txid_current() AS x", {});
  const std::vector<Result> results = p.run();
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(results[2].rows(), 0) << "the failed best-effort statement leaves an empty result";
  ASSERT_EQ(p.best_effort_errors().size(), 2u);
  EXPECT_NE(p.best_effort_errors()[0].find("division by zero"), std::string::npos);
  EXPECT_NE(results[1].get<std::int64_t>(0, "x"), results[4].get<std::int64_t>(0, "x"))
      << "segments must run in transactions of their own";
  EXPECT_EQ(count(), 1) << "the first segment committed";
  EXPECT_TRUE(conn().idle());

  // A failure in the first segment does not stop the next one, but run() throws it.
  Pipeline q = conn().pipeline();
  q.add("INSERT INTO t (id, v) VALUES ($1, 'dup')", make_params(1));  // 23505
  q.sync();
  q.add("INSERT INTO t (id, v) VALUES ($1, 'b')", make_params(2));
  try {
    q.run();
    FAIL() << "the pipeline did not fail";
  } catch (const PipelineError& e) {
    EXPECT_EQ(e.index(), 0u);
    EXPECT_EQ(e.sqlstate(), "23505");
  }
  EXPECT_EQ(count(), 2) << "the second segment ran and committed on its own";
  EXPECT_TRUE(conn().idle());
}

TEST_F(PipelineTest, LargeRequestsAndRepliesDoNotDeadlock) {
  // Guards the non-blocking send: ~16 MB each way overflows both socket buffers, which
  // deadlocks a writer that never reads.
  const std::string payload(8000, 'x');
  Pipeline p = conn().pipeline();
  for (int i = 0; i < 2000; ++i)
    p.add("SELECT $1::text || repeat('y', 8000) AS s", make_params(payload));
  const std::vector<Result> results = p.run();
  ASSERT_EQ(results.size(), 2000u);
  EXPECT_EQ(results.back().get<std::string_view>(0, "s").size(), 16000u);
}

TEST_F(PipelineTest, RunsInsideTheCallersTransaction) {
  {
    Transaction tx(conn());
    Pipeline p = conn().pipeline();
    p.add("INSERT INTO t (id) VALUES ($1)", make_params(1));
    p.add("INSERT INTO t (id) VALUES ($1)", make_params(2));
    EXPECT_EQ(p.run().size(), 2u);
    EXPECT_TRUE(conn().in_transaction());
  }  // rolled back
  EXPECT_EQ(count(), 0);
}

TEST_F(PipelineTest, CachedStatementWithSyntaxErrorIsPipelineError) {
  Pipeline p = conn().pipeline();
  p.add("SELECT 1", {});
  p.add_cached("SELEC 2", {});
  try {
    p.run();
    FAIL();
  } catch (const PipelineError& e) {
    EXPECT_EQ(e.index(), 1u);
    EXPECT_EQ(e.sqlstate(), "42601");
  }
  EXPECT_TRUE(conn().idle());
}

TEST_F(PipelineTest, EmptyPipelineReturnsNothing) {
  Pipeline p = conn().pipeline();
  EXPECT_TRUE(p.run().empty());
  EXPECT_TRUE(conn().idle());
}

}  // namespace
}  // namespace awa::pg
