// awa::Transaction has the internal transaction's semantics (issue 12, "The public API"):
// a commit the server turned into a rollback throws, through the public types only.
#include <string>

#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/migrate.hpp"
#include "support.hpp"

namespace awa::testing {
namespace {

class PublicTransactionTest : public PgTest {
 protected:
  void SetUpSchema() override {
    app_ = std::make_unique<Connection>(Connection::connect(database_url()));
    migrate(*app_, schema_);
  }
  std::int64_t count(const std::string& sql) { return conn().exec(sql).get<std::int64_t>(0, 0); }

  std::unique_ptr<Connection> app_;
};

TEST_F(PublicTransactionTest, CommitAfterARefusedAdminCallThrowsAndStoresNothing) {
  // An admin call refused inside the caller's transaction (a CHECK violation) aborts it;
  // a caller that swallows the error and commits must learn that nothing was stored —
  // including the pause made earlier in the same transaction.
  const Admin admin(schema_);
  Connection& app = *app_;
  {
    Transaction tx(app);
    admin.pause_queue(app, "txq");
    QueueConfigChange bad;
    bad.deadline_ms = -1;
    EXPECT_THROW(admin.configure_queue(app, "txq", bad), ConstraintViolation);
    try {
      tx.commit();
      ADD_FAILURE() << "commit() of an aborted transaction returned normally";
    } catch (const DatabaseError& e) {
      EXPECT_EQ(e.sqlstate(), "25P02");
      EXPECT_EQ(e.retry(), Retry::kDoNotRetry);
      EXPECT_NE(std::string(e.what()).find("nothing was stored"), std::string::npos) << e.what();
    }
    EXPECT_THROW(tx.commit(), Error) << "a finished transaction cannot commit again";
  }
  EXPECT_FALSE(app.in_transaction());
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta"), 0);
  EXPECT_FALSE(admin.queue_summary(app, "txq").settings.paused);

  // The connection is usable afterwards, and a clean transaction commits.
  {
    Transaction tx(app);
    admin.pause_queue(app, "txq");
    tx.commit();
  }
  EXPECT_TRUE(admin.queue_summary(app, "txq").settings.paused);
}

TEST_F(PublicTransactionTest, CommitThatFailsAtTheServerThrowsTheServersError) {
  // A deferred constraint is checked by COMMIT itself: the server rolls back and says why.
  Connection& app = *app_;
  const std::string t = quoted_schema() + ".orders";
  app.execute("CREATE TABLE " + t +
              " (id int, CONSTRAINT orders_id_key UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)");
  {
    Transaction tx(app);
    app.execute("INSERT INTO " + t + " VALUES (1), (1)");  // accepted until COMMIT
    try {
      tx.commit();
      ADD_FAILURE() << "commit() returned normally although the server rolled back";
    } catch (const ConstraintViolation& e) {
      EXPECT_EQ(e.sqlstate(), "23505");
    }
  }
  EXPECT_FALSE(app.in_transaction());
  EXPECT_EQ(count("SELECT count(*) FROM orders"), 0);
}

TEST_F(PublicTransactionTest, RollbackAndDestructionDiscardTheWrites) {
  const Admin admin(schema_);
  Connection& app = *app_;
  {
    Transaction tx(app);
    admin.pause_queue(app, "a");
    tx.rollback();
    tx.rollback();  // idempotent
  }
  {
    Transaction tx(app);
    admin.pause_queue(app, "b");
  }  // destroyed without commit
  EXPECT_FALSE(app.in_transaction());
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta"), 0);
}

}  // namespace
}  // namespace awa::testing
