// Per-key order across a change of enqueue_shards (sql/functions/0022_shard_fences.sql):
// producers that cached the old count re-route, rows enqueued after the change wait until
// the rows before it are claimed, stacked changes are lifted in order, and keyed producers
// running across 4 -> 8 -> 2 see their keys claimed in order.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

NewJob keyed_job(const std::string& queue, const std::string& key, std::int64_t n) {
  InsertOpts o;
  o.queue = queue;
  o.ordering_key = key;
  return NewJob("fenced", Json{{"k", key}, {"n", n}}, std::move(o));
}

// The first key "<prefix>i" with hash % 4 == a4 and hash % 8 == a8.
std::string key_with(const std::string& prefix, int a4, int a8) {
  for (int i = 0;; ++i) {
    std::string k = prefix + std::to_string(i);
    if (shard_for_ordering_key(k, 4) == a4 && shard_for_ordering_key(k, 8) == a8) return k;
  }
}

enum class Path { kOneJob, kPipeline, kCopy, kStaged };

class ShardFenceTest : public StorageTest {
 protected:
  int shard_of(JobId id) {
    return static_cast<int>(
        conn()
            .query("SELECT enqueue_shard FROM ready_entries WHERE job_id = $1 AND run_lease = 0",
                   id)
            .get<std::int64_t>(0, 0));
  }

  // One enqueue of `job` by `store` on `c` through `path` (kPipeline sends it with an
  // unkeyed companion so that the one-job path does not take it).
  JobId enqueue(QueueStorage& store, pg::Connection& c, Path path, const NewJob& job) {
    std::vector<NewJob> jobs{job};
    switch (path) {
      case Path::kOneJob:
        return storage::insert_many(store, c, jobs).front();
      case Path::kPipeline:
        jobs.emplace_back("filler", Json::object(), on_queue(job.opts.queue));
        return storage::insert_many(store, c, jobs).front();
      case Path::kCopy:
        jobs.emplace_back("filler", Json::object(), on_queue(job.opts.queue));
        return storage::insert_many_copy(store, c, jobs).front();
      case Path::kStaged: {
        c.exec("BEGIN");
        const auto id = storage::insert_many(store, c, jobs).front();
        c.exec("COMMIT");
        return id;
      }
    }
    return 0;
  }

  JobId put(const NewJob& job) {
    return storage::insert_many(*store_, conn(), std::vector<NewJob>{job}).front();
  }

  std::vector<ClaimedEntry> claim(const std::string& queue, int max_batch = 10) {
    QueueStorage::ClaimOptions o;
    o.max_batch = max_batch;
    return storage::consumer(*store_).claim(conn(), queue, o);
  }

  // Holds lane (queue, 2, shard)'s claim head row, as a claimer in the middle of its claim
  // of that lane does, until release().
  class HeadHolder {
   public:
    HeadHolder(pg::Connection c, const std::string& queue, int shard) : c_(std::move(c)) {
      c_.exec("BEGIN");
      c_.query(
          "SELECT 1 FROM queue_claim_heads WHERE queue_id = queue_id_of($1) AND priority = 2 "
          "AND enqueue_shard = $2 FOR UPDATE",
          queue, shard);
    }
    void release() { c_.exec("ROLLBACK"); }

   private:
    pg::Connection c_;
  };
};

class ShardFencePathTest : public ShardFenceTest, public ::testing::WithParamInterface<Path> {};

TEST_P(ShardFencePathTest, AProducerWithAStaleCountReRoutesAKeyedJob) {
  // Regression: a producer routed keyed jobs with the shard count it had cached (up to
  // shard_count_ttl, or for good with a long one) after set-shards, so one key's jobs
  // went to two shards at once. Now its write is checked under the reshard lock and
  // routed again with the new count.
  QueueStorage stale(StorageOptions{schema_, std::chrono::hours(1)});
  set_shards("stale", 4);
  const std::string key = key_with("stale-", 1, 5);
  EXPECT_EQ(shard_of(enqueue(stale, conn(), GetParam(), keyed_job("stale", key, 1))), 1);
  set_shards("stale", 8);
  EXPECT_EQ(shard_of(enqueue(stale, conn(), GetParam(), keyed_job("stale", key, 2))), 5)
      << "routed with the cached count 4";
  EXPECT_EQ(storage::enqueue_shards(stale, conn(), "stale"), 8);
}

INSTANTIATE_TEST_SUITE_P(Paths, ShardFencePathTest,
                         ::testing::Values(Path::kOneJob, Path::kPipeline, Path::kCopy,
                                           Path::kStaged),
                         [](const ::testing::TestParamInfo<Path>& path_info) {
                           switch (path_info.param) {
                             case Path::kOneJob:
                               return std::string("OneJob");
                             case Path::kPipeline:
                               return std::string("Pipeline");
                             case Path::kCopy:
                               return std::string("Copy");
                             case Path::kStaged:
                               return std::string("Staged");
                           }
                           return std::string("Unknown");
                         });

TEST_F(ShardFenceTest, RowsAfterAReshardWaitForTheRowsBeforeIt) {
  // Regression: after 4 -> 8 a key's new job (shard 5) was claimable while its old one
  // (shard 1) was not yet claimed — here because another claimer holds shard 1's head —
  // so the key ran out of order.
  set_shards("cut", 4);
  const std::string key = key_with("cut-", 1, 5);
  const auto before = put(keyed_job("cut", key, 1));
  set_shards("cut", 8);
  store_->reset();  // this test is about the claim: the producer knows the new count
  const auto after = put(keyed_job("cut", key, 2));
  ASSERT_EQ(shard_of(before), 1);
  ASSERT_EQ(shard_of(after), 5);

  HeadHolder busy(connect_new(), "cut", 1);
  const auto during = claim("cut");
  EXPECT_TRUE(during.empty()) << "claimed job " << (during.empty() ? 0 : during[0].job_id)
                              << " of shard " << (during.empty() ? -1 : during[0].enqueue_shard)
                              << " while shard 1 still holds the key's earlier job";
  busy.release();

  const auto first = claim("cut");
  ASSERT_EQ(first.size(), 1U);
  EXPECT_EQ(first[0].job_id, before);
  const auto second = claim("cut");
  ASSERT_EQ(second.size(), 1U);
  EXPECT_EQ(second[0].job_id, after);
  EXPECT_EQ(count("SELECT count(*) FROM shard_fences"), 0) << "the fence was not lifted";
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta WHERE queue = 'cut' AND shard_fence IS NULL"),
            1);
}

TEST_F(ShardFenceTest, StackedChangesAreLiftedInOrder) {
  // 4 -> 8 -> 2 with a job of one key in each epoch: shards 3, 7 and 1. Each job may be
  // claimed only once the previous one is, whichever lanes other claimers hold.
  set_shards("stack", 4);
  const std::string key = key_with("stack-", 3, 7);
  ASSERT_EQ(shard_for_ordering_key(key, 2), 1);
  std::vector<JobId> ids;
  ids.push_back(put(keyed_job("stack", key, 1)));
  set_shards("stack", 8);
  store_->reset();  // the producer knows the new count at once (see above)
  ids.push_back(put(keyed_job("stack", key, 2)));
  set_shards("stack", 2);
  store_->reset();
  ids.push_back(put(keyed_job("stack", key, 3)));
  EXPECT_EQ(
      count("SELECT count(DISTINCT epoch) FROM shard_fences WHERE queue_id = queue_id_of('stack')"),
      2);

  for (std::size_t i = 0; i < ids.size(); ++i) {
    const int shard = shard_of(ids[i]);
    {
      HeadHolder busy(connect_new(), "stack", shard);
      const auto got = claim("stack");
      EXPECT_TRUE(got.empty()) << "job " << (got.empty() ? 0 : got[0].job_id)
                               << " claimed before job " << ids[i] << " (shard " << shard << ")";
      busy.release();
    }
    const auto got = claim("stack");
    ASSERT_EQ(got.size(), 1U) << "step " << i;
    EXPECT_EQ(got[0].job_id, ids[i]);
  }
  EXPECT_EQ(count("SELECT count(*) FROM shard_fences"), 0);
}

TEST_F(ShardFenceTest, AQueueWithNothingUnclaimedGetsNoFence) {
  // The pause is paid only when there is something to wait for.
  set_shards("idle", 4);
  EXPECT_EQ(count("SELECT count(*) FROM shard_fences"), 0);
  put(keyed_job("idle", "a", 1));
  ASSERT_EQ(claim("idle").size(), 1U);
  set_shards("idle", 8);
  EXPECT_EQ(count("SELECT count(*) FROM shard_fences"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta WHERE queue = 'idle' AND shard_fence IS NULL"),
            1);
  put(keyed_job("idle", "a", 2));
  EXPECT_EQ(claim("idle").size(), 1U);
}

TEST_F(ShardFenceTest, AReshardWaitsForTheKeyedProducersInFlight) {
  // The cut: a keyed producer holds the queue's reshard lock from before it reads the
  // count until it commits, and set-shards waits for it.
  pg::Connection producer = connect_new();
  producer.exec("BEGIN");
  producer.query("SELECT hold_shard_counts(ARRAY['inflight'])");
  pg::Connection admin = connect_new();
  const int pid = static_cast<int>(admin.query("SELECT pg_backend_pid()").get<std::int64_t>(0, 0));
  BackgroundCall<int> change(pid, [&] {
    admin.query(
        "INSERT INTO queue_meta (queue, enqueue_shards) VALUES ('inflight', 4) "
        "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards");
    return 0;
  });
  EXPECT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), pid); }))
      << "set-shards did not wait for the producer";
  EXPECT_FALSE(change.finishes_within(0ms));
  producer.exec("COMMIT");
  ASSERT_TRUE(change.finishes_within(10s));
  change.get();
  EXPECT_EQ(count("SELECT enqueue_shards FROM queue_meta WHERE queue = 'inflight'"), 4);
}

TEST_F(ShardFenceTest, KeyedOrderHoldsWhileProducersRunAcrossFourToEightToTwo) {
  // Three producers, each with its own store (a short shard_count_ttl, so each switches
  // counts at its own moment) and connection, enqueue keyed jobs through all four paths
  // while six claimers drain the queue slowly and the shard count goes 4 -> 8 -> 2; the
  // claimers start at the first change, so the old shards hold a backlog then.
  // For each key, in producer order: a job on the same shard as its predecessor has a
  // higher lane_seq; on another shard it was claimed by a claim that saw the
  // predecessor's claim committed.
  constexpr int kProducers = 3;
  constexpr int kPerProducer = 160;
  constexpr int kKeys = 6;
  // More claimers than the old shards: while some hold the old lanes' heads, the others
  // look elsewhere, which is where an unfenced claim takes a key's newer job.
  constexpr int kClaimers = 6;
  set_shards("mix", 4);
  conn().exec("CREATE SEQUENCE claim_order");
  std::atomic<int> produced{0};
  std::atomic<int> producers_done{0};
  std::mutex mu;
  std::vector<std::string> errors;
  struct Seen {
    std::int64_t n;
    int shard;
    std::int64_t lane_seq;
    std::int64_t order;  // of its claim: see the claimers
  };
  std::map<std::string, std::vector<Seen>> seen;  // key -> claims

  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      try {
        QueueStorage store(StorageOptions{schema_, 30ms});
        pg::Connection c = connect_new();
        for (int j = 0; j < kPerProducer; ++j) {
          const std::string key = fmt::format("p{}-k{}", p, j % kKeys);
          enqueue(store, c, static_cast<Path>(j % 4), keyed_job("mix", key, j));
          ++produced;
          std::this_thread::sleep_for(2ms);
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        errors.push_back(fmt::format("producer {}: {}", p, e.what()));
      }
      ++producers_done;
    });
  }
  std::atomic<int> claimed{0};
  std::atomic<bool> claiming{false};
  for (int w = 0; w < kClaimers; ++w) {
    threads.emplace_back([&, w] {
      try {
        QueueStorage store(StorageOptions{schema_});
        pg::Connection c = connect_new();
        QueueStorage::ClaimOptions o;
        o.max_batch = 2;
        const auto deadline = std::chrono::steady_clock::now() + 90s;
        while (!claiming && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(2ms);
        }
        while (std::chrono::steady_clock::now() < deadline) {
          // The claim and a draw from an uncached sequence, in one transaction: a claim
          // whose snapshot shows another's commit draws a higher number than it did.
          c.exec("BEGIN");
          const auto got = storage::consumer(store).claim(c, "mix", o);
          const auto order = c.exec("SELECT nextval('claim_order')").get<std::int64_t>(0, 0);
          c.exec("COMMIT");
          {
            std::lock_guard lock(mu);
            for (const auto& e : got) {
              if (e.kind != "fenced") continue;
              const auto args = Json::parse(e.args_json);
              seen[args.at("k").get<std::string>()].push_back(
                  Seen{args.at("n").get<std::int64_t>(), e.enqueue_shard, e.lane_seq, order});
              ++claimed;
            }
          }
          if (producers_done == kProducers && claimed == produced) break;
          std::this_thread::sleep_for(20ms);  // slower than the producers: a backlog
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        errors.push_back(fmt::format("claimer {}: {}", w, e.what()));
      }
    });
  }
  const auto reached = [&](int n) {
    return eventually([&] { return produced >= n || producers_done == kProducers; }, 60s) &&
           produced >= n;
  };
  const bool grew = reached(kProducers * kPerProducer / 3);
  set_shards("mix", 8);
  claiming = true;  // from here on: a backlog on the old shards at the first change
  const bool shrank = reached(2 * kProducers * kPerProducer / 3);
  set_shards("mix", 2);
  for (auto& t : threads) t.join();
  EXPECT_TRUE(grew && shrank);
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_EQ(produced.load(), kProducers * kPerProducer);
  EXPECT_EQ(claimed.load(), produced.load()) << "not every job was claimed";

  int moved = 0;
  std::vector<std::string> violations;
  for (auto& [key, claims] : seen) {
    std::sort(claims.begin(), claims.end(), [](const Seen& a, const Seen& b) { return a.n < b.n; });
    for (std::size_t i = 1; i < claims.size(); ++i) {
      const auto& a = claims[i - 1];
      const auto& b = claims[i];
      const bool ok = a.shard == b.shard ? a.lane_seq < b.lane_seq : a.order < b.order;
      if (a.shard != b.shard) ++moved;
      if (!ok) {
        violations.push_back(
            fmt::format("key {}: job {} (shard {}, lane_seq {}, claim {}) before job {} (shard {}, "
                        "lane_seq {}, claim {})",
                        key, b.n, b.shard, b.lane_seq, b.order, a.n, a.shard, a.lane_seq, a.order));
      }
    }
  }
  EXPECT_GT(moved, 0) << "no key changed shard: the test did not exercise a reshard";
  EXPECT_TRUE(violations.empty()) << violations.size() << " order violations, first: "
                                  << (violations.empty() ? "" : violations.front());
}

}  // namespace
}  // namespace awa::testing
