// `awa serve`'s rate endpoints (issue 13): GET /api/throughput and the claims of GET
// /api/queues/{queue}/shards. The server reads its own now(), so the tests move end and
// claim times to fixed instants minutes away from any window edge, and place them in
// buckets from the `start` each response names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serve_support.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;
using Series = std::vector<std::int64_t>;

class ServeRatesTest : public ServeTest {
 protected:
  // now() + `offset` as timestamptz text: an instant the tests reuse.
  std::string instant(const std::string& offset) {
    return conn().exec("SELECT (now() + interval '" + offset + "')::text").get<std::string>(0, 0);
  }
  // The bucket of `at` in a window whose first minute is `start` (ISO 8601).
  int bucket(const std::string& at, const std::string& start) {
    return conn()
        .query(
            "SELECT (extract(epoch FROM date_trunc('minute', $1::timestamptz) - "
            "$2::timestamptz) / 60)::int",
            at, start)
        .get<std::int32_t>(0, 0);
  }
  static Series dense(std::size_t n, const std::map<int, std::int64_t>& set) {
    Series s(n, 0);
    for (const auto& [i, v] : set) s.at(static_cast<std::size_t>(i)) += v;
    return s;
  }
  void expect_400(const std::string& path, const std::string& message) {
    auto c = client();
    auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 400) << path << ": " << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json") << path;
    EXPECT_THAT(body(r)["error"].get<std::string>(), HasSubstr(message)) << path;
  }
};

TEST_F(ServeRatesTest, ThroughputGivesCompletedAndFailedPerMinute) {
  // q1 (every_state) ended one job completed, one failed, one in the DLQ; "sharded" ended
  // none and is not listed.
  const auto done_at = instant("-5 minutes");
  const auto failed_at = instant("-7 minutes");
  const auto dlq_at = instant("-20 minutes");
  conn().query("UPDATE claim_closures SET closed_at = $1::timestamptz WHERE outcome = 'completed'",
               done_at);
  conn().query("UPDATE done_entries SET finished_at = $1::timestamptz WHERE job_id = $2", failed_at,
               ids_["failed"]);
  conn().query("UPDATE done_entries SET finished_at = $1::timestamptz WHERE job_id = $2", dlq_at,
               ids_["dlq"]);

  const auto t = get("/api/throughput");
  EXPECT_EQ(t["minutes"], 60);
  const auto start = t["start"].get<std::string>();
  EXPECT_EQ(start.size(), 20U) << start;  // "2026-11-30T22:37:00Z"
  EXPECT_EQ(start.substr(16), ":00Z") << start;
  ASSERT_EQ(t["queues"].size(), 1U) << t.dump();
  const auto& q1 = t["queues"][0];
  EXPECT_EQ(q1["queue"], "q1");
  EXPECT_EQ(q1["completed"].get<Series>(), dense(60, {{bucket(done_at, start), 1}}));
  EXPECT_EQ(q1["failed"].get<Series>(),
            dense(60, {{bucket(failed_at, start), 1}, {bucket(dlq_at, start), 1}}));

  // The same through the filter; a window of 4 minutes holds none of these ends.
  const auto only = get("/api/throughput?queue=q1&minutes=30");
  EXPECT_EQ(only["minutes"], 30);
  ASSERT_EQ(only["queues"].size(), 1U) << only.dump();
  const auto start30 = only["start"].get<std::string>();
  EXPECT_EQ(only["queues"][0]["failed"].get<Series>(),
            dense(30, {{bucket(failed_at, start30), 1}, {bucket(dlq_at, start30), 1}}));
  const auto recent = get("/api/throughput?minutes=4");
  EXPECT_EQ(recent["queues"], nlohmann::json::array());
  EXPECT_EQ(get("/api/throughput?queue=sharded")["queues"], nlohmann::json::array());
  EXPECT_EQ(get("/api/throughput?queue=nosuch&minutes=1440")["queues"], nlohmann::json::array());

  expect_400("/api/throughput?minutes=0", "expected an integer in 1..1440");
  expect_400("/api/throughput?minutes=1441", "expected an integer in 1..1440");
  expect_400("/api/throughput?minutes=abc", "expected an integer in 1..1440");
  expect_400("/api/throughput?queue=bad!name", "invalid queue name");
  expect_400("/api/throughput?window=5", "unknown parameter");
}

TEST_F(ServeRatesTest, ShardsGiveClaimsPerLaneAndPerShard) {
  // "sharded" holds s + 1 jobs on shard s at priority 2; one more at priority 1 on shard 3.
  enqueue(opts("sharded", 1, key_on_shard(4, 3)), "keyed");
  std::size_t claimed = 0;
  for (int i = 0; i < 20 && claimed < 11; ++i) claimed += claim("sharded", 4).size();
  ASSERT_EQ(claimed, 11U);
  const auto recent = instant("-2 minutes");
  const auto old = instant("-30 minutes");  // outside the default 15 minutes
  const auto set = [&](const std::string& at, int shard) {
    conn().query(
        "UPDATE claim_batches SET claimed_at = $1::timestamptz "
        "WHERE queue_id = queue_id_of('sharded') AND enqueue_shard = $2",
        at, shard);
  };
  const auto shard2_at = instant("-6 minutes");
  set(recent, 0);
  set(old, 1);
  set(shard2_at, 2);
  set(recent, 3);

  const auto s = get("/api/queues/sharded/shards");
  EXPECT_EQ(s["minutes"], 15);
  const auto start = s["start"].get<std::string>();
  const int r = bucket(recent, start);
  ASSERT_EQ(s["lanes"].size(), 5U) << s.dump();
  const auto lane = [&](std::size_t i, int priority, int shard, const Series& claims) {
    const auto& l = s["lanes"][i];
    EXPECT_EQ(l["priority"], priority) << i;
    EXPECT_EQ(l["enqueue_shard"], shard) << i;
    EXPECT_EQ(l["claims"].get<Series>(), claims) << i;
    EXPECT_EQ(l["available"], 0) << i;
  };
  lane(0, 1, 3, dense(15, {{r, 1}}));
  lane(1, 2, 0, dense(15, {{r, 1}}));
  lane(2, 2, 1, dense(15, {}));
  lane(3, 2, 2, dense(15, {{bucket(shard2_at, start), 3}}));
  lane(4, 2, 3, dense(15, {{r, 4}}));
  const nlohmann::json per_shard = {
      {{"enqueue_shard", 0}, {"claims", dense(15, {{r, 1}})}},
      {{"enqueue_shard", 1}, {"claims", dense(15, {})}},
      {{"enqueue_shard", 2}, {"claims", dense(15, {{bucket(shard2_at, start), 3}})}},
      {{"enqueue_shard", 3}, {"claims", dense(15, {{r, 5}})}}};
  EXPECT_EQ(s["shard_claims"], per_shard);

  // An hour reaches shard 1's claims. Fewer shards now: the lanes of shards 2 and 3 still
  // exist, and so do their entries.
  admin().set_enqueue_shards(ac(), "sharded", 2);
  const auto h = get("/api/queues/sharded/shards?minutes=60");
  EXPECT_EQ(h["minutes"], 60);
  EXPECT_EQ(h["enqueue_shards"], 2);
  const auto hstart = h["start"].get<std::string>();
  EXPECT_EQ(h["lanes"][2]["claims"].get<Series>(), dense(60, {{bucket(old, hstart), 2}}));
  ASSERT_EQ(h["shard_claims"].size(), 4U) << h.dump();
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(h["shard_claims"][static_cast<std::size_t>(i)]["enqueue_shard"], i);
  EXPECT_EQ(h["shard_claims"][3]["claims"].get<Series>(), dense(60, {{bucket(recent, hstart), 5}}));

  // q1's one lane: every_state() claimed 6 attempts moments ago.
  const auto q1 = get("/api/queues/q1/shards?minutes=60");
  ASSERT_EQ(q1["lanes"].size(), 1U) << q1.dump();
  const auto sum = [](const nlohmann::json& a) {
    std::int64_t n = 0;
    for (const auto& v : a) n += v.get<std::int64_t>();
    return n;
  };
  EXPECT_EQ(sum(q1["lanes"][0]["claims"]), 6);
  ASSERT_EQ(q1["shard_claims"].size(), 1U) << q1.dump();
  EXPECT_EQ(q1["shard_claims"][0]["enqueue_shard"], 0);
  EXPECT_EQ(q1["shard_claims"][0]["claims"], q1["lanes"][0]["claims"]);

  expect_400("/api/queues/sharded/shards?minutes=0", "expected an integer in 1..1440");
  expect_400("/api/queues/sharded/shards?minutes=abc", "expected an integer in 1..1440");
  expect_400("/api/queues/sharded/shards?minutes=1441", "expected an integer in 1..1440");
  auto c = client();
  auto nf = c.Get("/api/queues/nosuch/shards?minutes=5");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  EXPECT_THAT(body(nf)["error"].get<std::string>(), HasSubstr("queue nosuch not found"));
}

}  // namespace
}  // namespace awa::testing
