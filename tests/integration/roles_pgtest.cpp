// Least privilege (issue 10): what awa_producer, awa_worker and awa_admin can and cannot
// do, shown by running each operation under SET ROLE (which changes the privileges the
// session acts with, exactly as a login role granted the awa role would). Roles are
// cluster-wide, so each test uses its own prefix and drops its roles afterwards.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/periodic.hpp"
#include "awa/workflows.hpp"
#include "cli_runner.hpp"
#include "pg/native.hpp"
#include "storage/periodic.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kDenied = "42501";  // insufficient_privilege

// The SQLSTATE `fn` fails with; "" when it succeeds.
std::string sqlstate_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.sqlstate().empty() ? std::string("(no sqlstate) ") + e.what() : e.sqlstate();
  }
  return "";
}

class RolesTest : public StorageTest {
 protected:
  void SetUpSchema() override {
    StorageTest::SetUpSchema();
    // "t_r_<pid>_<n>_<hex>": unique per test and per run, a valid role prefix.
    prefix_ = unique_schema_name("r");
    report_ = Admin(schema_).setup_roles(owner_conn(), prefix_);
  }

  void TearDown() override {
    as_.clear();
    owner_.reset();
    StorageTest::TearDown();  // drops the schema, and with it every grant on its objects
    try {
      pg::Connection c = pg::Connection::connect(test_connect_options());
      const auto existing =
          c.exec(fmt::format("SELECT count(*) FROM pg_roles WHERE rolname IN ('{0}_producer', "
                             "'{0}_worker', '{0}_admin')",
                             prefix_))
              .get<std::int64_t>(0, 0);
      if (existing == 3) {
        // DROP OWNED removes what the schema drop did not: default privileges.
        c.exec(fmt::format("DROP OWNED BY {0}_producer, {0}_worker, {0}_admin", prefix_));
      }
      c.exec(fmt::format("DROP ROLE IF EXISTS {0}_producer, {0}_worker, {0}_admin", prefix_));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "dropping roles " << prefix_ << "_*: " << e.what();
    }
  }

  awa::Connection& owner_conn() {
    if (!owner_)
      owner_ = std::make_unique<awa::Connection>(awa::Connection::connect(database_url()));
    return *owner_;
  }

  std::string role(const char* which) const { return prefix_ + "_" + which; }

  // A connection acting as <prefix>_<which>, search_path on the test schema.
  awa::Connection& as(const char* which) {
    auto& c = as_[which];
    if (!c) {
      c = std::make_unique<awa::Connection>(awa::Connection::connect(database_url()));
      c->execute("SET search_path TO " + quoted_schema());
      c->execute("SET ROLE " + role(which));
    }
    return *c;
  }

  std::string denied_sql(const char* which, const std::string& sql) {
    return sqlstate_of([&] { pg::native(as(which)).exec(sql); });
  }

  JobId enqueue_as(const char* which, const std::string& queue, QueueStorage& store) {
    return store.insert(as(which), NewJob("k", {{"secret", "args of " + queue}}, on_queue(queue)));
  }

  std::string prefix_;
  RolesReport report_;
  std::unique_ptr<awa::Connection> owner_;
  std::map<std::string, std::unique_ptr<awa::Connection>> as_;
};

TEST_F(RolesTest, SetupCreatesThreeNologinRolesAndReportsTheirGrants) {
  ASSERT_EQ(report_.roles.size(), 3u);
  EXPECT_EQ(report_.roles[0].role, role("producer"));
  EXPECT_EQ(report_.roles[1].role, role("worker"));
  EXPECT_EQ(report_.roles[2].role, role("admin"));
  for (const auto& r : report_.roles) {
    EXPECT_TRUE(r.created) << r.role;
    EXPECT_EQ(count(fmt::format("SELECT count(*) FROM pg_roles WHERE rolname = '{}' AND NOT "
                                "rolcanlogin AND NOT rolsuper AND NOT rolcreaterole",
                                r.role)),
              1);
  }
  const auto has = [](const RoleSetup& r, const std::string& kind, const std::string& privs,
                      const std::string& object) {
    return std::any_of(r.grants.begin(), r.grants.end(), [&](const RoleGrant& g) {
      return g.kind == kind && g.privileges == privs &&
             (", " + g.objects + ",").find(", " + object + ",") != std::string::npos;
    });
  };
  const auto& producer = report_.roles[0];
  EXPECT_TRUE(has(producer, "tables", "INSERT", "ready_entries"));
  EXPECT_TRUE(has(producer, "tables", "INSERT", "deferred_jobs"));
  EXPECT_TRUE(has(producer, "columns", "SELECT", "ready_entries(job_id)"));
  EXPECT_TRUE(has(producer, "functions", "EXECUTE", "insert_job_compat"));
  EXPECT_FALSE(has(producer, "functions", "EXECUTE", "claim_ready_runtime"));
  EXPECT_TRUE(has(report_.roles[1], "functions", "EXECUTE", "claim_ready_runtime"));
  EXPECT_TRUE(has(report_.roles[1], "tables", "SELECT", "queue_meta"));
  EXPECT_TRUE(has(report_.roles[2], "tables", "DELETE, INSERT, SELECT, UPDATE", "queue_meta"));
}

TEST_F(RolesTest, SetupIsIdempotentAndRestoresNologin) {
  owner_conn().execute(fmt::format("ALTER ROLE {} LOGIN", role("producer")));
  const auto again = Admin(schema_).setup_roles(owner_conn(), prefix_);
  ASSERT_EQ(again.roles.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(again.roles[i].created);
    ASSERT_EQ(again.roles[i].grants.size(), report_.roles[i].grants.size()) << again.roles[i].role;
    for (std::size_t g = 0; g < again.roles[i].grants.size(); ++g) {
      EXPECT_EQ(again.roles[i].grants[g].objects, report_.roles[i].grants[g].objects);
      EXPECT_EQ(again.roles[i].grants[g].privileges, report_.roles[i].grants[g].privileges);
    }
  }
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM pg_roles WHERE rolname = '{}' AND rolcanlogin",
                              role("producer"))),
            0);
}

TEST_F(RolesTest, AProducerWhoseRolesPredateTheOneJobPathStillEnqueuesSingleJobs) {
  // Roles set up by an older release lack the one-job path's grants until `awa roles
  // setup` runs again; a single-job insert must then take the general path, not fail.
  owner_conn().execute(
      fmt::format("REVOKE SELECT ON {}.ring_rotations FROM {}", quoted_schema(), role("producer")));
  QueueStorage store(StorageOptions{schema_});
  EXPECT_GT(enqueue_as("producer", "old", store), 0);
  EXPECT_GT(enqueue_as("producer", "old", store), 0);
  EXPECT_GT(enqueue_as("producer", "old", store), 0);
  EXPECT_EQ(store.stats().one_job_writes, 0u);
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('old')"), 3);
}

TEST_F(RolesTest, RejectsABadPrefix) {
  for (const char* bad : {"", "Awa", "1awa", "awa-x", "awa x", "awa;drop"}) {
    EXPECT_THROW(Admin(schema_).setup_roles(owner_conn(), bad), InvalidArgument) << bad;
  }
  EXPECT_THROW(Admin(schema_).setup_roles(owner_conn(), std::string(55, 'a')), InvalidArgument);
}

TEST_F(RolesTest, ProducerEnqueuesThroughEveryProducerPath) {
  QueueStorage store(StorageOptions{schema_});
  EXPECT_GT(enqueue_as("producer", "p", store), 0);
  // A second job to that lane takes the one-job path (insert_one.sql), which needs the
  // partitions, the lane heads and sequence and the ring ledger granted.
  EXPECT_GT(enqueue_as("producer", "p", store), 0);
  EXPECT_EQ(store.stats().one_job_writes, 1u);
  std::vector<NewJob> batch;
  for (int i = 0; i < 3; ++i) batch.emplace_back("k", nlohmann::json{{"i", i}}, on_queue("p"));
  EXPECT_EQ(store.insert_many_copy(as("producer"), batch).size(), 3u);
  EXPECT_EQ(store.insert_many(as("producer"), batch).size(), 3u);
  auto later = on_queue("p");
  later.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
  EXPECT_GT(store.insert(as("producer"), NewJob("k", {}, later)), 0);
  {  // A transactional enqueue, with a second shard count and an ordering key.
    set_shards("p4", 4);
    awa::Transaction tx(as("producer"));
    auto keyed = on_queue("p4");
    keyed.ordering_key = "customer-1";
    store.insert(as("producer"), NewJob("k", {}, keyed));
    store.insert(as("producer"), NewJob("k", {}, on_queue("p4")));
    tx.commit();
  }
  auto& sql = pg::native(as("producer"));
  // AWA's parameter order, positional and named; the returned row carries the id.
  EXPECT_GT(
      sql.exec("SELECT id FROM insert_job_compat('k', 'p', '{\"a\":1}')").get<std::int64_t>(0, 0),
      0);
  EXPECT_GT(
      sql.exec("SELECT id FROM insert_job_compat('k', 'p', '{}', p_run_at => now() + interval "
               "'1 h')")
          .get<std::int64_t>(0, 0),
      0);
  EXPECT_EQ(sql.exec("SELECT state FROM insert_job_compat(p_kind => 'k', p_queue => 'p', "
                     "p_state => 'scheduled', p_run_at => now() + interval '1 h')")
                .get<std::string>(0, 0),
            "scheduled");
  EXPECT_EQ(sql.exec("SELECT * FROM insert_jobs_compat('[{\"kind\":\"a\",\"queue\":\"p4\"},"
                     "{\"kind\":\"b\",\"queue\":\"q2\",\"ordering_key\":\"x\"}]')")
                .rows(),
            2);
  // A unique job: the key claim (SECURITY DEFINER) needs no grant on unique_keys, and
  // the producer learns the holder of an existing key.
  auto once = on_queue("pu");
  once.unique = UniqueOpts{};
  const auto first = store.insert_result(as("producer"), NewJob("k", {}, once));
  const auto again = store.insert_result(as("producer"), NewJob("k", {}, once));
  EXPECT_FALSE(first.duplicate);
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM unique_keys"), kDenied);
  // Several in one call: the keys are claimed first and named after the bulk write
  // (claim_unique_keys, set_unique_key_holders), with the producer's grants alone.
  const std::vector<NewJob> several = {NewJob("k", {}, once), NewJob("k2", {}, once),
                                       NewJob("k3", {}, on_queue("pu"))};
  const auto ids = store.insert_many(as("producer"), several);
  ASSERT_EQ(ids.size(), 3U);
  EXPECT_EQ(ids[0], first.id);
  EXPECT_EQ(store.insert_result(as("producer"), NewJob("k2", {}, once)).id, ids[1]);
  // 2 + 3 + 3 + 1 compat now = 9 ready on p, 2 + 1 on p4, 1 on q2, 3 on pu; 3 deferred.
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries"), 16);
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 3);
  // Jobs after parents: enqueue_after (SECURITY DEFINER) reads the parents' states and
  // writes the dependency tables, which the producer cannot touch itself.
  auto child = on_queue("pc");
  child.after = {first.id};
  const auto waiting = store.insert(as("producer"), NewJob("k", {}, child));
  EXPECT_EQ(
      sql.query("SELECT state FROM insert_job_compat('k', 'pc', p_after => ARRAY[$1::bigint])",
                first.id)
          .get<std::string>(0, 0),
      "waiting");
  EXPECT_EQ(count("SELECT count(*) FROM waiting_jobs"), 2);
  EXPECT_EQ(
      count(fmt::format("SELECT count(*) FROM job_dependencies WHERE child_id = {}", waiting)), 1);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM waiting_jobs"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM job_dependencies"), kDenied);
  // Batch members: add_batch_members (SECURITY DEFINER) locks the batch row and writes
  // batch_members, which the producer cannot touch itself.
  WorkflowAdmin(schema_).open_batch(as("admin"), "pb");
  auto member = on_queue("pb");
  member.batch = "pb";
  store.insert_many(as("producer"),
                    std::vector<NewJob>{NewJob("k", {}, member), NewJob("k", {}, member)});
  EXPECT_EQ(sql.query("SELECT id FROM insert_job_compat('k', 'pb', p_batch => 'pb')").rows(), 1);
  EXPECT_EQ(count("SELECT count(*) FROM batch_members"), 3);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM batch_members"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM batches"), kDenied);
  EXPECT_EQ(sqlstate_of([&] { WorkflowAdmin(schema_).seal_batch(as("producer"), "pb"); }), kDenied);
}

TEST_F(RolesTest, ProducerCannotReadJobsClaimCompleteOrChangeAnything) {
  QueueStorage store(StorageOptions{schema_});
  const auto id = enqueue_as("producer", "p", store);
  // Reading any job's data.
  EXPECT_EQ(denied_sql("producer", "SELECT args FROM ready_entries"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT args FROM ready_entries_0"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM deferred_jobs"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM done_entries"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM dlq_entries"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM runtime_instances"), kDenied);
  EXPECT_EQ(sqlstate_of([&] { Admin(schema_).health(as("producer")); }), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM attempt_outcomes"), kDenied);
  EXPECT_EQ(
      denied_sql("producer", "SELECT kind FROM ready_entries WHERE job_id = " + std::to_string(id)),
      kDenied);
  // Claiming, completing, heartbeating, rescuing, cancelling.
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM claim_ready_runtime('p', 10)"), kDenied);
  EXPECT_EQ(sqlstate_of([&] { storage::consumer(store).claim(pg::native(as("producer")), "p"); }),
            kDenied);
  EXPECT_EQ(
      denied_sql("producer",
                 "SELECT * FROM close_attempts('{1}', '{1}', '{completed}', '{NULL}', '{0}')"),
      kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM rescue_stale_attempts('1 s', 10)"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT cancel_job(" + std::to_string(id) + ")"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT promote_due_deferred(10)"), kDenied);
  // Changing or removing rows, queue settings, tables.
  EXPECT_EQ(denied_sql("producer", "DELETE FROM ready_entries"), kDenied);
  EXPECT_EQ(denied_sql("producer", "UPDATE ready_entries SET args = '{}'"), kDenied);
  EXPECT_EQ(sqlstate_of([&] { Admin(schema_).set_enqueue_shards(as("producer"), "p", 4); }),
            kDenied);
  EXPECT_EQ(denied_sql("producer", "TRUNCATE ready_entries_0"), kDenied);
  EXPECT_EQ(denied_sql("producer", "DROP TABLE ready_entries"), kDenied);
  EXPECT_EQ(denied_sql("producer", "CREATE TABLE x (a int)"), kDenied);
  // The job is still there, untouched.
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE args->>'secret' = 'args of p'"), 1);
}

TEST_F(RolesTest, WorkerClaimsHeartbeatsCompletesAndMaintains) {
  QueueStorage producer_store(StorageOptions{schema_});
  enqueue_as("producer", "w", producer_store);
  enqueue_as("producer", "w", producer_store);
  QueueStorage store(StorageOptions{schema_});
  auto& w = pg::native(as("worker"));
  const auto claimed = storage::consumer(store).claim(w, "w");
  ASSERT_EQ(claimed.size(), 2u);
  EXPECT_NE(claimed[0].args_json.find("args of w"), std::string::npos);  // reads its jobs
  const QueueStorage::Heartbeat beats[] = {QueueStorage::Heartbeat::of(claimed[0], "{\"p\":5}")};
  EXPECT_EQ(storage::consumer(store).heartbeat(w, beats).size(), 1u);
  const Completion done[] = {Completion::of(claimed[0], Outcome::kCompleted),
                             Completion::of(claimed[1], Outcome::kRetry, "again", milliseconds(0))};
  const auto results = storage::consumer(store).complete(w, done);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].state.value_or("stale"), "completed");
  EXPECT_EQ(results[1].state.value_or("stale"), "retried");
  // The maintenance leader's work.
  EXPECT_GE(storage::consumer(store).promote_due(w), 0);
  EXPECT_EQ(storage::consumer(store).rescue(w, milliseconds(1)).size(), 0u);
  const Admin admin(schema_);
  EXPECT_NO_THROW(admin.rotate(as("worker"), "queue"));
  EXPECT_NO_THROW(admin.prune(as("worker"), "claim", true));
  // A prune that removes closed batches writes their rates to minute_rollups.
  EXPECT_TRUE(admin.rotate(as("worker"), "claim").done);
  EXPECT_TRUE(admin.prune(as("worker"), "claim", false).done);
  EXPECT_EQ(count("SELECT count(*) FROM claim_batches"), 0);
  EXPECT_EQ(count("SELECT sum(claims) FROM minute_rollups WHERE queue_id = queue_id_of('w')"), 2);
  EXPECT_NO_THROW(admin.purge_dlq(as("worker"), milliseconds(0)));
  EXPECT_NO_THROW(admin.storage_status(as("worker")));
  EXPECT_EQ(admin.queue_counts(as("worker"), "w").completed, 1);
  // Not queue settings, not the schema.
  EXPECT_EQ(sqlstate_of([&] { admin.set_enqueue_shards(as("worker"), "w", 2); }), kDenied);
  EXPECT_EQ(denied_sql("worker", "UPDATE queue_meta SET paused = true"), kDenied);
  EXPECT_EQ(denied_sql("worker", "TRUNCATE ready_entries"), kDenied);
  EXPECT_EQ(denied_sql("worker", "DROP TABLE ready_entries"), kDenied);
  EXPECT_EQ(denied_sql("worker",
                       "ALTER FUNCTION claim_ready_runtime(text, integer, interval, "
                       "interval) SECURITY DEFINER"),
            kDenied);
  EXPECT_EQ(denied_sql("worker", "DELETE FROM schema_migrations"), kDenied);
}

TEST_F(RolesTest, AShardFenceWorksUnderTheLeastPrivilegeRoles) {
  // Each role's part in a change of the shard count with keyed jobs waiting
  // (sql/functions/0022_shard_fences.sql): the producer's check under the reshard lock, the
  // admin's change recording the fence, the worker's claim reading it and lifting it.
  QueueStorage producer_store(StorageOptions{schema_, std::chrono::hours(1)});
  std::string key = "customer-0";  // one whose shard changes from S = 4 to S = 8
  for (int i = 1; shard_for_ordering_key(key, 4) == shard_for_ordering_key(key, 8); ++i)
    key = "customer-" + std::to_string(i);
  const auto keyed = [&](int n) {
    InsertOpts o = on_queue("f");
    o.ordering_key = key;
    return producer_store.insert(as("producer"), NewJob("k", {{"n", n}}, o));
  };
  const Admin admin(schema_);
  admin.set_enqueue_shards(as("admin"), "f", 4);
  const auto before = keyed(1);
  admin.set_enqueue_shards(as("admin"), "f", 8);  // the producer's cached 4 is now stale
  EXPECT_EQ(
      count("SELECT count(DISTINCT epoch) FROM shard_fences WHERE queue_id = queue_id_of('f')"), 1);
  const auto after = keyed(2);
  EXPECT_EQ(count(fmt::format("SELECT enqueue_shard FROM ready_entries WHERE job_id = {}", after)),
            shard_for_ordering_key(key, 8));
  QueueStorage store(StorageOptions{schema_});
  auto& w = pg::native(as("worker"));
  const auto first = storage::consumer(store).claim(w, "f");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].job_id, before);
  const auto second = storage::consumer(store).claim(w, "f");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].job_id, after);
  EXPECT_EQ(count("SELECT count(*) FROM shard_fences"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta WHERE queue = 'f' AND shard_fence IS NULL"), 1);
}

TEST_F(RolesTest, AdminOperatesQueuesAndStorage) {
  QueueStorage store(StorageOptions{schema_});
  enqueue_as("producer", "a", store);
  const Admin admin(schema_);
  admin.set_enqueue_shards(as("admin"), "a", 3);
  EXPECT_EQ(count("SELECT enqueue_shards FROM queue_meta WHERE queue = 'a'"), 3);
  // Reads the lane sequence ensure_lane created (default privileges).
  std::int64_t available = 0;
  for (const auto& lane : admin.queue_shards(as("admin"), "a")) available += lane.available;
  EXPECT_EQ(available, 1);
  EXPECT_EQ(admin.storage_status(as("admin")).size(), 3u);
  EXPECT_EQ(admin.queue_counts(as("admin"), "a").available, 1);
  const auto id = count("SELECT max(job_id) FROM ready_entries");
  EXPECT_EQ(admin.cancel_job(as("admin"), id), "available");
  EXPECT_NO_THROW(admin.rotate(as("admin"), "lease"));
  // The rates read the rings and minute_rollups.
  EXPECT_TRUE(admin.throughput(as("admin"), std::chrono::minutes(60)).queues.empty());
  EXPECT_TRUE(admin.shard_claims(as("admin"), "a", std::chrono::minutes(60)).lanes.empty());
  EXPECT_EQ(denied_sql("admin", "DROP TABLE queue_meta"), kDenied);
  EXPECT_EQ(denied_sql("admin", "DROP FUNCTION claim_ready_runtime"), kDenied);
  EXPECT_EQ(denied_sql("admin", "CREATE TABLE x (a int)"), kDenied);
}

TEST_F(RolesTest, AdminRunsJobAndDlqOperations) {
  // job_events (migration 0004) and the job / DLQ functions need nothing beyond what
  // the admin role holds; the producer can read none of it.
  QueueStorage store(StorageOptions{schema_});
  const auto a = enqueue_as("producer", "ja", store);
  const auto b = enqueue_as("producer", "ja", store);
  const Admin admin(schema_);
  EXPECT_EQ(admin.move_job(as("admin"), a, "jb").outcome, "moved");
  EXPECT_EQ(admin.set_job_priority(as("admin"), b, 1).outcome, "reprioritised");
  EXPECT_EQ(admin.cancel_job(as("admin"), b), "available");
  EXPECT_EQ(admin.retry_job(as("admin"), b).outcome, "retried");
  EXPECT_EQ(admin.list_jobs(as("admin"), JobFilter{}).size(), 2u);
  ASSERT_TRUE(admin.job(as("admin"), a));
  EXPECT_EQ(admin.job(as("admin"), a)->timeline.back().event, "moved");
  EXPECT_EQ(admin.age_waiting_priorities(as("admin"), "jb", std::chrono::hours(1)), 0);

  conn().exec("INSERT INTO queue_meta (queue, dlq_enabled) VALUES ('jb', true)");
  const auto got = store.claim(as("worker"), "jb");
  ASSERT_EQ(got.size(), 1u);
  store.complete(as("worker"), std::vector{Completion::of(got[0], Outcome::kFail, "x")});
  EXPECT_EQ(admin.list_dlq(as("admin"), DlqFilter{}).size(), 1u);
  // The dashboard's rates (migration 0005's indexes need no grant).
  const auto ends = admin.throughput(as("admin"), std::chrono::minutes(60), std::string("jb"));
  ASSERT_EQ(ends.queues.size(), 1u);
  EXPECT_EQ(
      std::accumulate(ends.queues[0].failed.begin(), ends.queues[0].failed.end(), std::int64_t{0}),
      1);
  const auto claims = admin.shard_claims(as("admin"), "jb", std::chrono::minutes(60));
  ASSERT_EQ(claims.lanes.size(), 1u);
  EXPECT_EQ(std::accumulate(claims.lanes[0].claims.begin(), claims.lanes[0].claims.end(),
                            std::int64_t{0}),
            1);
  DlqFilter one;
  one.id = a;
  EXPECT_EQ(admin.retry_dlq(as("admin"), one), std::vector<JobId>{a});
  DlqFilter all;
  all.all = true;
  EXPECT_EQ(admin.purge_dlq(as("admin"), all), 0);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM job_states()"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM job_events"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM move_queue(1, 'x')"), kDenied);
}

TEST_F(RolesTest, ClientRunsAsWorkerWithMaintenance) {
  // The whole runtime — dispatchers, batcher, heartbeats and the maintenance leader
  // (promotion, rescue, rotation) — on connections acting as the worker role.
  std::string url = database_url();
  url += (url.find('?') == std::string::npos ? "?" : "&");
  url += "options=-c%20role%3D" + role("worker");
  QueueStorage store(StorageOptions{schema_});
  enqueue_as("producer", "rt", store);
  auto later = on_queue("rt");
  later.run_at = std::chrono::system_clock::now() + milliseconds(300);
  store.insert(as("producer"), NewJob("k", {}, later));

  ClientOptions o;
  o.database_url = url;
  o.schema = schema_;
  o.migrate = false;
  o.maintenance_interval = milliseconds(50);
  o.ring_rotate_interval = milliseconds(50);
  o.pool_size = 3;
  Client client(o);
  std::atomic<int> ran{0};
  client.register_worker("k", [&](JobContext&) {
    ++ran;
    return JobResult::completed();
  });
  QueueConfig queue;
  queue.name = "rt";
  queue.max_workers = 2;
  client.add_queue(queue);
  client.start();
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (ran.load() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  std::this_thread::sleep_for(milliseconds(200));  // a few leader rounds after the jobs
  // The worker role registered the instance and recorded leader ticks; the admin role
  // reads them through health.
  const Health h = Admin(schema_).health(as("admin"));
  EXPECT_TRUE(h.healthy) << (h.problems.empty() ? "" : h.problems[0]);
  ASSERT_EQ(h.workers.size(), 1u);
  EXPECT_TRUE(h.workers[0].is_leader);
  EXPECT_EQ(h.workers[0].queues, std::vector<std::string>{"rt"});
  client.stop();
  EXPECT_EQ(count("SELECT count(*) FROM runtime_instances"), 0);  // removed as the worker
  EXPECT_EQ(ran.load(), 2);
  EXPECT_GE(client.stats().promoted, 1u);
  EXPECT_EQ(Admin(schema_).queue_counts(owner_conn(), "rt").completed, 2);
  EXPECT_GT(count("SELECT count(*) FROM ring_rotations"), 0);  // the leader rotated
}

TEST_F(RolesTest, ReMigratingKeepsTheProducerPathAndItsLimits) {
  // Force every function file to be re-applied (some DROP and CREATE their function):
  // the lane functions must come back SECURITY DEFINER, and nothing the producer could
  // not do before becomes possible.
  conn().exec("DELETE FROM schema_functions");
  schema::Migrator(schema_).migrate(conn());
  QueueStorage store(StorageOptions{schema_});
  EXPECT_GT(enqueue_as("producer", "m", store), 0);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM claim_ready_runtime('m', 10)"), kDenied);
  EXPECT_EQ(denied_sql("producer", "SELECT args FROM ready_entries"), kDenied);
  Admin(schema_).setup_roles(owner_conn(), prefix_);
  EXPECT_EQ(denied_sql("producer", "SELECT * FROM claim_ready_runtime('m', 10)"), kDenied);
}

TEST_F(RolesTest, CliSetsUpRoles) {
  const auto r = run_cli(fmt::format("--schema {} roles setup --prefix {}", schema_, prefix_));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(role("producer") + " (updated NOLOGIN role)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("ready_entries"), std::string::npos) << r.output;
  const auto bad = run_cli(fmt::format("--schema {} roles setup --prefix Bad-Prefix", schema_));
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("invalid role prefix"), std::string::npos) << bad.output;
}

// Periodic jobs (docs/scheduling.md): a worker declares and fires schedules but cannot
// delete one; the admin can; the producer cannot see them.
TEST_F(RolesTest, WorkerFiresPeriodicJobsAdminRemovesThem) {
  const PeriodicAdmin periodic(schema_);
  PeriodicJob j;
  j.name = "tick";
  j.schedule = "@every 1s";
  j.kind = "k";
  const std::vector<PeriodicJob> declared{j};
  EXPECT_EQ(periodic.declare(as("worker"), declared).size(), 1u);
  conn().exec(
      "UPDATE periodic_jobs SET next_fire_at = date_trunc('second', now()) - interval '1s'");
  EXPECT_EQ(storage::fire_due_periodic(pg::native(as("worker")), schema_, 10, 10).size(), 1u);
  EXPECT_EQ(periodic.trigger(as("worker"), "tick").has_value(), true);
  EXPECT_EQ(sqlstate_of([&] { periodic.remove(as("worker"), "tick"); }), kDenied);
  EXPECT_EQ(sqlstate_of([&] { periodic.list(as("producer")); }), kDenied);
  EXPECT_TRUE(periodic.remove(as("admin"), "tick"));
}

}  // namespace
}  // namespace awa::testing
