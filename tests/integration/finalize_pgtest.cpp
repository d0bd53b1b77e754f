// Caller-owned finalization (QueueStorage::finalize_in, finalize_attempt): the attempt is
// completed inside the caller's transaction, with its writes, if and only if that
// transaction commits; a rescue, a cancel or an earlier completion makes the caller's
// transaction fail with 55000 instead, so its writes never apply.
#include <future>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "producer_support.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using std::chrono::milliseconds;

class FinalizeTest : public StorageTest {
 protected:
  void SetUpSchema() override {
    StorageTest::SetUpSchema();
    conn().exec("CREATE TABLE effects (job_id bigint NOT NULL, note text)");
  }

  std::vector<ClaimedEntry> claim_jobs(int n, std::optional<milliseconds> deadline = {}) {
    std::vector<NewJob> jobs(static_cast<std::size_t>(n),
                             NewJob("credit", nlohmann::json::object(), on_queue("fx")));
    storage::insert_many(*store_, conn(), jobs);
    QueueStorage::ClaimOptions o;
    o.max_batch = n;
    o.deadline = deadline;
    auto claimed = storage::consumer(*store_).claim(conn(), "fx", o);
    EXPECT_EQ(claimed.size(), static_cast<std::size_t>(n));
    return claimed;
  }

  // The caller's unit of work: its write, then finalize_in, then COMMIT (or ROLLBACK).
  void effect_and_finalize(Connection& c, const ClaimedEntry& e, bool commit,
                           const std::optional<std::string>& result = std::nullopt) {
    Transaction tx(c);
    c.execute(fmt::format("INSERT INTO {}.effects (job_id) VALUES ($1)", schema_),
              {SqlParam(e.job_id)});
    store_->finalize_in(c, e, result);
    if (commit) tx.commit();
  }

  std::string state_of(JobId id) {
    return conn()
        .query(
            "SELECT state FROM attempt_outcomes WHERE job_id = $1 ORDER BY attempt DESC "
            "LIMIT 1",
            id)
        .get<std::string>(0, 0);
  }
  std::int64_t effects(JobId id) {
    return conn()
        .query("SELECT count(*) FROM effects WHERE job_id = $1", id)
        .get<std::int64_t>(0, 0);
  }
};

TEST_F(FinalizeTest, TheJobCompletesWithTheCallersWritesAndOnlyIfTheyCommit) {
  const auto e = claim_jobs(2);
  auto c = Connection::connect(database_url());

  effect_and_finalize(c, e[0], /*commit=*/false);
  EXPECT_EQ(effects(e[0].job_id), 0);
  EXPECT_EQ(count("SELECT count(*) FROM claim_closures"), 0) << "a rolled-back finalize closed it";

  effect_and_finalize(c, e[0], /*commit=*/true, R"({"credited": 1})");
  EXPECT_EQ(effects(e[0].job_id), 1);
  EXPECT_EQ(state_of(e[0].job_id), "completed");
  EXPECT_EQ(count("SELECT count(*) FROM done_entries WHERE result = '{\"credited\": 1}'"), 1);

  // Replayed (a worker that lost the answer of its commit and tries again): refused,
  // and the replay's own write goes with it.
  try {
    effect_and_finalize(c, e[0], /*commit=*/true);
    FAIL() << "a replayed finalize was accepted";
  } catch (const Error& err) {
    EXPECT_EQ(err.sqlstate(), "55000") << err.what();
    EXPECT_NE(std::string(err.what()).find("is no longer current"), std::string::npos)
        << err.what();
  }
  EXPECT_EQ(effects(e[0].job_id), 1);

  // The batcher's completion of the same attempt afterwards is stale; the other job of
  // the claim batch completes normally.
  const auto r = storage::consumer(*store_).complete(
      conn(), std::vector<Completion>{Completion::of(e[0], Outcome::kCompleted),
                                      Completion::of(e[1], Outcome::kCompleted)});
  EXPECT_TRUE(r[0].stale());
  EXPECT_EQ(r[1].state, "completed");
}

TEST_F(FinalizeTest, ACancelOrRescueThatWinsLeavesTheCallerNothingToCommit) {
  const auto e = claim_jobs(2, milliseconds(1));
  auto c = Connection::connect(database_url());
  auto admin_conn = Connection::connect(database_url());
  EXPECT_EQ(Admin(schema_).cancel_job(admin_conn, e[0].job_id), "running");
  EXPECT_THROW(effect_and_finalize(c, e[0], true), Error);
  EXPECT_EQ(effects(e[0].job_id), 0);
  EXPECT_EQ(state_of(e[0].job_id), "cancelled");

  // The caller holds the attempt (finalized, not committed yet) when a rescue of the
  // expired deadline comes: the rescue waits, then finds the attempt completed.
  conn().exec("SELECT pg_sleep(0.01)");
  Transaction tx(c);
  c.execute(fmt::format("INSERT INTO {}.effects (job_id) VALUES ($1)", schema_),
            {SqlParam(e[1].job_id)});
  store_->finalize_in(c, e[1]);
  auto rescuer = std::async(std::launch::async, [&] {
    auto rc = connect_new();
    return storage::consumer(*store_).rescue(rc, std::chrono::minutes(1));
  });
  EXPECT_EQ(rescuer.wait_for(milliseconds(300)), std::future_status::timeout)
      << "the rescue did not wait for the caller's transaction";
  tx.commit();
  const auto rescued = rescuer.get();
  for (const auto& r : rescued) EXPECT_NE(r.job_id, e[1].job_id) << r.why;
  EXPECT_EQ(state_of(e[1].job_id), "completed");
  EXPECT_EQ(effects(e[1].job_id), 1);
}

TEST_F(FinalizeTest, OutsideATransactionOrOutsideReadCommittedItIsRefused) {
  const auto e = claim_jobs(1);
  auto c = Connection::connect(database_url());
  EXPECT_THROW(store_->finalize_in(c, e[0]), InvalidArgument);
  {
    Transaction tx(c);
    c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    try {
      store_->finalize_in(c, e[0]);
      FAIL() << "finalize_in ran in REPEATABLE READ";
    } catch (const Error& err) {
      EXPECT_EQ(err.sqlstate(), "0A000") << err.what();
    }
  }
  {
    Transaction tx(c);
    EXPECT_THROW(store_->finalize_in(c, e[0], std::string("{")), InvalidArgument);
  }
  EXPECT_EQ(count("SELECT count(*) FROM claim_closures"), 0);
}

}  // namespace
}  // namespace awa::testing
