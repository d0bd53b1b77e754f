// Fixture for the job and DLQ admin tests (admin_jobs_pgtest, admin_moves_pgtest,
// admin_dlq_pgtest, cli_jobs_pgtest): a migrated schema, an Admin on it, and helpers that
// put jobs into each state through the engine's own paths.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/queue_storage.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {

// An ordering key that routes to `shard` of `shards` (C++ and SQL hash alike).
inline std::string key_on_shard(int shards, int shard, const std::string& prefix = "key-") {
  for (int i = 0; i < 100000; ++i) {
    auto key = prefix + std::to_string(i);
    if (shard_for_ordering_key(key, shards) == shard) return key;
  }
  throw std::logic_error("no ordering key found for the shard");
}

// "2026-01-31T12:34:56.789Z": how every admin result shows a time.
inline bool is_iso_utc(const std::string& t) {
  if (t.size() != 24) return false;
  const std::string shape = "dddd-dd-ddTdd:dd:dd.dddZ";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 'd' ? (t[i] < '0' || t[i] > '9') : t[i] != shape[i]) return false;
  }
  return true;
}

class JobAdminTest : public StorageTest {
 protected:
  void SetUpSchema() override {
    StorageTest::SetUpSchema();
    // Fresh partitions have no statistics; JIT would compile every admin scan (see
    // RingsTest.OpenAttemptScanIsNotJitCompiled). The functions set jit = off themselves;
    // this covers the tests' own queries.
    conn().exec("SET jit = off");
    admin_conn_.emplace(Connection::connect(database_url()));
  }
  void TearDown() override {
    admin_conn_.reset();
    StorageTest::TearDown();
  }

  Admin admin() const { return Admin(schema_); }
  Connection& ac() { return *admin_conn_; }

  static InsertOpts opts(const std::string& queue, int priority = 2,
                         std::optional<std::string> key = std::nullopt, int max_attempts = 25) {
    InsertOpts o = on_queue(queue);
    o.priority = priority;
    o.ordering_key = std::move(key);
    o.max_attempts = max_attempts;
    return o;
  }
  JobId enqueue(const InsertOpts& o, const std::string& kind = "work",
                nlohmann::json args = nlohmann::json::object()) {
    return storage::insert_many(*store_, conn(), std::vector{NewJob(kind, args, o)}).front();
  }
  JobId enqueue(const std::string& queue, const std::string& kind = "work") {
    return enqueue(opts(queue), kind);
  }
  JobId schedule(const std::string& queue, std::chrono::seconds ahead = std::chrono::hours(1)) {
    InsertOpts o = opts(queue);
    o.run_at = std::chrono::system_clock::now() + ahead;
    return enqueue(o);
  }

  std::vector<ClaimedEntry> claim(const std::string& queue, int max_batch = 1) {
    QueueStorage::ClaimOptions o;
    o.max_batch = max_batch;
    return storage::consumer(*store_).claim(conn(), queue, o);
  }
  // Claims exactly one job of the queue and checks it is `id`.
  ClaimedEntry claim_one(const std::string& queue, JobId id) {
    auto got = claim(queue, 1);
    EXPECT_EQ(got.size(), 1U);
    if (got.empty()) throw std::runtime_error("nothing to claim in " + queue);
    EXPECT_EQ(got[0].job_id, id);
    return got[0];
  }
  std::string finish(const ClaimedEntry& e, Outcome outcome, const std::string& error = {},
                     std::chrono::milliseconds delay = std::chrono::milliseconds(-1)) {
    const auto r = storage::consumer(*store_).complete(
        conn(), std::vector{Completion::of(e, outcome, error, delay)});
    return r.at(0).state.value_or("stale");
  }
  void set_dlq(const std::string& queue, bool enabled) {
    conn().query(
        "INSERT INTO queue_meta (queue, dlq_enabled) VALUES ($1, $2) "
        "ON CONFLICT (queue) DO UPDATE SET dlq_enabled = EXCLUDED.dlq_enabled",
        queue, enabled);
  }

  // One job in every state of kJobStates (plus a job cancelled while scheduled, key
  // "cancelled_scheduled"), all in `queue`, through the engine's paths. Only one job is
  // ever available when a claim runs, so each claim takes the job just enqueued.
  std::map<std::string, JobId> every_state(const std::string& queue) {
    std::map<std::string, JobId> ids;
    ids["completed"] = enqueue(queue);
    EXPECT_EQ(finish(claim_one(queue, ids["completed"]), Outcome::kCompleted), "completed");

    ids["failed"] = enqueue(opts(queue, 2, std::nullopt, 1), "failing");
    EXPECT_EQ(finish(claim_one(queue, ids["failed"]), Outcome::kRetry, "boom"), "failed");

    ids["retryable"] = enqueue(queue);
    EXPECT_EQ(finish(claim_one(queue, ids["retryable"]), Outcome::kRetry, "try again",
                     std::chrono::hours(1)),
              "retried");

    set_dlq(queue, true);
    ids["dlq"] = enqueue(queue, "dead");
    EXPECT_EQ(finish(claim_one(queue, ids["dlq"]), Outcome::kFail, "fatal"), "dlq");
    set_dlq(queue, false);

    ids["running"] = enqueue(queue);
    claim_one(queue, ids["running"]);

    ids["waiting_external"] = enqueue(queue);
    const auto w = claim_one(queue, ids["waiting_external"]);
    const std::vector beat{QueueStorage::Heartbeat::of(w, std::string(R"({"step": 3})"))};
    EXPECT_EQ(storage::consumer(*store_).heartbeat(conn(), beat).size(), 1U);
    EXPECT_TRUE(
        storage::consumer(*store_).callback(conn(), w, std::chrono::hours(1), /*park=*/true));

    ids["cancelled"] = enqueue(queue);
    EXPECT_EQ(admin().cancel_job(ac(), ids["cancelled"]), "available");

    ids["cancelled_scheduled"] = schedule(queue);
    EXPECT_EQ(admin().cancel_job(ac(), ids["cancelled_scheduled"]), "scheduled");

    ids["scheduled"] = schedule(queue);
    ids["available"] = enqueue(queue);
    return ids;
  }

  std::string state_of(JobId id) {
    const auto d = admin().job(ac(), id);
    return d ? d->summary.state : "<none>";
  }

  // The counts and the listing must agree: both are exact, by different routes.
  void expect_counts_match_listing(const std::string& queue) {
    const auto c = admin().queue_counts(ac(), queue);
    JobFilter f;
    f.queue = queue;
    f.limit = 10000;
    std::map<std::string, std::int64_t> by_state;
    for (const auto& s : admin().list_jobs(ac(), f)) ++by_state[s.state];
    EXPECT_EQ(c.available, by_state["available"]);
    EXPECT_EQ(c.running, by_state["running"] + by_state["waiting_external"]);
    EXPECT_EQ(c.scheduled, by_state["scheduled"]);
    EXPECT_EQ(c.retryable, by_state["retryable"]);
    EXPECT_EQ(c.completed, by_state["completed"]);
    EXPECT_EQ(c.failed, by_state["failed"]);
    EXPECT_EQ(c.cancelled, by_state["cancelled"]);
    EXPECT_EQ(c.dlq, by_state["dlq"]);
  }

 private:
  std::optional<Connection> admin_conn_;
};

}  // namespace awa::testing
