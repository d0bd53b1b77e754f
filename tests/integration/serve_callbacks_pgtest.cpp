// awa serve's POST /api/callbacks/{id}/complete|fail|heartbeat (docs/api.md, "Callbacks"):
// accepted only when signed with the callback secret; a refused request changes nothing.
#include <chrono>
#include <string>

#include "awa/callback.hpp"
#include "serve_support.hpp"

namespace awa::testing {
namespace {

class ServeCallbackTest : public ServeTest {
 protected:
  void SetUp() override {
    ServeTest::SetUp();
    signed_ = &another({.callbacks = true});
  }

  // A job parked waiting for a callback; returns the callback id.
  std::string waiting_job(const std::string& queue, JobId* id = nullptr) {
    const JobId job = enqueue(queue);
    const auto e = claim_one(queue, job);
    const auto cb = storage::consumer(*store_).callback(conn(), e, std::chrono::hours(1), true);
    EXPECT_TRUE(cb);
    if (id) *id = job;
    return cb.value_or("");
  }

  static std::int64_t now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // POSTs `body` to `path` on `server`, signed with `secret` at `ts` (unset: unsigned).
  std::pair<int, nlohmann::json> call(const serve::Server& server, const std::string& path,
                                      const std::string& body,
                                      std::optional<std::string> secret = kCallbackSecret,
                                      std::optional<std::int64_t> ts = std::nullopt) {
    httplib::Headers h;
    if (secret) {
      const auto t = ts.value_or(now_s());
      h.emplace(kCallbackTimestampHeader, std::to_string(t));
      h.emplace(kCallbackSignatureHeader, callback_signature(*secret, t, body));
    }
    auto c = client(server);
    auto r = c.Post(path, h, body, "application/json");
    if (!r) throw std::runtime_error("no response: " + path);
    return {r->status, nlohmann::json::parse(r->body)};
  }

  serve::Server* signed_ = nullptr;
};

TEST_F(ServeCallbackTest, ASignedCallbackCompletesTheJobAndARepeatIsStale) {
  JobId id = 0;
  const auto cb = waiting_job("cbq", &id);
  const std::string path = "/api/callbacks/" + cb + "/complete";
  auto [status, body] = call(*signed_, path, "{}");
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(body["job_id"], id);
  EXPECT_EQ(body["state"], "completed");
  EXPECT_EQ(state_of(id), "completed");
  std::tie(status, body) = call(*signed_, path, "{}");
  EXPECT_EQ(status, 409) << body;
  EXPECT_EQ(body["stale"], true);
  EXPECT_EQ(state_of(id), "completed");
}

TEST_F(ServeCallbackTest, ACompletionsSignedResultIsKeptOnTheJob) {
  JobId id = 0;
  const auto cb = waiting_job("cbq", &id);
  const std::string path = "/api/callbacks/" + cb + "/complete";
  // Anything but {"result": <JSON>} is refused before the database.
  auto [status, body] = call(*signed_, path, R"({"result": 1, "note": "x"})");
  EXPECT_EQ(status, 400) << body;
  std::tie(status, body) = call(*signed_, path, R"([1, 2])");
  EXPECT_EQ(status, 400) << body;
  EXPECT_EQ(state_of(id), "waiting");
  std::tie(status, body) =
      call(*signed_, path, R"({"result": {"shipment": "DHL-42", "items": [1, 2]}})");
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(body["state"], "completed");
  const nlohmann::json want = {{"shipment", "DHL-42"}, {"items", {1, 2}}};
  const auto d = admin().job(ac(), id);
  ASSERT_TRUE(d && d->result_json);
  EXPECT_EQ(nlohmann::json::parse(*d->result_json), want);
  // The job's API shows it too.
  EXPECT_EQ(get("/api/jobs/" + std::to_string(id))["result"], want);
}

TEST_F(ServeCallbackTest, FailAndHeartbeat) {
  JobId id = 0;
  const auto cb = waiting_job("cbq", &id);
  auto [status, body] =
      call(*signed_, "/api/callbacks/" + cb + "/heartbeat", R"({"timeout_s": 7200})");
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(body["job_id"], id);
  EXPECT_EQ(state_of(id), "waiting");
  std::tie(status, body) = call(*signed_, "/api/callbacks/" + cb + "/fail",
                                R"({"error": "rejected upstream", "retryable": false})");
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(body["state"], "failed");
  const auto d = admin().job(ac(), id);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->summary.state, "failed");
  ASSERT_FALSE(d->errors.empty());
  EXPECT_EQ(d->errors.back().error, "rejected upstream");
  std::tie(status, body) = call(*signed_, "/api/callbacks/" + cb + "/heartbeat", "{}");
  EXPECT_EQ(status, 409) << body;
}

TEST_F(ServeCallbackTest, UnsignedOrWronglySignedRequestsAreRefusedAndChangeNothing) {
  JobId id = 0;
  const auto cb = waiting_job("cbq", &id);
  const std::string path = "/api/callbacks/" + cb + "/complete";
  // Unsigned.
  auto [status, body] = call(*signed_, path, "{}", std::nullopt);
  EXPECT_EQ(status, 401) << body;
  // Another secret.
  std::tie(status, body) = call(*signed_, path, "{}", std::string("not-the-secret-0123456"));
  EXPECT_EQ(status, 401) << body;
  EXPECT_EQ(body["error"], "callback signature does not match the body");
  // A signature over another body.
  {
    const auto t = now_s();
    httplib::Headers h{{kCallbackTimestampHeader, std::to_string(t)},
                       {kCallbackSignatureHeader, callback_signature(kCallbackSecret, t, "{}")}};
    auto c = client(*signed_);
    auto r = c.Post("/api/callbacks/" + cb + "/fail", h, R"({"error":"x"})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << r->body;
  }
  // Replayed outside the window.
  std::tie(status, body) = call(*signed_, path, "{}", kCallbackSecret, now_s() - 301);
  EXPECT_EQ(status, 401) << body;
  // The session token is not a callback credential, and the dashboard server (no
  // callback secret) has no callback endpoint.
  {
    auto c = client();
    auto r = c.Post(path, csrf(), "{}", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << r->body;
  }
  // A read-only server refuses a correctly signed callback.
  auto& ro = another({.read_only = true, .callbacks = true});
  std::tie(status, body) = call(ro, path, "{}");
  EXPECT_EQ(status, 403) << body;
  EXPECT_EQ(state_of(id), "waiting");
  // A malformed id: 400 from the API's validation.
  std::tie(status, body) = call(*signed_, "/api/callbacks/nope/complete", "{}");
  EXPECT_EQ(status, 400) << body;
  // After all that, the right request still works.
  std::tie(status, body) = call(*signed_, path, "{}");
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(state_of(id), "completed");
}

}  // namespace
}  // namespace awa::testing
