// awa serve's POST /api/callbacks/{id}/complete|fail|heartbeat (docs/api.md, "Callbacks"):
// accepted only when signed with the callback secret, over the whole request (method,
// path, query, body), once; a refused request changes nothing.
#include <chrono>
#include <string>
#include <thread>

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

  // POSTs `body` to `path` (with any query) on `server`, signed with `secret` at `ts`
  // (unset: unsigned).
  std::pair<int, nlohmann::json> call(const serve::Server& server, const std::string& path,
                                      const std::string& body,
                                      std::optional<std::string> secret = kCallbackSecret,
                                      std::optional<std::int64_t> ts = std::nullopt) {
    httplib::Headers h;
    if (secret) {
      const auto t = ts.value_or(now_s());
      h.emplace(kCallbackTimestampHeader, std::to_string(t));
      h.emplace(kCallbackSignatureHeader, sign(*secret, t, path, body));
    }
    auto c = client(server);
    auto r = c.Post(path, h, body, "application/json");
    if (!r) throw std::runtime_error("no response: " + path);
    return {r->status, nlohmann::json::parse(r->body)};
  }

  // The signature a sender puts on POST `target` (path and query) with `body`.
  static std::string sign(const std::string& secret, std::int64_t ts, const std::string& target,
                          const std::string& body) {
    return callback_signature(secret, ts, callback_request("POST", target, body));
  }
  // The headers of a request signed at `ts`: what a sender sends and an eavesdropper
  // captures.
  static httplib::Headers signed_headers(std::int64_t ts, const std::string& target,
                                         const std::string& body) {
    return {{kCallbackTimestampHeader, std::to_string(ts)},
            {kCallbackSignatureHeader, sign(kCallbackSecret, ts, target, body)}};
  }
  // POSTs `body` to `target` with exactly `headers` (a captured request, replayed).
  static std::pair<int, nlohmann::json> send(const serve::Server& server, const std::string& target,
                                             const httplib::Headers& headers,
                                             const std::string& body,
                                             const std::string& content_type = "application/json") {
    auto c = client(server);
    auto r = c.Post(target, headers, body, content_type.c_str());
    if (!r) throw std::runtime_error("no response: " + target);
    return {r->status, nlohmann::json::parse(r->body)};
  }
  // The attempt's callback timeout and heartbeat, as text (microseconds).
  std::string callback_times(const std::string& cb) {
    return conn()
        .query(
            "SELECT callback_timeout_at::text || ' ' || heartbeat_at::text FROM leases "
            "WHERE callback_id = $1::uuid",
            cb)
        .get<std::string>(0, 0);
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
  // A new request (signed anew, at another second) finds the attempt ended: stale.
  std::tie(status, body) = call(*signed_, path, "{}", kCallbackSecret, now_s() + 1);
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
  EXPECT_EQ(state_of(id), "waiting_external");
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
  EXPECT_EQ(state_of(id), "waiting_external");
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
  EXPECT_NE(body["error"].get<std::string>().find("callback signature does not match the request"),
            std::string::npos)
      << body;
  // A signature over another body.
  {
    const auto t = now_s();
    const std::string fail = "/api/callbacks/" + cb + "/fail";
    httplib::Headers h{{kCallbackTimestampHeader, std::to_string(t)},
                       {kCallbackSignatureHeader, sign(kCallbackSecret, t, fail, "{}")}};
    auto c = client(*signed_);
    auto r = c.Post(fail, h, R"({"error":"x"})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << r->body;
  }
  // Replayed outside the window.
  std::tie(status, body) = call(*signed_, path, "{}", kCallbackSecret, now_s() - 301);
  EXPECT_EQ(status, 401) << body;
  // A timestamp spelled another way than it was signed.
  {
    const auto t = now_s();
    httplib::Headers h{{kCallbackTimestampHeader, "0" + std::to_string(t)},
                       {kCallbackSignatureHeader, sign(kCallbackSecret, t, path, "{}")}};
    std::tie(status, body) = send(*signed_, path, h, "{}");
    EXPECT_EQ(status, 401) << body;
  }
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
  EXPECT_EQ(state_of(id), "waiting_external");
  // A signed body under another Content-Type than JSON (which the routes would not read,
  // or would read as parameters beside the query's): 415.
  {
    const auto h = signed_headers(now_s(), path, "{}");
    std::tie(status, body) = send(*signed_, path, h, "{}", "text/plain");
    EXPECT_EQ(status, 415) << body;
  }
  EXPECT_EQ(state_of(id), "waiting_external");
  // A malformed id: 400 from the API's validation.
  std::tie(status, body) = call(*signed_, "/api/callbacks/nope/complete", "{}");
  EXPECT_EQ(status, 400) << body;
  // After all that, the right request still works.
  std::tie(status, body) = call(*signed_, path, "{}");
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(state_of(id), "completed");
}

// Issue 31: a captured signed request replayed to another callback id is refused, and the
// other job is left waiting. (The signature covered the timestamp and body only.)
TEST_F(ServeCallbackTest, AReplayToAnotherCallbackIdIsRefusedAndChangesNothing) {
  JobId id_a = 0;
  JobId id_b = 0;
  const auto a = waiting_job("cbq", &id_a);
  const auto b = waiting_job("cbq", &id_b);
  const std::string target_a = "/api/callbacks/" + a + "/complete";
  const auto captured = signed_headers(now_s(), target_a, "{}");
  auto [status, body] = send(*signed_, target_a, captured, "{}");
  ASSERT_EQ(status, 200) << body;
  std::tie(status, body) = send(*signed_, "/api/callbacks/" + b + "/complete", captured, "{}");
  EXPECT_EQ(status, 401) << body;
  EXPECT_EQ(state_of(id_b), "waiting_external");
  // Before the original arrives too: a signature names its id.
  JobId id_c = 0;
  const auto c = waiting_job("cbq", &id_c);
  const auto early = signed_headers(now_s(), "/api/callbacks/" + c + "/complete", "{}");
  std::tie(status, body) = send(*signed_, "/api/callbacks/" + b + "/complete", early, "{}");
  EXPECT_EQ(status, 401) << body;
  EXPECT_EQ(state_of(id_b), "waiting_external");
  EXPECT_EQ(state_of(id_c), "waiting_external");
}

// Issue 31: a captured heartbeat replayed as a fail (or a complete) of the same callback
// is refused: the action is signed.
TEST_F(ServeCallbackTest, AReplayToAnotherActionIsRefusedAndChangesNothing) {
  JobId id = 0;
  const auto cb = waiting_job("cbq", &id);
  const std::string heartbeat = "/api/callbacks/" + cb + "/heartbeat";
  const auto captured = signed_headers(now_s(), heartbeat, "{}");
  auto [status, body] = send(*signed_, heartbeat, captured, "{}");
  ASSERT_EQ(status, 200) << body;
  const auto times = callback_times(cb);
  std::tie(status, body) = send(*signed_, "/api/callbacks/" + cb + "/fail", captured, "{}");
  EXPECT_EQ(status, 401) << body;
  EXPECT_EQ(state_of(id), "waiting_external");
  std::tie(status, body) = send(*signed_, "/api/callbacks/" + cb + "/complete", captured, "{}");
  EXPECT_EQ(status, 401) << body;
  EXPECT_EQ(state_of(id), "waiting_external");
  EXPECT_EQ(admin().job(ac(), id)->summary.attempt, 1);
  EXPECT_EQ(callback_times(cb), times);
}

// Issue 31: query parameters the route reads (timeout_s; error and retryable) rode
// unsigned: one added to a captured empty heartbeat set the callback timeout.
TEST_F(ServeCallbackTest, AReplayWithAnAddedQueryParameterIsRefusedAndChangesNothing) {
  JobId id = 0;
  const auto cb = waiting_job("cbq", &id);
  const std::string heartbeat = "/api/callbacks/" + cb + "/heartbeat";
  const auto times = callback_times(cb);
  // Captured before delivery (the refusal is the signature's, not the replay cache's).
  const auto captured = signed_headers(now_s(), heartbeat, "");
  auto [status, body] = send(*signed_, heartbeat + "?timeout_s=1", captured, "");
  EXPECT_EQ(status, 401) << body;
  EXPECT_EQ(callback_times(cb), times);
  const std::string fail = "/api/callbacks/" + cb + "/fail";
  const auto fail_captured = signed_headers(now_s(), fail, R"({"error":"declined"})");
  std::tie(status, body) =
      send(*signed_, fail + "?retryable=false", fail_captured, R"({"error":"declined"})");
  EXPECT_EQ(status, 401) << body;
  EXPECT_EQ(state_of(id), "waiting_external");
  // The original, delivered as signed, is accepted and leaves the timeout where it was.
  std::tie(status, body) = send(*signed_, heartbeat, captured, "");
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(callback_times(cb).substr(0, times.find(' ')), times.substr(0, times.find(' ')));
}

// Issue 31: the same signed heartbeat delivered twice (within the 300 s window) extended
// the callback timeout twice. The second is refused and changes nothing.
TEST_F(ServeCallbackTest, TheSameHeartbeatTwiceIsRefusedTheSecondTime) {
  JobId id = 0;
  const auto cb = waiting_job("cbq", &id);
  const std::string heartbeat = "/api/callbacks/" + cb + "/heartbeat";
  const std::string json = R"({"timeout_s": 7200})";
  const auto captured = signed_headers(now_s(), heartbeat, json);
  auto [status, body] = send(*signed_, heartbeat, captured, json);
  ASSERT_EQ(status, 200) << body;
  const auto times = callback_times(cb);
  // now() moves on between the two: an applied replay would move the timeout.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::tie(status, body) = send(*signed_, heartbeat, captured, json);
  EXPECT_EQ(status, 409) << body;
  EXPECT_EQ(body["replayed"], true) << body;
  EXPECT_EQ(callback_times(cb), times);
  EXPECT_EQ(state_of(id), "waiting_external");
}

// The query is signed with the rest: a sender may pass the parameters there, in any
// order and spelling, and the route reads exactly what was signed.
TEST_F(ServeCallbackTest, SignedQueryParametersAreAccepted) {
  JobId id = 0;
  const auto cb = waiting_job("cbq", &id);
  const std::string heartbeat = "/api/callbacks/" + cb + "/heartbeat?timeout_s=7200";
  auto [status, body] = send(*signed_, heartbeat, signed_headers(now_s(), heartbeat, ""), "");
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(state_of(id), "waiting_external");
  const std::string fail = "/api/callbacks/" + cb + "/fail";
  // Signed as "error=rejected+upstream&retryable=false", sent in another order and spelling.
  const auto h = signed_headers(now_s(), fail + "?error=rejected+upstream&retryable=false", "");
  std::tie(status, body) =
      send(*signed_, fail + "?retryable=false&error=rejected%20upstream", h, "");
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(body["state"], "failed");
  const auto d = admin().job(ac(), id);
  ASSERT_TRUE(d && !d->errors.empty());
  EXPECT_EQ(d->errors.back().error, "rejected upstream");
}

// A signed JSON body sent with another Content-Type would be ignored by the route (a fail
// with `retryable: false` becoming a retryable one): refused instead, nothing changed.
TEST_F(ServeCallbackTest, AnUnsignedContentTypeCannotChangeWhatTheBodySays) {
  JobId id = 0;
  const auto cb = waiting_job("cbq", &id);
  const std::string fail = "/api/callbacks/" + cb + "/fail";
  const std::string json = R"({"error": "declined", "retryable": false})";
  const auto h = signed_headers(now_s(), fail, json);
  auto [status, body] = send(*signed_, fail, h, json, "text/plain");
  EXPECT_EQ(status, 415) << body;
  std::tie(status, body) =
      send(*signed_, fail, h, "error=declined", "application/x-www-form-urlencoded");
  EXPECT_EQ(status, 415) << body;
  EXPECT_EQ(state_of(id), "waiting_external");
  // Not consumed by the refusals: the request as signed still goes through, once.
  std::tie(status, body) = send(*signed_, fail, h, json);
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(body["state"], "failed");
}

}  // namespace
}  // namespace awa::testing
