// The producer side (docs/design/engine.md) against a real PostgreSQL: routing, lane reservation,
// visibility order, transactional enqueue, COPY, scheduling, notifications, bad input.
//
// Tests that hold for both enqueue paths run once per path (EnqueueModeTest, parameter
// Insert = insert_many, Copy = insert_many_copy).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <latch>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "producer_support.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

enum class Mode { kInsert, kCopy };

NewJob make_job(std::string kind, const Json& args, std::string queue,
                std::optional<std::string> key = std::nullopt, int priority = 2) {
  InsertOpts o;
  o.queue = std::move(queue);
  o.priority = priority;
  o.ordering_key = std::move(key);
  return NewJob(std::move(kind), args, std::move(o));
}

std::vector<NewJob> unkeyed_batch(const std::string& queue, int n, int tag = 0) {
  std::vector<NewJob> jobs;
  for (int i = 0; i < n; ++i) jobs.push_back(make_job("bulk", {{"tag", tag}, {"i", i}}, queue));
  return jobs;
}

// Keys "<prefix>0", "<prefix>1", ... of which the first lands on shard `want` of `shards`.
std::string key_on_shard(const std::string& prefix, int want, int shards) {
  for (int i = 0;; ++i) {
    std::string k = prefix + std::to_string(i);
    if (shard_for_ordering_key(k, shards) == want) return k;
  }
}

struct LanePos {
  std::string queue;
  int priority = 0;
  int shard = 0;
  std::int64_t lane_seq = 0;
};

class EnqueueTest : public StorageTest {
 protected:
  std::vector<JobId> enqueue(Mode mode, pg::Connection& c, std::span<const NewJob> jobs) {
    return mode == Mode::kCopy ? storage::insert_many_copy(*store_, c, jobs)
                               : storage::insert_many(*store_, c, jobs);
  }

  // Every ready row of `queue`, by job id.
  std::unordered_map<JobId, LanePos> ready_rows(const std::string& queue) {
    std::unordered_map<JobId, LanePos> out;
    const auto r = conn().query(
        "SELECT job_id, queue, priority, enqueue_shard, lane_seq"
        " FROM ready_entries JOIN queue_ids USING (queue_id) WHERE queue = $1",
        queue);
    for (int i = 0; i < r.rows(); ++i) {
      const bool fresh = out.emplace(r.get<std::int64_t>(i, 0),
                                     LanePos{r.get<std::string>(i, 1), r.get<int>(i, 2),
                                             r.get<int>(i, 3), r.get<std::int64_t>(i, 4)})
                             .second;
      EXPECT_TRUE(fresh) << "job " << r.get<std::int64_t>(i, 0) << " has two ready rows";
    }
    return out;
  }

  LanePos ready_row(pg::Connection& c, JobId id) {
    const auto r = c.query(
        "SELECT queue, priority, enqueue_shard, lane_seq FROM ready_entries"
        " JOIN queue_ids USING (queue_id) WHERE job_id = $1",
        id);
    if (r.rows() != 1) {
      ADD_FAILURE() << "job " << id << " has " << r.rows() << " ready rows";
      return {};
    }
    return LanePos{r.get<std::string>(0, 0), r.get<int>(0, 1), r.get<int>(0, 2),
                   r.get<std::int64_t>(0, 3)};
  }
  LanePos ready_row(JobId id) { return ready_row(conn(), id); }

  std::int64_t rows_written() {
    return count(
        "SELECT (SELECT count(*) FROM ready_entries) + (SELECT count(*) FROM deferred_jobs)"
        " + (SELECT count(*) FROM queue_enqueue_heads) + (SELECT count(*) FROM queue_claim_heads)");
  }
};

class EnqueueModeTest : public EnqueueTest, public ::testing::WithParamInterface<Mode> {
 protected:
  std::vector<JobId> enqueue(pg::Connection& c, std::span<const NewJob> jobs) {
    return EnqueueTest::enqueue(GetParam(), c, jobs);
  }
  std::vector<JobId> enqueue(std::span<const NewJob> jobs) { return enqueue(conn(), jobs); }
  JobId enqueue_one(const NewJob& job) { return enqueue(std::span<const NewJob>(&job, 1)).at(0); }
};

INSTANTIATE_TEST_SUITE_P(EnqueueBy, EnqueueModeTest, ::testing::Values(Mode::kInsert, Mode::kCopy),
                         [](const ::testing::TestParamInfo<Mode>& param_info) {
                           return param_info.param == Mode::kCopy ? "Copy" : "Insert";
                         });

// --- routing ------------------------------------------------------------------------------

TEST_P(EnqueueModeTest, OrderingKeyRoutesToStableShard) {
  // Guards AWA's ADR-025 test ordering_key_routes_to_stable_shard: at S = 4 every job lands on the
  // shard its key hashes to, across separate calls, and each key's jobs stay in enqueue
  // order (lane_seq grows in insertion order within the shard).
  set_shards("orders", 4);
  std::vector<std::string> keys;
  std::set<int> expected_shards;
  for (int k = 0; k < 16; ++k) {
    keys.push_back("customer-" + std::to_string(k));
    expected_shards.insert(shard_for_ordering_key(keys.back(), 4));
  }
  ASSERT_EQ(expected_shards.size(), 4u) << "test keys must cover all shards";

  std::vector<std::pair<std::string, JobId>> inserted;  // in insertion order
  for (int round = 0; round < 3; ++round) {
    for (const auto& k : keys) {
      inserted.emplace_back(
          k, enqueue_one(make_job("ship", {{"key", k}, {"round", round}}, "orders", k)));
    }
  }

  const auto rows = ready_rows("orders");
  ASSERT_EQ(rows.size(), 48u);
  std::set<int> hit;
  std::map<int, std::int64_t> last_seq_on_shard;
  std::map<std::string, std::int64_t> last_seq_of_key;
  for (const auto& [key, id] : inserted) {
    const auto& pos = rows.at(id);
    EXPECT_EQ(pos.shard, shard_for_ordering_key(key, 4)) << "key " << key;
    hit.insert(pos.shard);
    auto& last = last_seq_on_shard[pos.shard];
    EXPECT_GT(pos.lane_seq, last) << "shard " << pos.shard << " out of insertion order";
    last = pos.lane_seq;
    auto& last_key = last_seq_of_key[key];
    EXPECT_GT(pos.lane_seq, last_key) << "key " << key << " out of enqueue order";
    last_key = pos.lane_seq;
  }
  EXPECT_EQ(hit, expected_shards);
}

TEST_P(EnqueueModeTest, RotorPutsEachUnkeyedBatchOnOneLaneAndRotatesBetweenBatches) {
  // Guards the rotor's per-batch amortisation: 500 unkeyed rows of one (queue, priority)
  // take one reservation — one shard, one contiguous lane_seq range in input order — and
  // the rotor advances once per batch, so at S = 4 four consecutive batches use four
  // distinct shards and eight use each shard exactly twice.
  set_shards("bulk", 4);
  const auto jobs = unkeyed_batch("bulk", 500);
  const auto before = store_->stats();
  const auto ids = enqueue(jobs);
  const auto after = store_->stats();
  EXPECT_EQ(after.lane_reservations - before.lane_reservations, 1u);

  ASSERT_EQ(ids.size(), 500u);
  const auto rows = ready_rows("bulk");
  ASSERT_EQ(rows.size(), 500u);
  const LanePos first = rows.at(ids[0]);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto& pos = rows.at(ids[i]);
    EXPECT_EQ(pos.shard, first.shard) << "row " << i;
    EXPECT_EQ(pos.lane_seq, first.lane_seq + static_cast<std::int64_t>(i)) << "row " << i;
  }
  EXPECT_EQ(first.lane_seq, 1);

  set_shards("spread", 4);
  std::vector<int> shards;
  for (int b = 0; b < 8; ++b) {
    const auto batch = unkeyed_batch("spread", 10, b);
    std::set<int> in_batch;
    for (const auto id : enqueue(batch)) in_batch.insert(ready_row(id).shard);
    ASSERT_EQ(in_batch.size(), 1u) << "batch " << b << " was split over shards";
    shards.push_back(*in_batch.begin());
  }
  EXPECT_EQ(std::set<int>(shards.begin(), shards.begin() + 4).size(), 4u);
  std::map<int, int> per_shard;
  for (const int s : shards) ++per_shard[s];
  EXPECT_EQ(per_shard, (std::map<int, int>{{0, 2}, {1, 2}, {2, 2}, {3, 2}}));
}

TEST_F(EnqueueTest, OneShardPutsEveryJobOnShardZero) {
  // Guards the S = 1 contract: keys are ignored (but kept), everything is one strict-FIFO
  // lane per (queue, priority) — with no queue_meta row and with an explicit 1.
  set_shards("explicit_one", 1);
  for (const std::string queue : {"implicit_one", "explicit_one"}) {
    SCOPED_TRACE(queue);
    std::vector<JobId> order;
    for (int b = 0; b < 4; ++b) {
      std::vector<NewJob> jobs = unkeyed_batch(queue, 3, b);
      jobs.push_back(make_job("keyed", {{"b", b}}, queue, "key-" + std::to_string(b)));
      jobs.push_back(make_job("keyed", {{"b", b}}, queue, std::string("\xff\0", 2)));
      const auto ids = enqueue(b % 2 == 0 ? Mode::kInsert : Mode::kCopy, conn(), jobs);
      order.insert(order.end(), ids.begin(), ids.end());
    }
    const auto rows = ready_rows(queue);
    ASSERT_EQ(rows.size(), order.size());
    std::int64_t last = 0;
    for (const auto id : order) {
      EXPECT_EQ(rows.at(id).shard, 0);
      EXPECT_EQ(rows.at(id).lane_seq, last + 1) << "S = 1 must be gap-free FIFO here";
      last = rows.at(id).lane_seq;
    }
    EXPECT_EQ(
        conn()
            .query("SELECT count(*) FROM queue_enqueue_heads WHERE queue_id = queue_id_of($1)",
                   queue)
            .get<std::int64_t>(0, 0),
        1);
    EXPECT_EQ(storage::enqueue_shards(*store_, conn(), queue), 1);
  }
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE ordering_key = '\\xff00'::bytea"), 8)
      << "keys are stored even when they do not route";
}

// --- visibility order --------------------------------------------------------------------

TEST_P(EnqueueModeTest, LaterProducerOnSameLaneWaitsAndRolledBackRangeBecomesGap) {
  // Guards the visibility argument (docs/design/engine.md), in both write paths (the COPY path
  // reserves in a script of its own, so its lock must be held to the commit just the same):
  // while producer A's reservation on a lane is uncommitted, producer B on the same lane cannot
  // reserve (it waits on the lane's advisory lock); when A rolls back, B proceeds and A's range
  // stays a permanent gap below B's rows.
  const std::string q = "fifo";
  storage::insert_many(*store_, conn(), unkeyed_batch(q, 1));  // the lane exists and is committed

  pg::Connection a = connect_new();
  pg::Connection b = connect_new();
  pg::Transaction tx(a);
  // A's jobs are placed at the end of its statement instead of at its commit, so A holds
  // the lane from its call to its commit: the window in which the lane lock must hold.
  a.exec("SET CONSTRAINTS place_staged_jobs IMMEDIATE");
  const auto a_ids = enqueue(a, unkeyed_batch(q, 3, 1));
  std::vector<std::int64_t> a_seqs;
  for (const auto id : a_ids) a_seqs.push_back(ready_row(a, id).lane_seq);
  ASSERT_EQ(a_seqs, (std::vector<std::int64_t>{2, 3, 4}));

  const auto b_jobs = unkeyed_batch(q, 2, 2);
  const int b_pid = b.backend_pid();
  BackgroundCall<std::vector<JobId>> b_call(b_pid, [&] { return enqueue(b, b_jobs); });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), b_pid); }))
      << "B never waited for the lane lock";
  EXPECT_FALSE(b_call.finishes_within(0ms)) << "B reserved while A's range was uncommitted";

  tx.rollback();
  ASSERT_TRUE(b_call.finishes_within(10s)) << "B still blocked after A rolled back";
  const auto b_ids = b_call.get();

  const auto rows = ready_rows(q);
  EXPECT_EQ(rows.size(), 3u) << "A's rows must be gone";
  for (const auto id : a_ids) EXPECT_EQ(rows.count(id), 0u);
  ASSERT_EQ(b_ids.size(), 2u);
  EXPECT_EQ(rows.at(b_ids[0]).lane_seq, 5) << "B must follow A's reserved range 2..4";
  EXPECT_EQ(rows.at(b_ids[1]).lane_seq, 6);
  const auto seqs = conn().exec(
      "SELECT array_agg(lane_seq ORDER BY lane_seq)::text FROM "
      "ready_entries WHERE queue_id = queue_id_of('fifo')");
  EXPECT_EQ(seqs.text(0, 0), "{1,5,6}") << "2..4 must remain a permanent gap";
}

TEST_P(EnqueueModeTest, LaterProducerOnSameLaneFollowsCommittedEarlierProducer) {
  // Guards commit order = lane order (both write paths): B waits for A, and after A commits B's
  // rows come directly after A's.
  const std::string q = "fifo_commit";
  storage::insert_many(*store_, conn(), unkeyed_batch(q, 1));
  pg::Connection a = connect_new();
  pg::Connection b = connect_new();
  pg::Transaction tx(a);
  a.exec("SET CONSTRAINTS place_staged_jobs IMMEDIATE");  // A holds the lane until commit
  const auto a_ids = enqueue(a, unkeyed_batch(q, 2, 1));
  const auto b_jobs = unkeyed_batch(q, 1, 2);
  const int b_pid = b.backend_pid();
  BackgroundCall<std::vector<JobId>> b_call(b_pid, [&] { return enqueue(b, b_jobs); });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), b_pid); }));
  tx.commit();
  ASSERT_TRUE(b_call.finishes_within(10s));
  const auto b_ids = b_call.get();
  EXPECT_EQ(ready_row(a_ids[0]).lane_seq, 2);
  EXPECT_EQ(ready_row(a_ids[1]).lane_seq, 3);
  EXPECT_EQ(ready_row(b_ids[0]).lane_seq, 4);
}

TEST_F(EnqueueTest, ProducerOnAnotherShardDoesNotWait) {
  // Guards the point of sharding: an open producer transaction on one shard does not block
  // a producer on another shard of the same (queue, priority).
  set_shards("split", 2);
  const std::string key_a = key_on_shard("a-", 0, 2);
  const std::string key_b = key_on_shard("b-", 1, 2);

  pg::Connection a = connect_new();
  pg::Connection b = connect_new();
  pg::Transaction tx(a);
  const auto a_ids =
      storage::insert_many(*store_, a, std::vector<NewJob>{make_job("x", {}, "split", key_a)});
  const std::vector<NewJob> b_jobs{make_job("x", {}, "split", key_b)};
  BackgroundCall<std::vector<JobId>> b_call(
      b.backend_pid(), [&] { return storage::insert_many(*store_, b, b_jobs); });
  ASSERT_TRUE(b_call.finishes_within(10s)) << "B waited for A on another shard";
  const auto b_ids = b_call.get();
  EXPECT_TRUE(a.in_transaction()) << "A's transaction must still be open";

  auto rows = ready_rows("split");
  EXPECT_EQ(rows.size(), 1u) << "only B's committed row is visible";
  EXPECT_EQ(rows.at(b_ids[0]).shard, 1);
  tx.commit();
  rows = ready_rows("split");
  EXPECT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows.at(a_ids[0]).shard, 0);
}

// --- concurrency -------------------------------------------------------------------------

TEST_P(EnqueueModeTest, CreatingALaneNeverDeadlocksWithAReservationInLaneOrder) {
  // Regression (issue 10, defect 2): the C++ producer used to create all its new lanes
  // (taking their creation locks) before its first lane lock, while reserve_lane_range
  // (insert_jobs_compat, promotion) takes a lane lock and then the next lane's creation
  // lock. Producer B holds lane 0 and creates lane 1; producer A enqueues to lanes 0 and
  // 1 (new). Before the fix A held lane 1's creation lock while waiting for lane 0, B
  // waited for that creation lock, and the server killed one of them with 40P01.
  set_shards("dl", 2);
  const std::string key0 = key_on_shard("z-", 0, 2);
  const std::string key1 = key_on_shard("o-", 1, 2);
  enqueue_one(make_job("x", {}, "dl", key0));  // lane 0 exists and is committed

  pg::Connection a = connect_new();
  pg::Connection b = connect_new();
  pg::Transaction tx(b);
  b.exec("SELECT * FROM reserve_lane_range('dl', 2, 0, 1)");  // B holds lane 0
  const std::vector<NewJob> a_jobs{make_job("x", {}, "dl", key0), make_job("x", {}, "dl", key1)};
  const int a_pid = a.backend_pid();
  BackgroundCall<std::vector<JobId>> a_call(a_pid, [&] { return enqueue(a, a_jobs); });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), a_pid); }))
      << "A never waited for lane 0";
  // B goes on to lane 1, which A's pending enqueue will also need.
  try {
    b.exec("SELECT * FROM reserve_lane_range('dl', 2, 1, 1)");
  } catch (const Error& e) {
    ADD_FAILURE() << "B failed creating lane 1: " << e.what() << " [" << e.sqlstate() << "]";
  }
  tx.commit();
  ASSERT_TRUE(a_call.finishes_within(10s)) << "A still blocked after B committed";
  std::vector<JobId> a_ids;
  try {
    a_ids = a_call.get();
  } catch (const Error& e) {
    FAIL() << "A failed: " << e.what() << " [" << e.sqlstate() << "]";
  }
  const auto rows = ready_rows("dl");
  ASSERT_EQ(a_ids.size(), 2u);
  EXPECT_EQ(rows.at(a_ids[0]).shard, 0);
  EXPECT_EQ(rows.at(a_ids[1]).shard, 1);
}

TEST_F(EnqueueTest, ConcurrentProducersLoseNothingAndKeepLaneSeqsUnique) {
  // Guards the reservation under contention: 16 producers × 2,000 jobs on one queue at
  // S = 4 — no lost or duplicated job, (shard, lane_seq) unique, each batch one contiguous
  // range on one shard, lanes gap-free, and queue_shard_lag's enqueue cursor exact.
  constexpr int kProducers = 16;
  constexpr int kBatches = 20;
  constexpr int kBatchSize = 100;
  constexpr int kTotal = kProducers * kBatches * kBatchSize;
  set_shards("hot", 4);

  std::vector<pg::Connection> conns;
  for (int p = 0; p < kProducers; ++p) conns.push_back(connect_new());
  // ids[p][b] = the ids producer p was given for batch b
  std::vector<std::vector<std::vector<JobId>>> ids(static_cast<std::size_t>(kProducers));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(kProducers));
  const auto before = store_->stats();
  std::latch start(kProducers);
  {
    std::vector<std::jthread> threads;
    for (int p = 0; p < kProducers; ++p) {
      threads.emplace_back([&, p] {
        const auto up = static_cast<std::size_t>(p);
        start.arrive_and_wait();
        try {
          for (int b = 0; b < kBatches; ++b) {
            std::vector<NewJob> jobs;
            for (int i = 0; i < kBatchSize; ++i) {
              jobs.push_back(make_job("load", {{"p", p}, {"b", b}, {"i", i}}, "hot"));
            }
            ids[up].push_back(storage::insert_many(*store_, conns[up], jobs));
          }
        } catch (...) {
          errors[up] = std::current_exception();
        }
      });
    }
  }
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      FAIL() << "producer failed: " << ex.what();
    }
  }
  EXPECT_EQ(store_->stats().lane_reservations - before.lane_reservations,
            static_cast<std::uint64_t>(kProducers * kBatches));

  struct Row {
    int shard;
    std::int64_t seq;
    int p, b, i;
  };
  std::unordered_map<JobId, Row> rows;
  const auto r = conn().exec(
      "SELECT job_id, enqueue_shard, lane_seq, (args->>'p')::int, (args->>'b')::int,"
      " (args->>'i')::int FROM ready_entries WHERE queue_id = queue_id_of('hot')");
  ASSERT_EQ(r.rows(), kTotal);
  std::set<std::pair<int, std::int64_t>> lane_keys;
  std::map<int, std::pair<std::int64_t, std::int64_t>> per_shard;  // shard -> (count, max)
  for (int i = 0; i < r.rows(); ++i) {
    const Row row{r.get<int>(i, 1), r.get<std::int64_t>(i, 2), r.get<int>(i, 3), r.get<int>(i, 4),
                  r.get<int>(i, 5)};
    EXPECT_TRUE(rows.emplace(r.get<std::int64_t>(i, 0), row).second) << "duplicate job id";
    EXPECT_TRUE(lane_keys.emplace(row.shard, row.seq).second)
        << "duplicate lane_seq " << row.seq << " on shard " << row.shard;
    auto& s = per_shard[row.shard];
    ++s.first;
    s.second = std::max(s.second, row.seq);
  }
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(kTotal));

  std::unordered_set<JobId> returned;
  for (int p = 0; p < kProducers; ++p) {
    const auto& mine = ids[static_cast<std::size_t>(p)];
    ASSERT_EQ(mine.size(), static_cast<std::size_t>(kBatches));
    for (int b = 0; b < kBatches; ++b) {
      const auto& batch = mine[static_cast<std::size_t>(b)];
      ASSERT_EQ(batch.size(), static_cast<std::size_t>(kBatchSize));
      const auto first = rows.find(batch[0]);
      ASSERT_NE(first, rows.end()) << "returned id " << batch[0] << " is not in the table";
      for (int i = 0; i < kBatchSize; ++i) {
        const JobId id = batch[static_cast<std::size_t>(i)];
        EXPECT_TRUE(returned.insert(id).second) << "id " << id << " returned twice";
        const auto it = rows.find(id);
        ASSERT_NE(it, rows.end()) << "returned id " << id << " is not in the table";
        const Row& row = it->second;
        EXPECT_EQ(std::tie(row.p, row.b, row.i), std::tie(p, b, i)) << "id " << id;
        EXPECT_EQ(row.shard, first->second.shard) << "batch split over shards";
        EXPECT_EQ(row.seq, first->second.seq + i) << "batch range not contiguous";
      }
    }
  }
  EXPECT_EQ(returned.size(), static_cast<std::size_t>(kTotal));

  ASSERT_EQ(per_shard.size(), 4u) << "every shard must get rows";
  std::int64_t sum = 0;
  for (const auto& [shard, s] : per_shard) {
    EXPECT_EQ(s.first, s.second) << "shard " << shard << " has gaps (no producer rolled back)";
    sum += s.first;
  }
  EXPECT_EQ(sum, kTotal);

  const auto lag = conn().exec(
      "SELECT priority, enqueue_shard, enqueue_cursor, claim_cursor, available"
      " FROM queue_shard_lag('hot')");
  ASSERT_EQ(lag.rows(), 4);
  for (int i = 0; i < lag.rows(); ++i) {
    const int shard = lag.get<int>(i, 1);
    SCOPED_TRACE("shard " + std::to_string(shard));
    EXPECT_EQ(lag.get<int>(i, 0), 2);
    EXPECT_EQ(lag.get<std::int64_t>(i, 2) - 1, per_shard.at(shard).second);
    EXPECT_EQ(lag.get<std::int64_t>(i, 3), 1);
    EXPECT_EQ(lag.get<std::int64_t>(i, 4), per_shard.at(shard).first);
  }
}

// --- the lane cache ----------------------------------------------------------------------

TEST_P(EnqueueModeTest, CachedLaneThatNoLongerExistsIsRepaired) {
  // Guards the lane cache's self-repair (docs/design/engine.md, "Reserving a lane range"):
  // a lane the store has cached but that no longer exists is recreated by the next insert
  // instead of failing. (Calls inside a caller's transaction reserve no lane and cache
  // none, so a rolled-back transaction no longer leaves a cached lane behind; a lane
  // removed by hand still can.)
  {
    enqueue(unkeyed_batch("fresh", 2, 9));  // creates and caches the lane
    conn().exec("DELETE FROM ready_entries WHERE queue_id = queue_id_of('fresh')");
    conn().exec("DELETE FROM queue_claim_heads WHERE queue_id = queue_id_of('fresh')");
    conn().exec("DELETE FROM queue_enqueue_heads WHERE queue_id = queue_id_of('fresh')");
  }
  EXPECT_EQ(count("SELECT count(*) FROM queue_enqueue_heads WHERE queue_id = queue_id_of('fresh')"),
            0);
  EXPECT_EQ(count("SELECT count(*) FROM queue_claim_heads WHERE queue_id = queue_id_of('fresh')"),
            0);

  const auto before = store_->stats();
  const auto ids = enqueue(unkeyed_batch("fresh", 2, 1));
  const auto after = store_->stats();
  EXPECT_EQ(after.lane_repairs - before.lane_repairs, 1u);
  EXPECT_EQ(after.lane_creations, before.lane_creations) << "the lane was served from the cache";

  pg::Connection other = connect_new();
  EXPECT_EQ(ready_row(other, ids[0]).lane_seq, 1);
  EXPECT_EQ(ready_row(other, ids[1]).lane_seq, 2);
  EXPECT_EQ(count("SELECT count(*) FROM queue_enqueue_heads WHERE queue_id = queue_id_of('fresh')"),
            1);
  EXPECT_EQ(count("SELECT count(*) FROM queue_claim_heads WHERE queue_id = queue_id_of('fresh')"),
            1);

  enqueue(unkeyed_batch("fresh", 1, 2));
  EXPECT_EQ(store_->stats().lane_repairs, after.lane_repairs) << "a healthy lane is no repair";
}

TEST_F(EnqueueTest, ResetPicksUpAChangedShardCount) {
  // Guards the shard-count cache contract (StorageOptions::shard_count_ttl): a changed
  // enqueue_shards is not seen until reset() or the end of the cache's time to live (stale
  // but correct), and is seen right after it.
  QueueStorage store(StorageOptions{schema_, std::chrono::hours(1)});
  storage::insert_many(store, conn(), unkeyed_batch("grow", 1));
  set_shards("grow", 4);
  std::set<int> stale;
  for (int b = 0; b < 8; ++b) {
    for (const auto id : storage::insert_many(store, conn(), unkeyed_batch("grow", 2, b))) {
      stale.insert(ready_row(id).shard);
    }
  }
  EXPECT_EQ(stale, std::set<int>{0}) << "the cached S = 1 must still apply";
  EXPECT_EQ(storage::enqueue_shards(store, conn(), "grow"), 1);

  store.reset();
  EXPECT_EQ(storage::enqueue_shards(store, conn(), "grow"), 4);
  std::set<int> fresh;
  for (int b = 0; b < 8; ++b) {
    for (const auto id : storage::insert_many(store, conn(), unkeyed_batch("grow", 2, 10 + b))) {
      fresh.insert(ready_row(id).shard);
    }
  }
  EXPECT_EQ(fresh, (std::set<int>{0, 1, 2, 3}));
}

TEST_F(EnqueueTest, AChangedShardCountIsSeenWithinTheCacheTimeToLive) {
  // Regression: a store kept the shard count it read first until reset() or a restart, so
  // producers that started before a set-shards routed keyed jobs with the old count for
  // good, and per-key order broke between them and newer producers. Now the count is read
  // again once StorageOptions::shard_count_ttl has passed.
  constexpr auto kTtl = std::chrono::milliseconds(300);
  QueueStorage store(StorageOptions{schema_, kTtl});
  const std::string key = key_on_shard("ttl-", 3, 4);
  set_shards("reshard", 4);
  const auto before =
      storage::insert_many(store, conn(), std::vector<NewJob>{make_job("x", {}, "reshard", key)});
  EXPECT_EQ(ready_row(before[0]).shard, 3);
  set_shards("reshard", 2);
  const auto changed = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(kTtl);  // the documented bound, then the new count must apply
  const auto after =
      storage::insert_many(store, conn(), std::vector<NewJob>{make_job("x", {}, "reshard", key)});
  EXPECT_EQ(ready_row(after[0]).shard, shard_for_ordering_key(key, 2))
      << "the new shard count was not seen "
      << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               changed)
             .count()
      << " ms after the change";
  EXPECT_EQ(storage::enqueue_shards(store, conn(), "reshard"), 2);
}

TEST_F(EnqueueTest, ShardCountOutsideOneToSixtyFourViolatesCheckConstraint) {
  // Guards the queue_meta CHECK (1..64) through the plain upsert of docs/operations.md, and
  // that both ends of the range work.
  for (const int bad : {0, 65}) {
    try {
      set_shards("checked", bad);
      ADD_FAILURE() << "enqueue_shards = " << bad << " was accepted";
    } catch (const ConstraintViolation& e) {
      EXPECT_EQ(e.sqlstate(), "23514") << e.what();
      EXPECT_EQ(e.retry(), Retry::kDoNotRetry);
    }
  }
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta WHERE queue = 'checked'"), 0);
  set_shards("checked", 64);
  EXPECT_EQ(count("SELECT enqueue_shards FROM queue_meta WHERE queue = 'checked'"), 64);

  // The whole range is usable: a key hashing to shard 63 lands there (the heads' CHECK
  // allows 0..63), and shard 0 works too.
  const std::string k63 = key_on_shard("wide-", 63, 64);
  const std::string k0 = key_on_shard("wide-", 0, 64);
  const auto ids = storage::insert_many(
      *store_, conn(),
      std::vector<NewJob>{make_job("w", {}, "checked", k63), make_job("w", {}, "checked", k0)});
  EXPECT_EQ(ready_row(ids[0]).shard, 63);
  EXPECT_EQ(ready_row(ids[1]).shard, 0);

  set_shards("checked", 1);
  EXPECT_EQ(count("SELECT enqueue_shards FROM queue_meta WHERE queue = 'checked'"), 1);
}

// --- transactional enqueue ---------------------------------------------------------------

TEST_P(EnqueueModeTest, CallerTransactionRollbackLeavesNothingBehind) {
  // Guards transactional enqueue through the public awa::Connection: ready,
  // scheduled, lane heads — all of it vanishes with the caller's rollback.
  Connection app = Connection::connect(database_url());
  std::vector<NewJob> jobs = unkeyed_batch("txq", 3);
  jobs.push_back(make_job("keyed", {}, "txq2", "k"));
  NewJob later = make_job("later", {}, "txq");
  later.opts.run_at = std::chrono::system_clock::now() + 1h;
  jobs.push_back(later);
  {
    Transaction tx(app);
    const auto ids = enqueue(pg::native(app), jobs);
    EXPECT_EQ(ids.size(), jobs.size());
    EXPECT_TRUE(app.in_transaction());
    tx.rollback();
  }
  EXPECT_EQ(rows_written(), 0);
  {
    Transaction tx(app);
    enqueue(pg::native(app), jobs);
    // destroyed without commit: rolls back
  }
  EXPECT_EQ(rows_written(), 0);
  EXPECT_FALSE(app.in_transaction());
}

// Regression (issue 10, defect 5): awa::Transaction::commit() used to report success when
// the server answered COMMIT with ROLLBACK (an earlier error had aborted the transaction
// and the caller swallowed it), although nothing was stored.
TEST_F(EnqueueTest, CommitOfAnAbortedTransactionThrowsAndStoresNothing) {
  Connection app = Connection::connect(database_url());
  Transaction tx(app);
  store_->insert(app, make_job("lost", {}, "txq"));
  EXPECT_THROW(app.execute("SELECT 1/0"), Error);  // swallowed by a careless caller
  try {
    tx.commit();
    ADD_FAILURE() << "commit() of an aborted transaction returned normally";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "25P02");
    EXPECT_NE(std::string(e.what()).find("nothing was stored"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(app.in_transaction());
  EXPECT_EQ(rows_written(), 0);
}

TEST_F(EnqueueTest, CallerTransactionCommitMakesJobsVisible) {
  // Guards transactional enqueue: invisible to others until the caller commits, then all
  // visible together with the caller's own writes.
  Connection app = Connection::connect(database_url());
  conn().exec("CREATE TABLE orders (id int PRIMARY KEY, state text)");
  const std::string orders = quoted_schema() + ".orders";
  std::vector<JobId> ids;
  {
    Transaction tx(app);
    app.execute("INSERT INTO " + orders + " VALUES (42, 'paid')");
    ids = store_->insert_many(app, unkeyed_batch("txq", 1));
    ids.push_back(store_->insert_many_copy(app, unkeyed_batch("txq", 1, 1)).at(0));
    ids.push_back(store_->insert(app, make_job("send_receipt", {{"order", 42}}, "txq")));
    EXPECT_EQ(count("SELECT count(*) FROM ready_entries"), 0) << "visible before commit";
    tx.commit();
  }
  EXPECT_EQ(count("SELECT count(*) FROM orders"), 1);
  const auto rows = ready_rows("txq");
  EXPECT_EQ(rows.size(), 3u);
  EXPECT_EQ(ids.size(), 3u);
  for (const auto id : ids) EXPECT_EQ(rows.count(id), 1u) << id;
}

// --- values round-trip -------------------------------------------------------------------

TEST_P(EnqueueModeTest, AwkwardValuesRoundTripExactly) {
  // Guards the encoders (array literals, COPY text escaping, bytea hex): kinds, args,
  // tags, metadata and binary ordering keys with quotes, backslashes, tabs, newlines,
  // braces, "NULL", NUL/0xFF bytes and non-ASCII text come back byte for byte — on the
  // ready path and the scheduled path.
  set_shards("odd", 4);
  const std::string awkward =
      "q\"uote 'single' back\\slash \\N tab\there new\nline cr\r "
      "{brace,comma} \xc3\xbcnic\xc3\xb6"
      "de \xf0\x9f\x98\x80";
  const std::vector<std::string> tags = {"plain",
                                         "with,comma",
                                         "{brace}",
                                         "quo\"te",
                                         "back\\slash",
                                         "tab\tx",
                                         "new\nline",
                                         "NULL",
                                         "",
                                         " spaced ",
                                         "\xc3\xbc\xf0\x9f\x98\x80",
                                         "\\N"};
  const Json meta = {{"note", awkward}, {"nested", {{"list", {1, "two", nullptr}}}}};
  const std::vector<std::optional<std::string>> keys = {std::string("\0\xff\\,\"{}\n\t x", 11),
                                                        std::nullopt, std::string("\xc3\xbc"),
                                                        std::string(256, '\0'), std::string()};

  std::vector<NewJob> jobs;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    NewJob j = NewJob::from_text(
        "kind " + awkward,
        R"({"q":"it's \"quoted\"","b":"back\\slash \\N","t":"tab\there","n":"new\nline\r\n",)"
        R"("u":"\u00fc \u00e9 )"
        "\xf0\x9f\x98\x80"
        R"(","arr":[1,2.5,null,true,"{a,b}"],"i":)" +
            std::to_string(i) + "}");
    j.opts.queue = "odd";
    j.opts.ordering_key = keys[i];
    if (i != 1) {
      j.opts.tags = tags;
      j.opts.metadata = meta;
    }
    jobs.push_back(j);
  }
  NewJob scheduled = jobs[0];
  scheduled.opts.run_at = std::chrono::system_clock::now() + 1h;
  jobs.push_back(scheduled);

  const auto ids = enqueue(jobs);
  ASSERT_EQ(ids.size(), jobs.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    SCOPED_TRACE("job " + std::to_string(i));
    const auto r = conn().query(
        "SELECT kind, args::text, ordering_key, metadata::text, array_to_json(tags)::text,"
        " 'ready' FROM ready_entries WHERE job_id = $1"
        " UNION ALL SELECT kind, args::text, ordering_key, metadata::text,"
        " array_to_json(tags)::text, 'deferred' FROM deferred_jobs WHERE job_id = $1",
        ids[i]);
    ASSERT_EQ(r.rows(), 1);
    const NewJob& j = jobs[i];
    EXPECT_EQ(r.get<std::string>(0, 5), i + 1 == jobs.size() ? "deferred" : "ready");
    EXPECT_EQ(r.get<std::string>(0, 0), j.kind);
    EXPECT_EQ(Json::parse(r.get<std::string>(0, 1)), Json::parse(j.args_json));
    EXPECT_EQ(r.get_opt<pg::Bytea>(0, 2).has_value(), j.opts.ordering_key.has_value());
    if (j.opts.ordering_key) {
      EXPECT_EQ(r.get<pg::Bytea>(0, 2).bytes, *j.opts.ordering_key);
    }
    if (j.opts.metadata.is_null()) {
      EXPECT_TRUE(r.is_null(0, 3));
    } else {
      EXPECT_EQ(Json::parse(r.get<std::string>(0, 3)), j.opts.metadata);
    }
    if (j.opts.tags.empty()) {
      EXPECT_TRUE(r.is_null(0, 4));
    } else {
      EXPECT_EQ(Json::parse(r.get<std::string>(0, 4)).get<std::vector<std::string>>(), j.opts.tags);
    }
  }
  // Routing used the exact key bytes.
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i]) {
      EXPECT_EQ(ready_row(ids[i]).shard, shard_for_ordering_key(*keys[i], 4)) << i;
    }
  }
  // Byte-exact args text for a key order jsonb keeps: what the producer sent is stored.
  const auto exact = conn().query("SELECT args = $1::jsonb FROM ready_entries WHERE job_id = $2",
                                  jobs[0].args_json, ids[0]);
  EXPECT_TRUE(exact.get<bool>(0, 0));
}

TEST_P(EnqueueModeTest, IdsComeBackInInputOrderForMixedBatches) {
  // Guards the id mapping across lanes: a batch spanning queues, priorities, shards, keys
  // and scheduled rows returns each job's id at that job's input position.
  set_shards("alpha", 4);
  set_shards("beta", 2);
  std::vector<NewJob> jobs;
  for (int i = 0; i < 60; ++i) {
    const std::string queue = i % 3 == 0 ? "beta" : (i % 3 == 1 ? "alpha" : "gamma");
    std::optional<std::string> key;
    if (i % 4 == 1) key = "key-" + std::to_string(i % 7);
    NewJob j = make_job("kind-" + std::to_string(i), {{"pos", i}}, queue, key, 1 + (i * 7) % 4);
    if (i % 5 == 2) j.opts.run_at = std::chrono::system_clock::now() + 1h;
    if (i % 11 == 3) j.opts.run_at = std::chrono::system_clock::now() - 1h;
    jobs.push_back(j);
  }
  const auto ids = enqueue(jobs);
  ASSERT_EQ(ids.size(), jobs.size());
  EXPECT_EQ(std::set<JobId>(ids.begin(), ids.end()).size(), ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto r = conn().query(
        "SELECT kind, (args->>'pos')::int, queue, priority, 'ready' FROM ready_entries"
        " JOIN queue_ids USING (queue_id) WHERE job_id = $1 UNION ALL SELECT kind, "
        "(args->>'pos')::int, queue, priority,"
        " 'deferred' FROM deferred_jobs WHERE job_id = $1",
        ids[i]);
    ASSERT_EQ(r.rows(), 1) << "position " << i;
    EXPECT_EQ(r.get<std::string>(0, 0), jobs[i].kind);
    EXPECT_EQ(r.get<int>(0, 1), static_cast<int>(i));
    EXPECT_EQ(r.get<std::string>(0, 2), jobs[i].opts.queue);
    EXPECT_EQ(r.get<int>(0, 3), jobs[i].opts.priority);
    const bool scheduled =
        jobs[i].opts.run_at && *jobs[i].opts.run_at > std::chrono::system_clock::now();
    EXPECT_EQ(r.get<std::string>(0, 4), scheduled ? "deferred" : "ready") << "position " << i;
  }
}

// --- scheduled jobs ----------------------------------------------------------------------

TEST_P(EnqueueModeTest, FutureRunAtIsScheduledWithoutALane) {
  // Guards scheduling: a future run_at goes to deferred_jobs ('scheduled') with
  // its time intact, creates no ready row and no lane; a past run_at is ready at once.
  const auto future =
      std::chrono::floor<std::chrono::microseconds>(std::chrono::system_clock::now() + 1h);
  const auto past =
      std::chrono::floor<std::chrono::microseconds>(std::chrono::system_clock::now() - 1h);
  NewJob later = make_job("later", {{"x", 1}}, "sched", "k", 3);
  later.opts.run_at = future;
  later.opts.max_attempts = 7;
  const JobId later_id = enqueue_one(later);

  const auto d = conn().query(
      "SELECT reason, queue, priority, kind, run_at, max_attempts, attempt, ordering_key"
      " FROM deferred_jobs WHERE job_id = $1",
      later_id);
  ASSERT_EQ(d.rows(), 1);
  EXPECT_EQ(d.get<std::string>(0, 0), "scheduled");
  EXPECT_EQ(d.get<std::string>(0, 1), "sched");
  EXPECT_EQ(d.get<int>(0, 2), 3);
  EXPECT_EQ(d.get<std::string>(0, 3), "later");
  EXPECT_EQ(d.get<std::chrono::system_clock::time_point>(0, 4), future);
  EXPECT_EQ(d.get<int>(0, 5), 7);
  EXPECT_EQ(d.get<int>(0, 6), 0);
  EXPECT_EQ(d.get<pg::Bytea>(0, 7).bytes, "k");
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM queue_enqueue_heads"), 0) << "no lane for scheduled jobs";
  EXPECT_EQ(count("SELECT count(*) FROM queue_claim_heads"), 0);

  NewJob overdue = make_job("overdue", {}, "sched");
  overdue.opts.run_at = past;
  const JobId overdue_id = enqueue_one(overdue);
  const auto r = conn().query("SELECT run_at FROM ready_entries WHERE job_id = $1", overdue_id);
  ASSERT_EQ(r.rows(), 1);
  EXPECT_EQ(r.get<std::chrono::system_clock::time_point>(0, 0), past);
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 1);
}

// --- notifications -----------------------------------------------------------------------

TEST_P(EnqueueModeTest, CommittedEnqueueNotifiesQueueChannelAndRollbackDoesNot) {
  // Guards the wake-up: "awa:<queue>" is notified once for a committed enqueue, never for
  // a rolled-back one, and not for jobs that are only scheduled.
  // Channels are per database, not per schema: a queue name unique to this test keeps
  // tests running in parallel from waking each other.
  const std::string queue = schema_;
  const std::string channel = notify_channel(queue);
  conn().listen(channel);
  pg::Connection producer = connect_new();

  {
    pg::Transaction tx(producer);
    enqueue(producer, unkeyed_batch(queue, 3));
    tx.rollback();
  }
  EXPECT_FALSE(conn().wait_notification(300ms).has_value()) << "rollback must not notify";

  NewJob later = make_job("later", {}, queue);
  later.opts.run_at = std::chrono::system_clock::now() + 1h;
  enqueue(producer, std::vector<NewJob>{later});
  EXPECT_FALSE(conn().wait_notification(300ms).has_value()) << "nothing runnable yet";

  enqueue(producer, unkeyed_batch(queue, 3, 1));
  const auto n = conn().wait_notification(5s);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->channel, channel);
  EXPECT_EQ(n->backend_pid, producer.backend_pid());
  EXPECT_FALSE(conn().wait_notification(100ms).has_value()) << "one notification per queue";
}

TEST_P(EnqueueModeTest, EnqueueToALongQueueNameNotifiesItsHashedChannel) {
  // Guards the channel of a queue name past 59 bytes: "awa:#<hash>" (notify_channel), which
  // the producer computes and a listener on that queue listens to.
  const std::string queue = schema_ + std::string(80, 'q');
  const std::string channel = notify_channel(queue);
  ASSERT_EQ(channel.rfind("awa:#", 0), 0u) << channel;
  conn().listen(channel);
  pg::Connection producer = connect_new();
  enqueue(producer, unkeyed_batch(queue, 2));
  const auto n = conn().wait_notification(5s);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->channel, channel);
  EXPECT_EQ(n->backend_pid, producer.backend_pid());
}

// --- bad input ---------------------------------------------------------------------------

struct BadCase {
  const char* name;
  const char* field;  // the message must mention it
  NewJob job;
};

std::vector<BadCase> bad_cases() {
  const auto base = [] { return make_job("good", {{"ok", true}}, "valid"); };
  std::vector<BadCase> cases;
  const auto add = [&](const char* name, const char* field, auto mutate) {
    NewJob j = base();
    mutate(j);
    cases.push_back(BadCase{name, field, std::move(j)});
  };
  add("priority 0", "priority", [](NewJob& j) { j.opts.priority = 0; });
  add("priority 5", "priority", [](NewJob& j) { j.opts.priority = 5; });
  add("max_attempts 0", "max_attempts", [](NewJob& j) { j.opts.max_attempts = 0; });
  add("max_attempts 1001", "max_attempts", [](NewJob& j) { j.opts.max_attempts = 1001; });
  add("empty kind", "kind must be", [](NewJob& j) { j.kind.clear(); });
  add("kind of 201 bytes", "kind must be", [](NewJob& j) { j.kind.assign(201, 'k'); });
  add("empty queue", "queue name", [](NewJob& j) { j.opts.queue.clear(); });
  add("queue with a space", "queue name", [](NewJob& j) { j.opts.queue = "my queue"; });
  add("queue of 201 chars", "queue name", [](NewJob& j) { j.opts.queue.assign(201, 'q'); });
  add("invalid JSON args", "JSON", [](NewJob& j) { j.args_json = "{"; });
  add("ordering key of 257 bytes", "ordering_key",
      [](NewJob& j) { j.opts.ordering_key = std::string(257, 'k'); });
  return cases;
}

TEST_F(EnqueueTest, BadInputIsRejectedAndNothingIsWritten) {
  // Guards "bad input gets a clear error and changes nothing": each bad job —
  // alone, hidden among good ones, or scheduled — fails the whole call (insert_many and
  // insert_many_copy) with InvalidArgument (22023) naming the field, and no row, lane or
  // head is written. Validation happens before anything is sent, so a caller's open
  // transaction survives the rejection.
  set_shards("valid", 4);
  const auto before = rows_written();
  for (const Mode mode : {Mode::kInsert, Mode::kCopy}) {
    SCOPED_TRACE(mode == Mode::kCopy ? "insert_many_copy" : "insert_many");
    for (const auto& c : bad_cases()) {
      SCOPED_TRACE(c.name);
      NewJob scheduled = c.job;
      scheduled.opts.run_at = std::chrono::system_clock::now() + 1h;
      const std::vector<std::vector<NewJob>> batches = {
          {c.job},
          {make_job("good", {}, "valid"), make_job("good", {}, "other", "k"), c.job,
           make_job("good", {}, "valid")},
          {make_job("good", {}, "valid"), scheduled}};
      for (const auto& batch : batches) {
        try {
          enqueue(mode, conn(), batch);
          ADD_FAILURE() << "accepted";
        } catch (const InvalidArgument& e) {
          EXPECT_EQ(e.sqlstate(), "22023");
          EXPECT_EQ(e.retry(), Retry::kDoNotRetry);
          EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
        }
        EXPECT_TRUE(conn().idle()) << "a rejected call must not leave a transaction open";
      }
    }
  }
  EXPECT_EQ(rows_written(), before);
  EXPECT_EQ(store_->stats().lane_reservations, 0u);

  for (const Mode mode : {Mode::kInsert, Mode::kCopy}) {
    pg::Transaction tx(conn());
    enqueue(mode, conn(), unkeyed_batch("txq", 1));
    std::vector<NewJob> bad = unkeyed_batch("txq", 1);
    bad[0].opts.priority = 9;
    EXPECT_THROW(enqueue(mode, conn(), bad), InvalidArgument);
    enqueue(mode, conn(), unkeyed_batch("txq", 1, 1));
    tx.commit();
  }
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('txq')"), 4)
      << "the caller's transactions must have survived the rejected batches";
}

TEST_F(EnqueueTest, LimitsAreInclusive) {
  // Guards the other side of each limit: the extreme valid values are accepted.
  NewJob j = make_job(std::string(200, 'k'), {}, "limits", std::string(256, '\xff'), 4);
  j.opts.max_attempts = 1000;
  NewJob k = make_job("k", {}, "a-Z_0.9:x", std::string(), 1);
  k.opts.max_attempts = 1;
  for (const Mode mode : {Mode::kInsert, Mode::kCopy}) {
    const auto ids = enqueue(mode, conn(), std::vector<NewJob>{j, k});
    EXPECT_EQ(ready_row(ids[0]).priority, 4);
    EXPECT_EQ(ready_row(ids[1]).queue, "a-Z_0.9:x");
  }
}

TEST_F(EnqueueTest, QueueNameOfTwoHundredCharsCanBeEnqueued) {
  // Guards the documented queue-name limit (job.hpp: 1..200 characters) end to end: the
  // longest valid name must enqueue, self-committing and inside a caller's transaction,
  // not only pass validation. (PostgreSQL caps NOTIFY channel names at 63 bytes, so
  // "awa:" + a queue name of 60+ characters cannot be a channel as is.)
  for (const Mode mode : {Mode::kInsert, Mode::kCopy}) {
    SCOPED_TRACE(mode == Mode::kCopy ? "insert_many_copy" : "insert_many");
    for (const std::size_t len : {59u, 60u, 200u}) {
      const std::string queue(len, mode == Mode::kCopy ? 'c' : 'q');
      SCOPED_TRACE("queue of " + std::to_string(len) + " chars");
      try {
        enqueue(mode, conn(), unkeyed_batch(queue, 2));
        EXPECT_EQ(ready_rows(queue).size(), 2u) << "self-committing";
      } catch (const Error& e) {
        ADD_FAILURE() << "self-committing: valid queue name rejected: " << e.what() << " (SQLSTATE "
                      << e.sqlstate() << ")";
      }
      try {
        pg::Transaction tx(conn());
        enqueue(mode, conn(), unkeyed_batch(queue, 2, 1));
        tx.commit();
        EXPECT_EQ(ready_rows(queue).size(), 4u) << "in a caller's transaction";
      } catch (const Error& e) {
        ADD_FAILURE() << "in a caller's transaction: valid queue name rejected: " << e.what()
                      << " (SQLSTATE " << e.sqlstate() << ")";
      }
    }
  }
}

TEST_F(EnqueueTest, ArgsThatJsonbCannotStoreAreRejectedBeforeSending) {
  // Guards queue_storage.hpp's "validate every job first (InvalidArgument, nothing
  // written)": "\u0000" is valid JSON text but jsonb refuses it, so it must be caught
  // before anything is sent — otherwise the caller's transaction is aborted by a
  // DatabaseError instead.
  for (const Mode mode : {Mode::kInsert, Mode::kCopy}) {
    SCOPED_TRACE(mode == Mode::kCopy ? "insert_many_copy" : "insert_many");
    pg::Transaction tx(conn());
    const std::vector<NewJob> jobs{NewJob::from_text("nul", R"({"a":"\u0000"})", InsertOpts{})};
    try {
      enqueue(mode, conn(), jobs);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.sqlstate(), "22023");
    } catch (const Error& e) {
      ADD_FAILURE() << "reached the database: " << e.what() << " (SQLSTATE " << e.sqlstate() << ")";
    }
    EXPECT_NO_THROW(conn().exec("SELECT 1")) << "the caller's transaction was aborted";
  }
}

}  // namespace
}  // namespace awa::testing
