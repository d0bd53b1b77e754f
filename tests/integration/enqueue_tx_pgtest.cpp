// Several enqueue calls in one business transaction, in many producers at once: the
// pattern of an order handler that enqueues one job per line. Producers are separate
// QueueStorage instances on separate connections (as separate processes would be), plus
// an SQL producer (insert_job_compat / insert_jobs_compat, as a service in another
// language calls them), all writing the same queue at enqueue_shards > 1 with keyed and
// unkeyed jobs mixed in every transaction.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using namespace std::chrono_literals;

struct Enqueued {
  JobId id = 0;
  int producer = 0;
  std::string key;  // empty: unkeyed
};

struct Outcome {
  std::vector<Enqueued> committed;
  std::map<std::string, int> errors;  // SQLSTATE (or "other") -> count
  int transactions = 0;
};

class EnqueueTxTest : public StorageTest, public ::testing::WithParamInterface<int> {
 protected:
  static constexpr int kProducers = 4;  // three C++ producers and one SQL producer
  static constexpr int kCallsPerTx = 4;
  static constexpr int kKeys = 8;

  // Producer p's transactions: kCallsPerTx calls each, a mix of one unkeyed job, one
  // keyed job and a batch of an unkeyed and a keyed job (the SQL
  // producer: insert_job_compat and insert_jobs_compat). Keys are drawn from kKeys, so
  // any two transactions touch overlapping lanes in random order.
  void produce(int p, int transactions, std::chrono::steady_clock::time_point deadline,
               Outcome& out) {
    pg::Connection c = connect_new();
    QueueStorage store(StorageOptions{schema_});
    std::mt19937 rng(static_cast<unsigned>(1000 * GetParam() + p));
    const auto key = [&] { return fmt::format("k{}", rng() % kKeys); };
    for (int t = 0; t < transactions && std::chrono::steady_clock::now() < deadline; ++t) {
      std::vector<Enqueued> mine;
      ++out.transactions;
      try {
        pg::Transaction tx(c);
        for (int call = 0; call < kCallsPerTx; ++call) {
          const int shape = static_cast<int>(rng() % 3);
          std::vector<NewJob> jobs;
          std::vector<std::string> keys;
          if (shape != 1) keys.push_back("");
          if (shape != 0) keys.push_back(key());
          for (const auto& k : keys) {
            InsertOpts o = on_queue("orders");
            if (!k.empty()) o.ordering_key = k;
            jobs.emplace_back("line", nlohmann::json{{"p", p}, {"t", t}, {"call", call}}, o);
          }
          std::vector<JobId> ids;
          if (p == kProducers - 1) {
            ids = sql_insert(c, jobs);
          } else {
            // One job: what QueueStorage::insert does (the same entry point).
            ids = storage::insert_many(store, c, jobs);
          }
          for (std::size_t i = 0; i < ids.size(); ++i) mine.push_back({ids[i], p, keys[i]});
        }
        tx.commit();
        out.committed.insert(out.committed.end(), mine.begin(), mine.end());
      } catch (const Error& e) {
        ++out.errors[e.sqlstate().empty() ? std::string("other") : e.sqlstate()];
      }
    }
  }

  // The SQL producer: one insert_job_compat per single job, insert_jobs_compat for two.
  static std::vector<JobId> sql_insert(pg::Connection& c, const std::vector<NewJob>& jobs) {
    if (jobs.size() == 1) {
      const auto& o = jobs[0].opts;
      const auto r = o.ordering_key
                         ? c.query(
                               "SELECT id FROM insert_job_compat('line', 'orders', $1::jsonb, "
                               "p_ordering_key => convert_to($2, 'UTF8'))",
                               jobs[0].args_json, *o.ordering_key)
                         : c.query("SELECT id FROM insert_job_compat('line', 'orders', $1::jsonb)",
                                   jobs[0].args_json);
      return {r.get<std::int64_t>(0, 0)};
    }
    nlohmann::json batch = nlohmann::json::array();
    for (const auto& j : jobs) {
      nlohmann::json e{
          {"kind", "line"}, {"queue", "orders"}, {"args", nlohmann::json::parse(j.args_json)}};
      if (j.opts.ordering_key) e["ordering_key"] = *j.opts.ordering_key;
      batch.push_back(e);
    }
    const auto r =
        c.query("SELECT job_id FROM insert_jobs_compat($1::jsonb) ORDER BY ord", batch.dump());
    std::vector<JobId> ids;
    for (int i = 0; i < r.rows(); ++i) ids.push_back(r.get<std::int64_t>(i, 0));
    return ids;
  }
};

TEST_P(EnqueueTxTest, SeveralCallsPerTransactionNeverDeadlockAndLoseNothing) {
  // Regression: each insert call reserved (and locked until commit) a lane of its own
  // rotor pick or key hash, so two transactions with two or more calls could take lanes in
  // crossing order; PostgreSQL then aborted one with 40P01 (591 of 900 transactions with
  // three producers, two unkeyed insert() calls each, at enqueue_shards = 2).
  const int shards = GetParam();
  set_shards("orders", shards);
  constexpr int kTransactions = 40;
  // A bound on the test's time, not an assertion: each deadlock costs the server's
  // deadlock_timeout to detect, and the old code would otherwise run for minutes.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  std::vector<Outcome> outcomes(kProducers);
  {
    std::vector<std::thread> threads;
    for (int p = 0; p < kProducers; ++p) {
      threads.emplace_back(
          [&, p] { produce(p, kTransactions, deadline, outcomes[static_cast<std::size_t>(p)]); });
    }
    for (auto& t : threads) t.join();
  }

  std::map<std::string, int> errors;
  std::vector<Enqueued> committed;
  int transactions = 0;
  for (const auto& o : outcomes) {
    for (const auto& [state, n] : o.errors) errors[state] += n;
    committed.insert(committed.end(), o.committed.begin(), o.committed.end());
    transactions += o.transactions;
  }
  EXPECT_TRUE(errors.empty()) << "failed transactions by SQLSTATE: "
                              << ::testing::PrintToString(errors) << " of " << transactions;
  EXPECT_EQ(transactions, kProducers * kTransactions) << "the time bound cut the run short";

  // Every committed job is in ready_entries exactly once, nothing else is, and nothing
  // is left in staging.
  std::map<JobId, Enqueued> by_id;
  for (const auto& e : committed) by_id[e.id] = e;
  ASSERT_EQ(by_id.size(), committed.size()) << "a job id was returned twice";
  const auto rows = conn().exec(
      "SELECT job_id, enqueue_shard, lane_seq, ordering_key IS NOT NULL FROM ready_entries "
      "WHERE queue_id = queue_id_of('orders') ORDER BY enqueue_shard, lane_seq");
  EXPECT_EQ(static_cast<std::size_t>(rows.rows()), committed.size());
  std::set<JobId> seen;
  std::map<std::string, std::vector<JobId>> per_key;  // in lane order
  std::set<int> unkeyed_shards;
  for (int r = 0; r < rows.rows(); ++r) {
    const JobId id = rows.get<std::int64_t>(r, 0);
    EXPECT_TRUE(seen.insert(id).second) << "job " << id << " stored twice";
    const auto it = by_id.find(id);
    if (it == by_id.end()) {
      ADD_FAILURE() << "job " << id << " stored but its transaction failed";
      continue;
    }
    const int shard = rows.get<int>(r, 1);
    EXPECT_GE(shard, 0);
    EXPECT_LT(shard, shards);
    const auto& key = it->second.key;
    if (key.empty()) {
      unkeyed_shards.insert(shard);
    } else {
      EXPECT_EQ(shard, shard_for_ordering_key(key, shards)) << "key " << key << " misrouted";
      per_key[key].push_back(id);
    }
  }
  EXPECT_EQ(count("SELECT count(*) FROM enqueue_staging"), 0);
  EXPECT_GT(unkeyed_shards.size(), 1u) << "unkeyed jobs never spread over the shards";

  // Per-key FIFO: one producer's jobs of a key (its transactions are sequential, its ids
  // increase) come in the order it enqueued them.
  for (const auto& [key, ids] : per_key) {
    std::map<int, JobId> last;
    for (const auto id : ids) {
      const int p = by_id.at(id).producer;
      if (last.count(p) != 0) {
        EXPECT_LT(last[p], id) << "key " << key << ": producer " << p << "'s jobs out of order";
      }
      last[p] = id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, EnqueueTxTest, ::testing::Values(2, 4, 8),
                         [](const auto& param) { return fmt::format("S{}", param.param); });

}  // namespace
}  // namespace awa::testing
