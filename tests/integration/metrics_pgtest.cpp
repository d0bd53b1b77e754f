// The engine's metrics against a real claim path: AWA's ADR-025 awa.job.claimed per shard,
// enqueue/completion counters, queue gauges and the /metrics endpoint.
//
// The registry is process-wide and every test in this binary shares it, so each test uses
// a queue named after its private schema and compares deltas.
#include <httplib.h>

#include <map>
#include <optional>

#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

constexpr int kShards = 4;

class MetricsTest : public StorageTest {
 protected:
  void SetUpSchema() override {
    StorageTest::SetUpSchema();
    // The schema name's unique tail (pid, counter, random): short enough for the queue's
    // NOTIFY channel "awa:<queue>", which PostgreSQL caps at 63 bytes.
    queue_ = "m" + schema_.substr(schema_.size() > 24 ? schema_.size() - 24 : 0);
    set_shards(queue_, kShards);
  }

  // Enqueues `n` jobs in small batches so the rotor spreads them over the shards.
  void enqueue(int n) {
    for (int done = 0; done < n; done += 5) {
      std::vector<NewJob> jobs(static_cast<std::size_t>(std::min(5, n - done)),
                               NewJob("work", nlohmann::json::object(), on_queue(queue_)));
      storage::insert_many(*store_, conn(), jobs);
    }
  }

  // Claims until the queue is empty; returns the claimed entries.
  std::vector<ClaimedEntry> claim_all() {
    std::vector<ClaimedEntry> all;
    QueueStorage::ClaimOptions o;
    o.max_batch = 7;
    for (;;) {
      auto got = storage::consumer(*store_).claim(conn(), queue_, o);
      if (got.empty()) return all;
      all.insert(all.end(), got.begin(), got.end());
    }
  }

  std::uint64_t claimed(int shard) {
    return metrics::engine().job_claimed.with({queue_, std::to_string(shard)}).value();
  }
  std::uint64_t completed(const std::string& state) {
    return metrics::engine().job_completed.with({queue_, state}).value();
  }

  std::string queue_;
};

// The value of the sample line `prefix <value>` in an exposition, if present.
std::optional<double> sample(const std::string& text, const std::string& prefix) {
  const auto at = text.find("\n" + prefix + " ");
  if (at == std::string::npos) return std::nullopt;
  return std::stod(text.substr(at + 1 + prefix.size() + 1));
}

std::string claimed_series(const std::string& queue, int shard) {
  return "awa_job_claimed_total{queue=\"" + queue + "\",awa_enqueue_shard=\"" +
         std::to_string(shard) + "\"}";
}

TEST_F(MetricsTest, JobClaimedCountsEveryClaimOnItsShard) {
  std::map<int, std::uint64_t> before;
  for (int s = 0; s < kShards; ++s) before[s] = claimed(s);
  const auto enqueued_before = metrics::engine().job_enqueued.with({queue_}).value();

  enqueue(200);
  const auto entries = claim_all();
  ASSERT_EQ(entries.size(), 200u);

  std::map<int, std::uint64_t> per_shard;
  for (const auto& e : entries) ++per_shard[e.enqueue_shard];
  ASSERT_EQ(per_shard.size(), static_cast<std::size_t>(kShards)) << "the rotor spreads batches";
  for (int s = 0; s < kShards; ++s) {
    EXPECT_EQ(claimed(s) - before[s], per_shard[s]) << "shard " << s;
  }
  EXPECT_EQ(metrics::engine().job_enqueued.with({queue_}).value() - enqueued_before, 200u);

  // The exposition carries the same per-shard numbers under the label awa_enqueue_shard.
  const auto text = metrics::default_registry().expose();
  for (int s = 0; s < kShards; ++s) {
    EXPECT_EQ(sample(text, claimed_series(queue_, s)), static_cast<double>(claimed(s)))
        << "shard " << s;
  }
  EXPECT_TRUE(sample(text, "awa_claim_duration_seconds_count{queue=\"" + queue_ + "\"}"));
}

TEST_F(MetricsTest, JobCompletedCountsEndStatesAndStaleCompletions) {
  const auto completed_before = completed("completed");
  const auto retried_before = completed("retried");
  const auto stale_before = completed("stale");
  enqueue(10);
  const auto entries = claim_all();
  ASSERT_EQ(entries.size(), 10u);
  std::vector<Completion> cs;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    cs.push_back(Completion::of(entries[i], i < 7 ? Outcome::kCompleted : Outcome::kRetry,
                                i < 7 ? "" : "boom"));
  }
  storage::consumer(*store_).complete(conn(), cs);
  EXPECT_EQ(completed("completed") - completed_before, 7u);
  EXPECT_EQ(completed("retried") - retried_before, 3u);
  // The same attempts again: all stale, and counted as such.
  storage::consumer(*store_).complete(conn(), cs);
  EXPECT_EQ(completed("stale") - stale_before, 10u);
}

TEST_F(MetricsTest, RefreshQueueGaugesMirrorsTheLanes) {
  enqueue(40);
  auto pc = Connection::connect(database_url());
  metrics::refresh_queue_gauges(pc, schema_, {queue_});
  const auto lanes = Admin(schema_).queue_shards(pc, queue_);
  ASSERT_EQ(lanes.size(), static_cast<std::size_t>(kShards));
  double available = 0;
  for (const auto& l : lanes) {
    const auto p = std::to_string(l.priority);
    const auto s = std::to_string(l.enqueue_shard);
    EXPECT_EQ(metrics::engine().queue_available.with({queue_, p, s}).value(),
              static_cast<double>(l.available));
    EXPECT_EQ(metrics::engine().queue_lag.with({queue_, p, s}).value(), static_cast<double>(l.lag));
    available += metrics::engine().queue_available.with({queue_, p, s}).value();
  }
  EXPECT_EQ(available, 40.0);

  // Drained lanes go back to zero on the next refresh.
  ASSERT_EQ(claim_all().size(), 40u);
  metrics::refresh_queue_gauges(pc, schema_, {queue_});
  for (const auto& l : lanes) {
    EXPECT_EQ(metrics::engine()
                  .queue_available
                  .with({queue_, std::to_string(l.priority), std::to_string(l.enqueue_shard)})
                  .value(),
              0.0);
  }
}

TEST_F(MetricsTest, ServerServesPerShardClaimsOverHttp) {
  enqueue(60);
  std::map<int, std::uint64_t> per_shard;
  for (const auto& e : claim_all()) ++per_shard[e.enqueue_shard];

  metrics::Server server("127.0.0.1", 0);
  server.start();
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(5));

  const auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(res->body.find("# TYPE awa_job_claimed_total counter\n"), std::string::npos);
  for (const auto& [shard, n] : per_shard) {
    // This queue is new to the process, so its series hold exactly this test's claims.
    EXPECT_EQ(sample(res->body, claimed_series(queue_, shard)), static_cast<double>(n))
        << "shard " << shard;
  }

  const auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  EXPECT_EQ(client.Get("/nope")->status, 404);

  const int port = server.port();
  server.stop();
  server.stop();  // idempotent
  httplib::Client after("127.0.0.1", port);
  after.set_connection_timeout(std::chrono::seconds(1));
  EXPECT_FALSE(after.Get("/healthz")) << "nothing listens after stop()";
}

TEST_F(MetricsTest, ServerStopsRightAfterStart) {
  // Regression guard: httplib ignores stop() until its accept loop runs; start() must not
  // return before that, or this stop() would hang.
  for (int i = 0; i < 20; ++i) {
    metrics::Server server("127.0.0.1", 0);
    server.start();
    server.stop();
  }
}

TEST_F(MetricsTest, ServerReportsAPortItCannotBind) {
  // Regression guard: httplib's default socket options set SO_REUSEPORT, so a second
  // server bound the same port silently and the kernel split scrapes between the two.
  metrics::Server first("127.0.0.1", 0);
  first.start();
  metrics::Server second("127.0.0.1", first.port());
  EXPECT_THROW(second.start(), Error);
}

}  // namespace
}  // namespace awa::testing
