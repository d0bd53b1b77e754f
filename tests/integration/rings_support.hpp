// Fixture and helpers for the storage-ring tests (rings_*_pgtest.cpp): rotation, prune,
// carry-forward, counts across prunes, and pinning another session at a chosen point.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/queue_storage.hpp"
#include "producer_support.hpp"
#include "runtime/ring_maintenance.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {

// An ordering key that routes to `shard` of `shards` (the C++ hash is bit-identical to the
// SQL one, so this is where the producer puts it).
inline std::string key_for_shard(int shards, int shard, const std::string& prefix = "key-") {
  for (int i = 0; i < 100000; ++i) {
    auto key = prefix + std::to_string(i);
    if (shard_for_ordering_key(key, shards) == shard) return key;
  }
  throw std::logic_error("no ordering key found for the shard");
}

// Whether backend `pid` waits for any lock at all.
inline bool waits_for_any_lock(pg::Connection& observer, int pid) {
  return observer.query("SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT granted", pid)
             .get<std::int64_t>(0, 0) > 0;
}

// Whether backend `pid` holds an advisory lock and waits for another one (a producer that
// reserved one lane and queues for its next).
inline bool holds_one_lane_and_waits_for_another(pg::Connection& observer, int pid) {
  const auto r = observer.query(
      "SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted) "
      "FROM pg_locks WHERE pid = $1 AND locktype = 'advisory'",
      pid);
  return r.get<std::int64_t>(0, 0) >= 1 && r.get<std::int64_t>(0, 1) >= 1;
}

// Parks other sessions just before their next use of a table, deterministically and
// without sleeping. The holder takes ACCESS SHARE on the table in an open transaction; a
// waiter then queues for ACCESS EXCLUSIVE behind it. PostgreSQL's lock manager does not
// let a new request jump a queued conflicting one, so from then on every third session
// that needs the table (even for a plain SELECT) waits behind the waiter. The holder
// itself goes on freely: re-requesting a lock it already holds never queues. release()
// commits the holder's transaction (with whatever it did meanwhile); the waiter gets its
// lock and commits at once, and the parked sessions continue.
class TableGate {
 public:
  // `table` is schema-qualified; "ONLY t" gates a partitioned parent without its children.
  TableGate(pg::Connection& holder, pg::Connection& observer, const std::string& table)
      : holder_(holder),
        observer_(observer),
        waiter_(pg::Connection::connect(test_connect_options())) {
    holder_.exec("BEGIN");
    holder_.exec("SELECT 1 FROM " + table + " LIMIT 0");
    const int pid = waiter_.backend_pid();
    wait_.emplace(pid, [this, table] {
      waiter_.exec("BEGIN");
      waiter_.exec("LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE");
      waiter_.exec("COMMIT");
      return 0;
    });
    armed_ = eventually([&] { return waits_for_lock(observer_, pid, "relation"); });
  }
  TableGate(const TableGate&) = delete;
  TableGate& operator=(const TableGate&) = delete;

  // The waiter is queued: later users of the table will park behind it.
  bool armed() const { return armed_; }

  // Commits the holder's transaction and lets the waiter through. True when the waiter
  // finished (it holds its lock for no time at all).
  bool release() {
    holder_.exec("COMMIT");
    return wait_->finishes_within(std::chrono::seconds(10));
  }

 private:
  pg::Connection& holder_;
  pg::Connection& observer_;
  pg::Connection waiter_;  // declared before wait_: the call ends before the connection goes
  std::optional<BackgroundCall<int>> wait_;
  bool armed_ = false;
};

class RingsTest : public StorageTest {
 protected:
  // Every session of these tests runs with jit = off: with the server default (on), each
  // call of open_attempts() or rescue_stale_attempts() on a ring with unanalysed (fresh
  // or just truncated) partitions is JIT-compiled, over a second each (see
  // RingsTest.OpenAttemptScanIsNotJitCompiled), which would make these tests slow without
  // testing anything more. The runtime gate test keeps the server default.
  static constexpr const char* kNoJit = "SET jit = off";

  void SetUpSchema() override {
    StorageTest::SetUpSchema();
    conn().exec(kNoJit);
    admin_conn_.emplace(public_conn());
  }
  void TearDown() override {
    admin_conn_.reset();  // nothing of ours may hold a lock when the schema is dropped
    StorageTest::TearDown();
  }

  Admin admin() const { return Admin(schema_); }
  Connection& admin_conn() { return *admin_conn_; }
  // A public-API connection (Admin, transactional enqueue).
  static Connection public_conn() {
    auto c = Connection::connect(database_url());
    c.execute(kNoJit);
    return c;
  }
  // An internal connection with the test schema on its search_path.
  pg::Connection session() {
    auto c = connect_new();
    c.exec(kNoJit);
    return c;
  }
  std::string qualified(const std::string& table) const { return quoted_schema() + "." + table; }

  RingAction rotate(const std::string& ring) { return admin().rotate(admin_conn(), ring); }
  RingAction prune(const std::string& ring, bool carry = false,
                   std::chrono::seconds retention = std::chrono::hours(72)) {
    return admin().prune(admin_conn(), ring, carry, retention);
  }
  RingStatus ring_status(const std::string& ring) {
    for (auto& r : admin().storage_status(admin_conn())) {
      if (r.ring == ring) return r;
    }
    throw std::logic_error("no ring " + ring);
  }
  QueueCounts counts(const std::string& queue) { return admin().queue_counts(admin_conn(), queue); }

  // What MaintenanceLeader::rings does for one ring in one round (runtime::maintain_ring):
  // prune every sealed slot that holds nothing live, rotate, and when the ring is full
  // carry the oldest slot's live work forward and rotate again; after a rotation of the
  // queue ring, sweep its keep slot.
  struct Tick {
    int prunes = 0;
    int rotations = 0;
    std::int64_t carried = 0;
    std::int64_t swept = 0;
  };
  Tick maintain(const std::string& ring) {
    const auto t =
        runtime::maintain_ring(admin_conn(), admin(), ring, true, std::chrono::hours(72));
    return Tick{t.prunes, t.rotated ? 1 : 0, t.rows_carried, t.rows_swept};
  }

  static NewJob job(const std::string& queue, nlohmann::json args = nlohmann::json::object(),
                    std::optional<std::string> key = std::nullopt, int max_attempts = 25) {
    InsertOpts o = on_queue(queue);
    o.ordering_key = std::move(key);
    o.max_attempts = max_attempts;
    return NewJob("work", args, o);
  }
  JobId enqueue_one(const std::string& queue, std::optional<std::string> key = std::nullopt,
                    int max_attempts = 25) {
    return storage::insert_many(*store_, conn(),
                                std::vector{job(queue, {}, std::move(key), max_attempts)})
        .front();
  }
  // `n` jobs in one call, args {"i": first_i + k}.
  std::vector<JobId> enqueue(const std::string& queue, int n,
                             std::optional<std::string> key = std::nullopt, int first_i = 0) {
    std::vector<NewJob> jobs;
    for (int k = 0; k < n; ++k) jobs.push_back(job(queue, {{"i", first_i + k}}, key));
    return storage::insert_many(*store_, conn(), jobs);
  }

  std::vector<ClaimedEntry> claim(pg::Connection& c, const std::string& queue,
                                  int max_batch = 512) {
    QueueStorage::ClaimOptions o;
    o.max_batch = max_batch;
    return storage::consumer(*store_).claim(c, queue, o);
  }
  std::vector<ClaimedEntry> claim(const std::string& queue, int max_batch = 512) {
    return claim(conn(), queue, max_batch);
  }
  std::vector<CompletionResult> finish(const std::vector<ClaimedEntry>& entries,
                                       Outcome outcome = Outcome::kCompleted) {
    std::vector<Completion> cs;
    for (const auto& e : entries) cs.push_back(Completion::of(e, outcome));
    return storage::consumer(*store_).complete(conn(), cs);
  }
  // Claims and completes until the queue yields nothing; returns every entry claimed, in
  // claim order.
  std::vector<ClaimedEntry> drain(const std::string& queue, int max_batch = 512) {
    std::vector<ClaimedEntry> all;
    for (int round = 0; round < 100000; ++round) {
      auto got = claim(queue, max_batch);
      if (got.empty()) break;
      for (const auto& r : finish(got)) EXPECT_EQ(r.state, "completed");
      all.insert(all.end(), got.begin(), got.end());
    }
    return all;
  }

  std::int64_t ready_slot_of(JobId id) {
    return count("SELECT coalesce(min(ready_slot), -1) FROM ready_entries WHERE job_id = " +
                 std::to_string(id));
  }

 private:
  std::optional<Connection> admin_conn_;
};

// The counts as one line: compare two of them with EXPECT_EQ(describe(a), describe(b)).
inline std::string describe(const QueueCounts& c) {
  return "available " + std::to_string(c.available) + ", running " + std::to_string(c.running) +
         ", scheduled " + std::to_string(c.scheduled) + ", retryable " +
         std::to_string(c.retryable) + ", completed " + std::to_string(c.completed) + ", failed " +
         std::to_string(c.failed) + ", cancelled " + std::to_string(c.cancelled) + ", dlq " +
         std::to_string(c.dlq);
}

}  // namespace awa::testing
