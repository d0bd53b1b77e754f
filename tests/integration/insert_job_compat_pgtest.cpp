// The SQL producer (insert_job_compat / insert_jobs_compat,
// sql/functions/0030_insert_job_compat.sql): routes exactly like the C++ producer,
// validates like it, and follows the lock-order rule its header documents.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "producer_support.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

// Keys "<prefix>0", "<prefix>1", ... of which the first lands on shard `want` of `shards`.
std::string key_on_shard(const std::string& prefix, int want, int shards) {
  for (int i = 0;; ++i) {
    std::string k = prefix + std::to_string(i);
    if (shard_for_ordering_key(k, shards) == want) return k;
  }
}

class InsertJobCompatTest : public StorageTest {
 protected:
  // insert_job_compat on `c` with an optional binary key; returns the job id.
  static JobId compat(pg::Connection& c, const std::string& queue,
                      const std::optional<std::string>& key = std::nullopt,
                      const std::string& kind = "compat") {
    pg::Params p;
    p.add(kind).add(queue);
    if (key) {
      p.add_bytea(*key);
    } else {
      p.null();
    }
    return c
        .exec("SELECT id FROM insert_job_compat(p_kind => $1, p_queue => $2, p_ordering_key => $3)",
              p)
        .get<std::int64_t>(0, 0);
  }
  JobId compat(const std::string& queue, const std::optional<std::string>& key = std::nullopt) {
    return compat(conn(), queue, key);
  }

  // insert_jobs_compat on `c`; returns the ids in input order.
  static std::vector<JobId> compat_batch(pg::Connection& c, const Json& jobs) {
    const auto r = c.query("SELECT ord, job_id FROM insert_jobs_compat($1::jsonb)", jobs.dump());
    std::vector<JobId> ids;
    for (int i = 0; i < r.rows(); ++i) {
      EXPECT_EQ(r.get<std::int64_t>(i, 0), i + 1);
      ids.push_back(r.get<std::int64_t>(i, 1));
    }
    return ids;
  }

  int shard_of(JobId id) {
    const auto r = conn().query("SELECT enqueue_shard FROM ready_entries WHERE job_id = $1", id);
    if (r.rows() != 1) {
      ADD_FAILURE() << "job " << id << " has " << r.rows() << " ready rows";
      return -1;
    }
    return r.get<int>(0, 0);
  }

  std::int64_t lane_seq_of(JobId id) {
    return conn()
        .query("SELECT lane_seq FROM ready_entries WHERE job_id = $1", id)
        .get<std::int64_t>(0, 0);
  }

  std::int64_t rows_written() {
    return count(
        "SELECT (SELECT count(*) FROM ready_entries) + (SELECT count(*) FROM deferred_jobs)"
        " + (SELECT count(*) FROM queue_enqueue_heads) + (SELECT count(*) FROM queue_claim_heads)");
  }
};

TEST_F(InsertJobCompatTest, KeyedInsertsRouteExactlyLikeCpp) {
  // Guards cross-language routing (docs/design/engine.md): at S = 8 a keyed SQL insert
  // lands on the C++ shard_for_ordering_key(key, 8), the same shard as a C++ insert of the
  // same key — for binary keys, UTF-8 keys and the batch form's text keys.
  set_shards("mixed", 8);
  std::vector<std::string> keys = {std::string("\0", 1),         "\xff",
                                   std::string("\0\xff\x01", 3), "\xc3\xbc",
                                   std::string(256, '\xfe'),     ""};
  for (int i = 0; keys.size() < 48; ++i) keys.push_back("tenant-" + std::to_string(i));
  std::set<int> covered;
  for (const auto& k : keys) covered.insert(shard_for_ordering_key(k, 8));
  ASSERT_EQ(covered.size(), 8u) << "test keys must cover all shards";

  for (const auto& k : keys) {
    const int want = shard_for_ordering_key(k, 8);
    const JobId sql_id = compat("mixed", k);
    InsertOpts opts;
    opts.queue = "mixed";
    opts.ordering_key = k;
    const JobId cpp_id = storage::insert_many(
        *store_, conn(), std::vector<NewJob>{NewJob("cpp", Json::object(), opts)})[0];
    EXPECT_EQ(shard_of(sql_id), want) << "SQL, key of " << k.size() << " bytes";
    EXPECT_EQ(shard_of(cpp_id), want) << "C++, key of " << k.size() << " bytes";
  }

  // The batch form takes text keys (their UTF-8 bytes).
  Json batch = Json::array();
  std::vector<std::string> text_keys;
  for (const auto& k : keys) {
    if (k.rfind("tenant-", 0) == 0 || k == "\xc3\xbc") text_keys.push_back(k);
  }
  for (const auto& k : text_keys)
    batch.push_back({{"kind", "b"}, {"queue", "mixed"}, {"ordering_key", k}});
  const auto ids = compat_batch(conn(), batch);
  ASSERT_EQ(ids.size(), text_keys.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(shard_of(ids[i]), shard_for_ordering_key(text_keys[i], 8)) << text_keys[i];
  }
}

TEST_F(InsertJobCompatTest, OneShardIgnoresKeys) {
  // Guards S = 1 on the SQL side: every key and no key go to shard 0.
  for (const auto& k : {std::optional<std::string>(), std::optional<std::string>("a"),
                        std::optional<std::string>("customer-42")}) {
    EXPECT_EQ(shard_of(compat("single", k)), 0);
  }
}

struct SqlBadCase {
  const char* name;
  const char* field;  // the message must name it
  std::string kind = "good";
  std::optional<std::string> args = "{}";
  std::string queue = "valid";
  int priority = 2;
  int max_attempts = 25;
  std::optional<std::string> key = std::nullopt;
};

TEST_F(InsertJobCompatTest, BadInputRaises22023NamingTheFieldAndWritesNothing) {
  // Guards the SQL validate_job: the same limits as C++, SQLSTATE 22023, a message naming
  // the field, and nothing written — for the single and the batch form.
  std::vector<SqlBadCase> cases;
  const auto add = [&](const char* name, const char* field, auto mutate) {
    SqlBadCase c{name, field};
    mutate(c);
    cases.push_back(c);
  };
  add("empty kind", "kind", [](SqlBadCase& c) { c.kind.clear(); });
  add("kind of 201 bytes", "kind", [](SqlBadCase& c) { c.kind.assign(201, 'k'); });
  add("empty queue", "queue", [](SqlBadCase& c) { c.queue.clear(); });
  add("queue with a space", "queue", [](SqlBadCase& c) { c.queue = "my queue"; });
  add("queue of 201 chars", "queue", [](SqlBadCase& c) { c.queue.assign(201, 'q'); });
  add("priority 0", "priority", [](SqlBadCase& c) { c.priority = 0; });
  add("priority 5", "priority", [](SqlBadCase& c) { c.priority = 5; });
  add("max_attempts 0", "max_attempts", [](SqlBadCase& c) { c.max_attempts = 0; });
  add("max_attempts 1001", "max_attempts", [](SqlBadCase& c) { c.max_attempts = 1001; });
  add("NULL args", "args", [](SqlBadCase& c) { c.args.reset(); });
  add("ordering key of 257 bytes", "ordering_key",
      [](SqlBadCase& c) { c.key = std::string(257, 'k'); });

  set_shards("valid", 2);
  compat("valid");  // lanes and heads exist; the bad calls must not add to them
  const auto before = rows_written();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    pg::Params p;
    p.add(c.kind).add(c.args).add(c.queue).add(c.priority).add(c.max_attempts);
    if (c.key) {
      p.add_bytea(*c.key);
    } else {
      p.null();
    }
    try {
      conn().exec(
          "SELECT insert_job_compat(p_kind => $1, p_args => $2::jsonb, p_queue => $3,"
          " p_priority => $4, p_max_attempts => $5, p_ordering_key => $6::bytea)",
          p);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.sqlstate(), "22023") << e.what();
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
    }

    if (!c.args || c.key) continue;  // the batch form has no NULL args and text keys only
    Json bad = {{"kind", c.kind},
                {"queue", c.queue},
                {"priority", c.priority},
                {"max_attempts", c.max_attempts},
                {"args", Json::parse(*c.args)}};
    const Json batch = {
        {{"kind", "good"}, {"queue", "valid"}}, bad, {{"kind", "good"}, {"queue", "other"}}};
    try {
      compat_batch(conn(), batch);
      ADD_FAILURE() << "batch accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.sqlstate(), "22023") << e.what();
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(rows_written(), before);
}

TEST_F(InsertJobCompatTest, SqlProducersEnforceTheCppSizeTagAndScheduleLimits) {
  // The limits the C++ producer checks (include/awa/job.hpp) hold for SQL producers too:
  // args <= 1 MiB, metadata <= 64 KiB, <= 32 tags of <= 255 bytes, run_at <= 100 years.
  struct Case {
    const char* name;
    const char* field;
    Json job;
  };
  Json tags33 = Json::array();
  for (int i = 0; i < 33; ++i) tags33.push_back("t" + std::to_string(i));
  const std::vector<Case> cases = {
      {"args over 1 MiB", "args", {{"kind", "k"}, {"args", {{"x", std::string(1 << 20, 'a')}}}}},
      {"metadata over 64 KiB",
       "metadata",
       {{"kind", "k"}, {"metadata", {{"x", std::string(64 << 10, 'm')}}}}},
      {"33 tags", "tags", {{"kind", "k"}, {"tags", tags33}}},
      {"a tag of 256 bytes", "tag", {{"kind", "k"}, {"tags", {std::string(256, 't')}}}},
      {"run_at 200 years ahead", "run_at", {{"kind", "k"}, {"run_at", "2226-01-01T00:00:00Z"}}},
  };
  compat("valid");
  const auto before = rows_written();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Json& j = c.job;
    pg::Params p;
    p.add(j.at("kind").get<std::string>()).add(j.value("args", Json::object()).dump());
    if (j.contains("metadata")) {
      p.add(j["metadata"].dump());
    } else {
      p.null();
    }
    if (j.contains("tags")) {
      std::string lit = "{";
      for (const auto& t : j["tags"]) lit += (lit.size() > 1 ? "," : "") + t.get<std::string>();
      p.add(lit + "}");
    } else {
      p.null();
    }
    if (j.contains("run_at")) {
      p.add(j["run_at"].get<std::string>());
    } else {
      p.null();
    }
    try {
      conn().exec(
          "SELECT insert_job_compat(p_kind => $1, p_args => $2::jsonb, p_queue => 'valid',"
          " p_metadata => $3::jsonb, p_tags => $4::text[], p_run_at => $5::timestamptz)",
          p);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.sqlstate(), "22023") << e.what();
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
    }
    Json bad = j;
    bad["queue"] = "valid";
    try {
      compat_batch(conn(), Json::array({{{"kind", "good"}, {"queue", "valid"}}, bad}));
      ADD_FAILURE() << "batch accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.sqlstate(), "22023") << e.what();
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(rows_written(), before);
}

TEST_F(InsertJobCompatTest, UnkeyedCallsInOneTransactionStickToOneLane) {
  // Guards the placement at commit: unkeyed calls for one (queue, priority) in one
  // transaction share one shard and one contiguous range, in call order, while the rotor
  // still spreads separate transactions over all shards, and a keyed call in the same
  // transaction still follows its key.
  set_shards("sticky", 4);
  std::set<int> per_tx_shards;
  for (int t = 0; t < 4; ++t) {
    SCOPED_TRACE("transaction " + std::to_string(t));
    pg::Transaction tx(conn());
    std::vector<JobId> ids;
    for (int i = 0; i < 10; ++i) ids.push_back(compat("sticky"));
    const std::string key = key_on_shard("k", t, 4);
    const JobId keyed = compat("sticky", key);
    tx.commit();

    const int shard = shard_of(ids[0]);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(shard_of(ids[i]), shard) << "call " << i << " left the sticky lane";
      EXPECT_EQ(lane_seq_of(ids[i]), lane_seq_of(ids[0]) + static_cast<std::int64_t>(i));
    }
    EXPECT_EQ(shard_of(keyed), shard_for_ordering_key(key, 4));
    per_tx_shards.insert(shard);
  }
  EXPECT_EQ(per_tx_shards, (std::set<int>{0, 1, 2, 3}))
      << "successive transactions must rotate over the shards";

  // The batch form's unkeyed rows share one lane too.
  Json batch = Json::array();
  for (int i = 0; i < 200; ++i)
    batch.push_back({{"kind", "b"}, {"queue", "sticky"}, {"args", {{"i", i}}}});
  const auto ids = compat_batch(conn(), batch);
  ASSERT_EQ(ids.size(), 200u);
  std::set<int> batch_shards;
  for (const auto id : ids) batch_shards.insert(shard_of(id));
  EXPECT_EQ(batch_shards.size(), 1u) << "an unkeyed batch was split over shards";
  for (std::size_t i = 1; i < ids.size(); ++i) {
    EXPECT_EQ(lane_seq_of(ids[i]), lane_seq_of(ids[0]) + static_cast<std::int64_t>(i));
  }
}

TEST_F(InsertJobCompatTest, BatchFormReturnsIdsInInputOrder) {
  // Guards the batch form's id mapping across lanes, priorities and scheduled rows.
  set_shards("multi", 4);
  Json batch = Json::array();
  for (int i = 0; i < 30; ++i) {
    Json j = {{"kind", "kind-" + std::to_string(i)},
              {"queue", i % 2 == 0 ? "multi" : "plain"},
              {"priority", 1 + i % 4},
              {"args", {{"pos", i}}}};
    if (i % 3 == 0) j["ordering_key"] = "key-" + std::to_string(i);
    if (i % 5 == 0) j["run_at"] = "2099-01-01T00:00:00Z";
    batch.push_back(j);
  }
  const auto ids = compat_batch(conn(), batch);
  ASSERT_EQ(ids.size(), 30u);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto r = conn().query(
        "SELECT kind, (args->>'pos')::int, priority FROM ready_entries WHERE job_id = $1"
        " UNION ALL SELECT kind, (args->>'pos')::int, priority FROM deferred_jobs"
        " WHERE job_id = $1",
        ids[i]);
    ASSERT_EQ(r.rows(), 1) << i;
    EXPECT_EQ(r.get<std::string>(0, 0), "kind-" + std::to_string(i));
    EXPECT_EQ(r.get<int>(0, 1), static_cast<int>(i));
    EXPECT_EQ(r.get<int>(0, 2), 1 + static_cast<int>(i) % 4);
  }
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 6);
}

TEST_F(InsertJobCompatTest, BatchesWithOppositeLaneOrderDoNotDeadlock) {
  // Guards the sorted lane reservation of the placement at commit: two transactions
  // inserting the same two lanes in opposite input order both commit. The interleaving is
  // pinned so an input-order implementation would certainly deadlock: a gate transaction
  // holds shard 1; T1 (input: shard 1, shard 0) queues on shard 1 first, then T2 (input:
  // shard 0, shard 1) would take shard 0 and queue on shard 1 behind T1; opening the gate
  // would hand shard 1 to T1, which then needs T2's shard 0. Sorted, T1 takes shard 0
  // first and T2 simply waits behind it. (T1 and T2 wait in their commits.)
  set_shards("pair", 2);
  const std::string k0 = key_on_shard("lo-", 0, 2);
  const std::string k1 = key_on_shard("hi-", 1, 2);
  compat("pair", k0);  // both lanes exist and are committed
  compat("pair", k1);

  pg::Connection gate = connect_new();
  pg::Transaction gate_tx(gate);
  gate.exec("SET CONSTRAINTS place_staged_jobs IMMEDIATE");  // placed now, not at commit
  compat(gate, "pair", k1);                                  // holds lane (pair, 2, 1)

  const Json job0 = {{"kind", "t"}, {"queue", "pair"}, {"ordering_key", k0}};
  const Json job1 = {{"kind", "t"}, {"queue", "pair"}, {"ordering_key", k1}};
  pg::Connection c1 = connect_new();
  pg::Connection c2 = connect_new();
  Signal began1, began2, go1, go2;
  // Returns "" on commit, else what went wrong.
  const auto run = [](pg::Connection& c, Json jobs, Signal& began,
                      Signal& go) -> std::function<std::string()> {
    return [&c, &began, &go, jobs = std::move(jobs)]() -> std::string {
      try {
        pg::Transaction tx(c);
        began.open();
        if (!go.wait()) return "never released";
        const auto ids = compat_batch(c, jobs);
        if (ids.size() != 2) return "returned " + std::to_string(ids.size()) + " ids";
        tx.commit();
        return "";
      } catch (const Error& e) {
        return std::string(e.what()) + " (SQLSTATE " + e.sqlstate() + ")";
      }
    };
  };
  BackgroundCall<std::string> t1(c1.backend_pid(), run(c1, Json{job1, job0}, began1, go1));
  BackgroundCall<std::string> t2(c2.backend_pid(), run(c2, Json{job0, job1}, began2, go2));
  ASSERT_TRUE(began1.wait() && began2.wait()) << "both transactions must be open";
  go1.open();
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), c1.backend_pid()); }))
      << "T1 must be waiting before T2 starts";
  go2.open();
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), c2.backend_pid()); }))
      << "T2 must be waiting before the gate opens";

  gate_tx.rollback();
  ASSERT_TRUE(t1.finishes_within(30s));
  ASSERT_TRUE(t2.finishes_within(30s));
  EXPECT_EQ(t1.get(), "");
  EXPECT_EQ(t2.get(), "");
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE kind = 't'"), 4);
}

TEST_F(InsertJobCompatTest, SingleCallsOnTwoLanesInOppositeOrderBothCommit) {
  // Regression: each call used to lock its lane until commit, so two transactions that each
  // made a keyed call to one lane and then one to the other's deadlocked, and PostgreSQL
  // aborted one with 40P01. Staged jobs are placed at commit, every lane in order: both
  // transactions commit, with all four jobs.
  set_shards("pair", 2);
  const std::string k0 = key_on_shard("lo-", 0, 2);
  const std::string k1 = key_on_shard("hi-", 1, 2);
  compat("pair", k0);
  compat("pair", k1);

  pg::Connection c1 = connect_new();
  pg::Connection c2 = connect_new();
  pg::Transaction tx1(c1);
  pg::Transaction tx2(c2);
  // Each holds its first lane before anyone asks for a second one.
  compat(c1, "pair", k0, "t1");
  compat(c2, "pair", k1, "t2");

  struct Outcome {
    bool committed = false;
    std::string sqlstate;
    std::optional<Retry> retry;
    bool rollback_class = false;
  };
  const auto second = [&](pg::Connection& c, pg::Transaction& tx, const std::string& key,
                          const std::string& kind) -> std::function<Outcome()> {
    return [&c, &tx, key, kind] {
      Outcome o;
      try {
        compat(c, "pair", key, kind);
        tx.commit();
        o.committed = true;
      } catch (const TransactionRollback& e) {
        o.rollback_class = true;
        o.sqlstate = e.sqlstate();
        o.retry = e.retry();
        tx.rollback();
      } catch (const Error& e) {
        o.sqlstate = e.sqlstate();
        tx.rollback();
      }
      return o;
    };
  };
  BackgroundCall<Outcome> t1(c1.backend_pid(), second(c1, tx1, k1, "t1"));
  BackgroundCall<Outcome> t2(c2.backend_pid(), second(c2, tx2, k0, "t2"));
  ASSERT_TRUE(t1.finishes_within(30s));
  ASSERT_TRUE(t2.finishes_within(30s));
  const Outcome o1 = t1.get();
  const Outcome o2 = t2.get();

  EXPECT_TRUE(o1.committed) << "SQLSTATE " << o1.sqlstate;
  EXPECT_TRUE(o2.committed) << "SQLSTATE " << o2.sqlstate;
  for (const std::string kind : {"t1", "t2"}) {
    EXPECT_EQ(conn()
                  .query("SELECT count(*) FROM ready_entries WHERE kind = $1", kind)
                  .get<std::int64_t>(0, 0),
              2)
        << kind;
  }
}

TEST_F(InsertJobCompatTest, FutureRunAtIsScheduled) {
  // Guards the SQL scheduled path: a future run_at goes to deferred_jobs ('scheduled'),
  // with no ready row and no lane; a past run_at is ready.
  const auto id = conn()
                      .exec(
                          "SELECT id FROM insert_job_compat('later', 'sched', '{\"x\": 1}',"
                          " 'available', 3, 7, now() + interval '1 hour',"
                          " p_ordering_key => '\\x01'::bytea)")
                      .get<std::int64_t>(0, 0);
  const auto d = conn().query(
      "SELECT reason, queue, priority, max_attempts, run_at > now() + interval '59 minutes',"
      " ordering_key, args->>'x' FROM deferred_jobs WHERE job_id = $1",
      id);
  ASSERT_EQ(d.rows(), 1);
  EXPECT_EQ(d.get<std::string>(0, 0), "scheduled");
  EXPECT_EQ(d.get<std::string>(0, 1), "sched");
  EXPECT_EQ(d.get<int>(0, 2), 3);
  EXPECT_EQ(d.get<int>(0, 3), 7);
  EXPECT_TRUE(d.get<bool>(0, 4));
  EXPECT_EQ(d.get<pg::Bytea>(0, 5).bytes, "\x01");
  EXPECT_EQ(d.get<std::string>(0, 6), "1");
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM queue_enqueue_heads"), 0);

  const auto past = conn()
                        .exec(
                            "SELECT id FROM insert_job_compat('overdue', p_queue => 'sched',"
                            " p_run_at => now() - interval '1 hour')")
                        .get<std::int64_t>(0, 0);
  EXPECT_EQ(shard_of(past), 0);
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 1);
}

TEST_F(InsertJobCompatTest, QueueNameOfTwoHundredCharsCanBeEnqueued) {
  // Guards the SQL side of the documented 1..200-character queue names: the longest valid
  // name must enqueue (NOTIFY channel names are capped at 63 bytes by PostgreSQL).
  for (const std::size_t len : {59u, 60u, 200u}) {
    const std::string queue(len, 'q');
    SCOPED_TRACE("queue of " + std::to_string(len) + " chars");
    try {
      const JobId id = compat(queue);
      EXPECT_EQ(shard_of(id), 0);
    } catch (const Error& e) {
      ADD_FAILURE() << "valid queue name rejected: " << e.what() << " (SQLSTATE " << e.sqlstate()
                    << ")";
    }
  }
}

}  // namespace
}  // namespace awa::testing
