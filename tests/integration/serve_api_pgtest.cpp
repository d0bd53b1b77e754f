// `awa serve`'s JSON API (issue 13): every endpoint against a seeded schema, bodies
// checked against the database, error codes, and nothing changed on error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "serve_support.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

TEST_F(ServeTest, QueuesListsExactCountsPerQueue) {
  const auto queues = get("/api/queues");
  ASSERT_TRUE(queues.is_array()) << queues.dump();
  ASSERT_EQ(queues.size(), 2U) << queues.dump();
  const auto& q1 = queues[0];
  EXPECT_EQ(q1["queue"], "q1");
  EXPECT_EQ(q1["paused"], false);
  // every_state(): one job per state; running counts the waiting one too.
  EXPECT_EQ(q1["available"], 1);
  EXPECT_EQ(q1["running"], 2);
  EXPECT_EQ(q1["scheduled"], 1);
  EXPECT_EQ(q1["retryable"], 1);
  EXPECT_EQ(q1["completed"], 1);
  EXPECT_EQ(q1["failed"], 1);
  EXPECT_EQ(q1["cancelled"], 2);
  EXPECT_EQ(q1["dlq"], 1);
  EXPECT_TRUE(q1["oldest_available_age_s"].is_number());
  const auto c = admin().queue_counts(ac(), "q1");
  EXPECT_EQ(q1["available"], c.available);
  EXPECT_EQ(q1["cancelled"], c.cancelled);
  const auto& sh = queues[1];
  EXPECT_EQ(sh["queue"], "sharded");
  EXPECT_EQ(sh["available"], 1 + 2 + 3 + 4);
  EXPECT_EQ(sh["settings"]["enqueue_shards"], 4);
  EXPECT_EQ(sh["settings"]["configured"], true);
  EXPECT_TRUE(sh["settings"]["deadline_ms"].is_null());
  EXPECT_TRUE(sh["settings"]["max_rate"].is_null());
  EXPECT_TRUE(sh["settings"]["global_max_workers"].is_null());
  // The limits as configured (docs/scheduling.md, "Rate limits and concurrency").
  QueueConfigChange limits;
  limits.max_rate = 20;
  limits.burst = 5;
  limits.global_max_workers = 3;
  admin().configure_queue(ac(), "q1", limits);
  const auto limited = get("/api/queues/q1");
  EXPECT_EQ(limited["settings"]["max_rate"], 20.0);
  EXPECT_EQ(limited["settings"]["burst"], 5);
  EXPECT_EQ(limited["settings"]["global_max_workers"], 3);

  // The same object for one queue, but for the age, which moves on between calls.
  auto one = get("/api/queues/sharded");
  auto expected = sh;
  one.erase("oldest_available_age_s");
  expected.erase("oldest_available_age_s");
  EXPECT_EQ(one, expected);
}

TEST_F(ServeTest, ShardsShowEveryLaneWithItsAvailableRows) {
  const auto s = get("/api/queues/sharded/shards");
  EXPECT_EQ(s["queue"], "sharded");
  EXPECT_EQ(s["enqueue_shards"], 4);
  ASSERT_EQ(s["lanes"].size(), 4U) << s.dump();
  const auto lanes = admin().queue_shards(ac(), "sharded");
  ASSERT_EQ(lanes.size(), 4U);
  for (int shard = 0; shard < 4; ++shard) {
    const auto& l = s["lanes"][static_cast<std::size_t>(shard)];
    EXPECT_EQ(l["priority"], 2);
    EXPECT_EQ(l["enqueue_shard"], shard);
    EXPECT_EQ(l["available"], shard + 1);
    EXPECT_EQ(l["lag"], shard + 1);
    EXPECT_EQ(l["enqueue_cursor"], lanes[static_cast<std::size_t>(shard)].enqueue_cursor);
    EXPECT_EQ(l["claim_cursor"], lanes[static_cast<std::size_t>(shard)].claim_cursor);
  }
  auto c = client();
  auto r = c.Get("/api/queues/nosuch/shards");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_THAT(body(r)["error"].get<std::string>(), HasSubstr("queue nosuch not found"));
  r = c.Get("/api/queues/bad!name/shards");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(body(r)["error"].get<std::string>(), HasSubstr("invalid queue name"));
}

TEST_F(ServeTest, JobsFilterAndPaginate) {
  auto j = get("/api/jobs?queue=q1&state=failed");
  ASSERT_EQ(j["jobs"].size(), 1U) << j.dump();
  EXPECT_EQ(j["jobs"][0]["id"], ids_["failed"]);
  EXPECT_EQ(j["jobs"][0]["kind"], "failing");
  EXPECT_TRUE(j["next_after"].is_null());

  j = get("/api/jobs?kind=keyed&limit=4");
  ASSERT_EQ(j["jobs"].size(), 4U);
  const auto after = j["next_after"].get<JobId>();
  EXPECT_EQ(after, j["jobs"][3]["id"].get<JobId>());
  j = get("/api/jobs?kind=keyed&limit=100&after=" + std::to_string(after));
  EXPECT_EQ(j["jobs"].size(), 6U);
  EXPECT_GT(j["jobs"][0]["id"].get<JobId>(), after);

  auto c = client();
  for (const char* bad : {"/api/jobs?state=sleeping", "/api/jobs?limit=0", "/api/jobs?limit=10001",
                          "/api/jobs?after=x", "/api/jobs?color=red", "/api/jobs?queue=a%20b",
                          "/api/jobs?limit=1&limit=2"}) {
    auto r = c.Get(bad);
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 400) << bad << ": " << r->body;
    EXPECT_TRUE(body(r)["error"].is_string()) << bad;
  }
}

TEST_F(ServeTest, JobShowsItsErrorsAndTimeline) {
  const auto j = get("/api/jobs/" + std::to_string(ids_["failed"]));
  EXPECT_EQ(j["id"], ids_["failed"]);
  EXPECT_EQ(j["state"], "failed");
  ASSERT_EQ(j["errors"].size(), 1U) << j.dump();
  EXPECT_EQ(j["errors"][0]["error"], "boom");
  EXPECT_EQ(j["errors"][0]["attempt"], 1);
  const auto d = admin().job(ac(), ids_["failed"]);
  ASSERT_TRUE(d);
  EXPECT_EQ(j["timeline"].size(), d->timeline.size());
  const auto w = get("/api/jobs/" + std::to_string(ids_["waiting_external"]));
  EXPECT_EQ(w["progress"], nlohmann::json({{"step", 3}}));

  auto c = client();
  auto r = c.Get("/api/jobs/abc");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = c.Get("/api/jobs/-3");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = c.Get("/api/jobs/987654321");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_THAT(body(r)["error"].get<std::string>(), HasSubstr("job 987654321 not found"));
}

TEST_F(ServeTest, PauseAndResumeAKnownQueueOnly) {
  auto [status, j] = post("/api/queues/q1/pause");
  EXPECT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["paused"], true);
  EXPECT_TRUE(admin().queue_summary(ac(), "q1").settings.paused);
  std::tie(status, j) = post("/api/queues/q1/resume");
  EXPECT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["paused"], false);
  EXPECT_FALSE(admin().queue_summary(ac(), "q1").settings.paused);

  // A typo must not create a paused queue: 404, and the schema still knows two queues.
  std::tie(status, j) = post("/api/queues/q2/pause");
  EXPECT_EQ(status, 404) << j.dump();
  EXPECT_FALSE(admin().queue_summary(ac(), "q2").known);
  std::tie(status, j) = post("/api/queues/bad!name/pause");
  EXPECT_EQ(status, 400) << j.dump();
  EXPECT_EQ(admin().list_queues(ac()).size(), 2U);
}

TEST_F(ServeTest, CancelAndRetryJobs) {
  auto [status, j] = post("/api/jobs/" + std::to_string(ids_["available"]) + "/cancel");
  EXPECT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["state"], "available");
  EXPECT_EQ(state_of(ids_["available"]), "cancelled");

  std::tie(status, j) = post("/api/jobs/" + std::to_string(ids_["completed"]) + "/cancel");
  EXPECT_EQ(status, 409) << j.dump();
  EXPECT_EQ(state_of(ids_["completed"]), "completed");
  std::tie(status, j) = post("/api/jobs/987654321/cancel");
  EXPECT_EQ(status, 404) << j.dump();
  std::tie(status, j) = post("/api/jobs/x1/cancel");
  EXPECT_EQ(status, 400) << j.dump();

  std::tie(status, j) = post("/api/jobs/" + std::to_string(ids_["failed"]) + "/retry");
  EXPECT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["outcome"], "retried");
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(state_of(ids_["failed"]), "available");

  std::tie(status, j) = post("/api/jobs/" + std::to_string(ids_["running"]) + "/retry");
  EXPECT_EQ(status, 409) << j.dump();
  EXPECT_EQ(j["outcome"], "not_retryable");
  EXPECT_EQ(state_of(ids_["running"]), "running");
  std::tie(status, j) = post("/api/jobs/987654321/retry");
  EXPECT_EQ(status, 404) << j.dump();
}

TEST_F(ServeTest, DlqListRetryAndPurgeNeedASelection) {
  const auto list = get("/api/dlq?queue=q1");
  ASSERT_EQ(list.size(), 1U) << list.dump();
  EXPECT_EQ(list[0]["id"], ids_["dlq"]);
  EXPECT_EQ(list[0]["reason"], "fatal");
  EXPECT_EQ(list[0]["errors"][0]["error"], "fatal");
  EXPECT_EQ(get("/api/dlq?kind=nosuch").size(), 0U);

  // No selection: refused, the dead letter stays.
  auto [status, j] = post("/api/dlq/retry");
  EXPECT_EQ(status, 400) << j.dump();
  std::tie(status, j) = post("/api/dlq/purge", R"({"all": false})");
  EXPECT_EQ(status, 400) << j.dump();
  EXPECT_EQ(state_of(ids_["dlq"]), "dlq");
  std::tie(status, j) = post("/api/dlq/retry?id=987654321");
  EXPECT_EQ(status, 404) << j.dump();

  std::tie(status, j) = post("/api/dlq/retry", R"({"id": )" + std::to_string(ids_["dlq"]) + "}");
  EXPECT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["retried"], nlohmann::json::array({ids_["dlq"]}));
  EXPECT_EQ(state_of(ids_["dlq"]), "available");
  EXPECT_EQ(get("/api/dlq").size(), 0U);
  std::tie(status, j) = post("/api/dlq/purge?all=true");
  EXPECT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["purged"], 0);
}

TEST_F(ServeTest, StorageAndHealthMatchTheAdminApi) {
  const auto s = get("/api/storage");
  const auto rings = admin().storage_status(ac());
  ASSERT_EQ(s["rings"].size(), rings.size());
  for (std::size_t i = 0; i < rings.size(); ++i) {
    EXPECT_EQ(s["rings"][i]["ring"], rings[i].ring);
    EXPECT_EQ(s["rings"][i]["current_slot"], rings[i].current_slot);
    ASSERT_EQ(s["rings"][i]["slots"].size(), rings[i].slots.size());
    for (std::size_t k = 0; k < rings[i].slots.size(); ++k)
      EXPECT_EQ(s["rings"][i]["slots"][k]["rows"], rings[i].slots[k].rows);
  }
  // No worker runs: no leader, so unhealthy (503), with the reason.
  auto c = client();
  auto r = c.Get("/api/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  const auto h = body(r);
  EXPECT_EQ(h["healthy"], false);
  EXPECT_EQ(h["leader_present"], false);
  EXPECT_FALSE(h["problems"].empty());
  EXPECT_EQ(h["schema_version"], h["expected_schema_version"]);
}

TEST_F(ServeTest, IndexPageAndUnknownEndpoints) {
  auto c = client();
  auto r = c.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->body, HasSubstr("<main id=\"page\""));
  EXPECT_EQ(r->get_header_value("Content-Security-Policy").rfind("default-src 'self'", 0), 0U);
  // Every script and stylesheet the shell names is served from the binary, with its type.
  const std::regex asset(R"re((?:src|href)="(/assets/[^"]+)")re");
  int assets = 0;
  for (std::sregex_iterator it(r->body.begin(), r->body.end(), asset), end; it != end; ++it) {
    const std::string path = (*it)[1];
    const auto a = c.Get(path);
    ASSERT_TRUE(a) << path;
    EXPECT_EQ(a->status, 200) << path;
    EXPECT_FALSE(a->body.empty()) << path;
    const std::string type = a->get_header_value("Content-Type");
    if (path.ends_with(".js")) {
      EXPECT_EQ(type, "text/javascript; charset=utf-8") << path;
    } else if (path.ends_with(".css")) {
      EXPECT_EQ(type, "text/css; charset=utf-8") << path;
    }
    ++assets;
  }
  EXPECT_GE(assets, 10);
  // Each page path answers with the same shell; the script picks the page.
  for (const char* page : {"/queues/q1", "/jobs", "/jobs/7", "/dlq", "/storage", "/login"}) {
    const auto p = c.Get(page);
    ASSERT_TRUE(p) << page;
    EXPECT_EQ(p->status, 200) << page;
    EXPECT_EQ(p->body, r->body) << page;
  }
  for (const char* missing : {"/assets/nothing.js", "/assets/index.html", "/queues/a/b"}) {
    const auto m = c.Get(missing);
    ASSERT_TRUE(m) << missing;
    EXPECT_EQ(m->status, 404) << missing;
  }
  r = c.Get("/api/info");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(body(r)["read_only"], false);
  EXPECT_EQ(body(r)["token_required"], false);
  EXPECT_EQ(body(r)["schema"], schema_);
  r = c.Get("/api/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_THAT(body(r)["error"].get<std::string>(), HasSubstr("no such endpoint"));
}

}  // namespace
}  // namespace awa::testing
