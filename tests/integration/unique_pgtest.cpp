// Unique jobs (issue 14, InsertOpts::unique): a second insert of an equal job while the
// first is in the key's states returns the first one's id, flagged as a duplicate —
// race-free under concurrent producers, at any enqueue_shards, through the C++ producer,
// insert_job_compat and the CLI alike.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <exception>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "admin_jobs_support.hpp"
#include "awa/client.hpp"
#include "awa/error.hpp"
#include "cli_runner.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

class UniqueTest : public JobAdminTest {
 protected:
  static NewJob unique_job(const std::string& queue, nlohmann::json args = {{"order", 42}},
                           UniqueOpts u = {}) {
    InsertOpts o = on_queue(queue);
    o.unique = std::move(u);
    return NewJob("send_receipt", args, o);
  }
  InsertResult insert(const NewJob& job) { return store_->insert_result(ac(), job); }
  // Jobs of the queue, any state (Admin::queue_counts, exact at any shard count).
  std::int64_t jobs_in(const std::string& queue) {
    const auto c = admin().queue_counts(ac(), queue);
    return c.available + c.running + c.scheduled + c.retryable + c.completed + c.failed +
           c.cancelled + c.dlq;
  }
  void complete_only_job(const std::string& queue, JobId id) {
    EXPECT_EQ(finish(claim_one(queue, id), Outcome::kCompleted), "completed");
  }

  // `kProducers` threads, each with its own connection, insert `job_for(p)` at once
  // (released together by a barrier). Returns what each got.
  std::vector<InsertResult> race(const std::function<NewJob(int)>& job_for) {
    constexpr int kProducers = 16;
    std::vector<Connection> conns;
    for (int p = 0; p < kProducers; ++p) conns.push_back(Connection::connect(database_url()));
    std::vector<InsertResult> got(kProducers);
    std::vector<std::exception_ptr> errors(kProducers);
    std::barrier start(kProducers);
    {
      std::vector<std::jthread> threads;
      for (int p = 0; p < kProducers; ++p) {
        threads.emplace_back([&, p] {
          const auto up = static_cast<std::size_t>(p);
          const NewJob job = job_for(p);
          start.arrive_and_wait();
          try {
            got[up] = store_->insert_result(conns[up], job);
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
        ADD_FAILURE() << "producer failed: " << ex.what();
      }
    }
    return got;
  }
  // Exactly one insert, every producer given its id, the others told it was a duplicate.
  static void expect_one_winner(const std::vector<InsertResult>& got) {
    ASSERT_FALSE(got.empty());
    int inserted = 0;
    for (const auto& r : got) {
      EXPECT_EQ(r.id, got[0].id);
      if (!r.duplicate) ++inserted;
    }
    EXPECT_EQ(inserted, 1);
  }
};

TEST_F(UniqueTest, SixteenConcurrentProducersInsertOneJob) {
  // Guards the key claim under contention: rounds of 16 producers, each with its own
  // connection, inserting one equal unique job at once.
  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds; ++round) {
    const auto got = race([&](int) { return unique_job("uq", {{"round", round}}); });
    expect_one_winner(got);
    EXPECT_EQ(jobs_in("uq"), round + 1);
  }
  EXPECT_EQ(admin().queue_counts(ac(), "uq").available, kRounds);
}

TEST_F(UniqueTest, KeyDoesNotDependOnTheShard) {
  // At S = 8, producers with ordering keys on every shard: still one job.
  set_shards("wide", 8);
  constexpr int kRounds = 3;
  for (int round = 0; round < kRounds; ++round) {
    const auto got = race([&](int p) {
      NewJob j = unique_job("wide", {{"round", round}});
      j.opts.ordering_key = key_on_shard(8, p % 8, fmt::format("r{}-p{}-", round, p));
      return j;
    });
    expect_one_winner(got);
    EXPECT_EQ(jobs_in("wide"), round + 1);
  }
}

TEST_F(UniqueTest, ByArgsComparesArgsAsJson) {
  const auto first = insert(unique_job("a", {{"x", 1}, {"y", 2}}));
  EXPECT_FALSE(first.duplicate);
  // Same JSON value, other key order and whitespace: equal.
  NewJob same = unique_job("a");
  same.args_json = "{ \"y\" : 2,\n \"x\": 1 }";
  const auto again = insert(same);
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.id, first.id);
  // Other args: another job.
  const auto other = insert(unique_job("a", {{"x", 2}}));
  EXPECT_FALSE(other.duplicate);
  EXPECT_NE(other.id, first.id);

  // by_args = false: the kind (and queue) alone.
  UniqueOpts kind_only;
  kind_only.by_args = false;
  const auto k1 = insert(unique_job("b", {{"x", 1}}, kind_only));
  const auto k2 = insert(unique_job("b", {{"x", 99}}, kind_only));
  EXPECT_FALSE(k1.duplicate);
  EXPECT_TRUE(k2.duplicate);
  EXPECT_EQ(k2.id, k1.id);
  // A key by args and one without never collide, even for equal args.
  EXPECT_FALSE(insert(unique_job("b", {{"x", 1}})).duplicate);
  EXPECT_EQ(jobs_in("a"), 2);
  EXPECT_EQ(jobs_in("b"), 2);
}

TEST_F(UniqueTest, ByQueue) {
  EXPECT_FALSE(insert(unique_job("q1")).duplicate);
  EXPECT_FALSE(insert(unique_job("q2")).duplicate);  // by_queue: another queue, another key
  UniqueOpts any_queue;
  any_queue.by_queue = false;
  const auto first = insert(unique_job("q1", {{"n", 1}}, any_queue));
  const auto second = insert(unique_job("q2", {{"n", 1}}, any_queue));
  EXPECT_FALSE(first.duplicate);
  EXPECT_TRUE(second.duplicate);
  EXPECT_EQ(second.id, first.id);
  EXPECT_EQ(jobs_in("q1"), 2);
  EXPECT_EQ(jobs_in("q2"), 1);
}

TEST_F(UniqueTest, PeriodBucketsOfRunAt) {
  // The bucket is floor(epoch(run_at) / period); past run_at values pick the bucket
  // without waiting for the clock.
  using namespace std::chrono;
  const auto period = hours(1);
  const auto now = system_clock::now();
  const auto bucket_start = system_clock::time_point(
      duration_cast<system_clock::duration>(floor<hours>(now.time_since_epoch())));
  UniqueOpts hourly;
  hourly.period = duration_cast<seconds>(period);
  const auto at = [&](system_clock::time_point t) {
    NewJob j = unique_job("p", {{"report", "daily"}}, hourly);
    j.opts.run_at = t;
    return j;
  };
  const auto in_this = insert(at(bucket_start));
  const auto in_this_again = insert(at(bucket_start + seconds(1)));
  const auto in_previous = insert(at(bucket_start - seconds(1)));
  EXPECT_FALSE(in_this.duplicate);
  EXPECT_TRUE(in_this_again.duplicate);
  EXPECT_EQ(in_this_again.id, in_this.id);
  EXPECT_FALSE(in_previous.duplicate);
  EXPECT_NE(in_previous.id, in_this.id);
  // No run_at: the bucket of now, the current one — unless the hour turned meanwhile.
  const auto now_job = insert(unique_job("p", {{"report", "daily"}}, hourly));
  const bool same_hour =
      floor<hours>(system_clock::now().time_since_epoch()) == floor<hours>(now.time_since_epoch());
  if (same_hour) {
    EXPECT_EQ(now_job.id, in_this.id);
  }
  // Another period length is another key.
  UniqueOpts two_hourly;
  two_hourly.period = hours(2);
  EXPECT_FALSE(insert(unique_job("p", {{"report", "daily"}}, two_hourly)).duplicate);
  EXPECT_EQ(jobs_in("p"), same_hour ? 3 : 4);
}

TEST_F(UniqueTest, CompletionReleasesTheKey) {
  const auto first = insert(unique_job("done"));
  EXPECT_TRUE(insert(unique_job("done")).duplicate);
  const auto e = claim_one("done", first.id);
  // Running is one of the default states: still a duplicate.
  EXPECT_EQ(insert(unique_job("done")).id, first.id);
  EXPECT_EQ(finish(e, Outcome::kCompleted), "completed");
  const auto next = insert(unique_job("done"));
  EXPECT_FALSE(next.duplicate);
  EXPECT_NE(next.id, first.id);
  EXPECT_EQ(insert(unique_job("done")).id, next.id);
  EXPECT_EQ(jobs_in("done"), 2);
}

TEST_F(UniqueTest, CompletedInStatesKeepsItUniqueAfterCompletion) {
  UniqueOpts forever;
  forever.states = {"available", "running", "completed"};
  const auto first = insert(unique_job("once", {{"n", 1}}, forever));
  complete_only_job("once", first.id);
  const auto again = insert(unique_job("once", {{"n", 1}}, forever));
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(jobs_in("once"), 1);
}

TEST_F(UniqueTest, ScheduledJobHoldsItsKey) {
  NewJob later = unique_job("sch");
  later.opts.run_at = std::chrono::system_clock::now() + std::chrono::hours(2);
  const auto first = insert(later);
  EXPECT_FALSE(first.duplicate);
  later.opts.run_at = std::chrono::system_clock::now() + std::chrono::hours(3);
  EXPECT_EQ(insert(later).id, first.id);
  EXPECT_EQ(admin().queue_counts(ac(), "sch").scheduled, 1);
}

TEST_F(UniqueTest, InsertJobCompatAgreesWithTheCppProducer) {
  set_shards("compat", 4);
  const auto sql = [&](const std::string& unique) {
    return conn().query(
        "SELECT id, duplicate FROM insert_job_compat('send_receipt', 'compat', "
        "'{\"order\": 42}', p_unique => $1::jsonb)",
        unique);
  };
  const auto r1 = sql("{}");
  const JobId id = r1.get<std::int64_t>(0, 0);
  EXPECT_FALSE(r1.get<bool>(0, 1));
  const auto r2 = sql("{\"states\": [\"available\"]}");
  EXPECT_EQ(r2.get<std::int64_t>(0, 0), id);
  EXPECT_TRUE(r2.get<bool>(0, 1));
  // The C++ producer computes no key of its own: an equal job is the same key.
  const auto cpp = insert(unique_job("compat"));
  EXPECT_TRUE(cpp.duplicate);
  EXPECT_EQ(cpp.id, id);
  // The existing signature still works, and without p_unique nothing is unique.
  const auto plain =
      conn().query("SELECT id FROM insert_job_compat('send_receipt', 'compat', '{\"order\": 42}')");
  EXPECT_NE(plain.get<std::int64_t>(0, 0), id);
  EXPECT_EQ(jobs_in("compat"), 2);
  // Bad options: 22023, nothing written.
  for (const auto* bad : {R"({"states": ["bogus"]})", R"({"states": []})", R"({"period": 0})",
                          R"({"by_args": "yes"})", R"({"colour": "red"})"}) {
    try {
      sql(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.sqlstate(), "22023") << bad << ": " << e.what();
    }
  }
  EXPECT_EQ(jobs_in("compat"), 2);
}

TEST_F(UniqueTest, InsertManyWithAMixKeepsInputOrder) {
  set_shards("mix", 4);
  const auto plain = [](int n) { return NewJob("plain", {{"n", n}}, on_queue("mix")); };
  const std::vector<NewJob> batch = {plain(0),
                                     unique_job("mix", {{"u", 1}}),
                                     plain(2),
                                     unique_job("mix", {{"u", 1}}),
                                     unique_job("mix", {{"u", 2}}),
                                     plain(5)};
  for (const bool copy : {false, true}) {
    SCOPED_TRACE(copy ? "insert_many_copy" : "insert_many");
    const auto before = jobs_in("mix");
    const auto ids =
        copy ? store_->insert_many_copy(ac(), batch) : store_->insert_many(ac(), batch);
    ASSERT_EQ(ids.size(), batch.size());
    EXPECT_EQ(ids[3], ids[1]);  // the second equal unique job is a duplicate of the first
    EXPECT_EQ(std::set<JobId>(ids.begin(), ids.end()).size(), 5U);
    EXPECT_EQ(jobs_in("mix") - before, copy ? 3 : 5);  // the second time, the unique ones exist
    for (const std::size_t i : {0U, 2U, 5U}) {
      const auto d = admin().job(ac(), ids[i]);
      ASSERT_TRUE(d.has_value());
      EXPECT_EQ(d->summary.kind, "plain");
      EXPECT_EQ(nlohmann::json::parse(d->args_json), nlohmann::json({{"n", i}}));
    }
    for (const std::size_t i : {1U, 4U}) {
      const auto d = admin().job(ac(), ids[i]);
      ASSERT_TRUE(d.has_value());
      EXPECT_EQ(d->summary.kind, "send_receipt");
      EXPECT_EQ(nlohmann::json::parse(d->args_json), nlohmann::json({{"u", i == 1 ? 1 : 2}}));
    }
  }
}

// Regression: a call with several unique jobs took each one's key and then its lane, in
// input order, ahead of its other jobs' lanes, so two calls with the same unique jobs in
// opposite orders deadlocked on the keys (40P01), and one next to a plain producer could
// on the lanes. Now a call claims its keys in key order before any lane, then writes all
// its jobs through the lane-ordered bulk path.
TEST_F(UniqueTest, CallsWithSeveralUniqueJobsInOppositeOrdersDoNotDeadlock) {
  set_shards("dl", 8);
  constexpr int kRounds = 20;
  const auto u = [](int round, const char* which) {
    NewJob j = unique_job("dl", {{"round", round}, {"which", which}});
    j.opts.ordering_key = which;  // the two unique jobs of a round on different lanes
    return j;
  };
  const auto plain = [](int round, int n) {
    InsertOpts o = on_queue("dl");
    o.ordering_key = fmt::format("p{}", n);
    return NewJob("plain", {{"round", round}, {"n", n}}, o);
  };
  std::vector<std::vector<NewJob>> calls[3];
  for (int r = 0; r < kRounds; ++r) {
    calls[0].push_back({u(r, "a"), plain(r, 0), u(r, "b")});
    calls[1].push_back({u(r, "b"), plain(r, 1), u(r, "a")});
    calls[2].push_back({plain(r, 2), plain(r, 3), plain(r, 4), plain(r, 5)});  // lanes only
  }
  std::vector<Connection> conns;
  for (int t = 0; t < 3; ++t) conns.push_back(Connection::connect(database_url()));
  std::barrier step(3);
  std::vector<std::string> errors[3];
  std::vector<std::vector<JobId>> got[3];
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        for (const auto& call : calls[t]) {
          step.arrive_and_wait();
          try {
            got[t].push_back(store_->insert_many(conns[static_cast<std::size_t>(t)], call));
          } catch (const std::exception& e) {
            errors[t].push_back(e.what());
          }
        }
      });
    }
  }
  for (const auto& e : errors) EXPECT_THAT(e, ::testing::IsEmpty());
  // Every round: one job per unique key (the later call's copies got its id).
  ASSERT_EQ(got[0].size(), static_cast<std::size_t>(kRounds));
  ASSERT_EQ(got[1].size(), static_cast<std::size_t>(kRounds));
  for (int r = 0; r < kRounds; ++r) {
    const auto& x = got[0][static_cast<std::size_t>(r)];
    const auto& y = got[1][static_cast<std::size_t>(r)];
    EXPECT_EQ(x[0], y[2]) << "round " << r << ": job a";
    EXPECT_EQ(x[2], y[0]) << "round " << r << ": job b";
    EXPECT_NE(x[0], x[2]) << "round " << r;
  }
  EXPECT_EQ(jobs_in("dl"), kRounds * (2 + 2 + 4));
}

TEST_F(UniqueTest, RolledBackInsertReleasesTheKey) {
  {
    Transaction tx(ac());
    EXPECT_FALSE(insert(unique_job("rb")).duplicate);
    // Within the transaction, the job holds its key.
    EXPECT_TRUE(insert(unique_job("rb")).duplicate);
    tx.rollback();
  }
  EXPECT_EQ(jobs_in("rb"), 0);
  const auto next = insert(unique_job("rb"));
  EXPECT_FALSE(next.duplicate);
  EXPECT_EQ(jobs_in("rb"), 1);
}

TEST_F(UniqueTest, BadOptionsAreInvalidArgument) {
  UniqueOpts bogus;
  bogus.states = {"available", "bogus"};
  UniqueOpts none;
  none.states = {};
  UniqueOpts zero;
  zero.period = std::chrono::seconds(0);
  for (const auto& u : {bogus, none, zero}) {
    EXPECT_THROW(insert(unique_job("bad", {{"n", 1}}, u)), InvalidArgument);
    // In a batch: nothing written, not even the valid job before it.
    const std::vector<NewJob> batch = {unique_job("bad"), unique_job("bad", {{"n", 1}}, u)};
    EXPECT_THROW(store_->insert_many(ac(), batch), InvalidArgument);
  }
  EXPECT_EQ(jobs_in("bad"), 0);
}

TEST_F(UniqueTest, ClientInsertResultSaysDuplicate) {
  ClientOptions o;
  o.database_url = database_url();
  o.schema = schema_;
  o.maintenance = false;
  Client client(o);  // not started: inserts need only its pool and store
  const auto first = client.insert_result(unique_job("client"));
  const auto again = client.insert_result(unique_job("client"));
  EXPECT_FALSE(first.duplicate);
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(client.insert(unique_job("client")), first.id);
  EXPECT_EQ(jobs_in("client"), 1);
}

TEST_F(UniqueTest, CliPrintsTheExistingIdAndSaysDuplicate) {
  const auto awa = [&](const std::string& args) {
    return run_cli(fmt::format("--schema {} enqueue send_receipt --queue cli {}", schema_, args));
  };
  const auto first = awa("--args '{\"order\": 7}' --unique");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const JobId id = std::stoll(first.output);
  EXPECT_THAT(first.output, ::testing::Not(HasSubstr("duplicate")));

  const auto again = awa("--args '{ \"order\":7 }' --unique");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(std::stoll(again.output), id);
  EXPECT_THAT(again.output, HasSubstr(fmt::format("duplicate: job {}", id)));

  // With a period the key differs (the period is part of it): a new job, then duplicates.
  const auto hourly = awa("--args '{\"order\": 7}' --unique --unique-period 3600");
  ASSERT_EQ(hourly.exit_code, 0) << hourly.output;
  const JobId hourly_id = std::stoll(hourly.output);
  EXPECT_NE(hourly_id, id);
  EXPECT_EQ(std::stoll(awa("--args '{\"order\": 7}' --unique --unique-period 3600").output),
            hourly_id);

  EXPECT_EQ(awa("--unique --count 2").exit_code, 1);
  EXPECT_EQ(awa("--unique-period 60").exit_code, 2);  // usage: needs --unique
  EXPECT_EQ(awa("--unique --unique-period 0").exit_code, 1);
  EXPECT_EQ(jobs_in("cli"), 2);
}

}  // namespace
}  // namespace awa::testing
