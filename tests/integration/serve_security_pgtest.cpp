// `awa serve`'s guards (issue 13): read-only refusal, the bearer token and login cookie,
// the CSRF header, the Host check on loopback, and no non-loopback bind without a token.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/error.hpp"
#include "cli_runner.hpp"
#include "serve_support.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

TEST_F(ServeTest, ReadOnlyRefusesEveryPostAndChangesNothing) {
  auto& ro = another({.read_only = true, .token = false});
  auto c = client(ro);
  EXPECT_EQ(c.Get("/api/queues")->status, 200);
  for (const std::string& path : std::vector<std::string>{
           "/api/queues/q1/pause", "/api/jobs/" + std::to_string(ids_["failed"]) + "/retry",
           "/api/jobs/" + std::to_string(ids_["available"]) + "/cancel", "/api/dlq/retry?all=true",
           "/api/dlq/purge?all=true"}) {
    auto r = c.Post(path, csrf(), "", "application/json");
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 403) << path;
    EXPECT_THAT(body(r)["error"].get<std::string>(), HasSubstr("read-only")) << path;
  }
  EXPECT_FALSE(admin().queue_summary(ac(), "q1").settings.paused);
  EXPECT_EQ(state_of(ids_["failed"]), "failed");
  EXPECT_EQ(state_of(ids_["available"]), "available");
  EXPECT_EQ(state_of(ids_["dlq"]), "dlq");
}

TEST_F(ServeTest, TokenIsRequiredAsBearerOrLoginCookie) {
  auto& t = another({.read_only = false, .token = true});
  auto c = client(t);
  auto r = c.Get("/api/queues");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_THAT(body(r)["error"].get<std::string>(), HasSubstr("authentication required"));
  r = c.Get("/api/queues", {{"Authorization", "Bearer wrong-token-0123456789"}});
  EXPECT_EQ(r->status, 401);
  r = c.Get("/api/queues", {{"Authorization", std::string("Bearer ") + kToken + "x"}});
  EXPECT_EQ(r->status, 401);
  r = c.Post("/api/queues/q1/pause", {{"X-Awa-Csrf", "1"}}, "", "application/json");
  EXPECT_EQ(r->status, 401);
  EXPECT_FALSE(admin().queue_summary(ac(), "q1").settings.paused);

  const httplib::Headers bearer{{"Authorization", std::string("Bearer ") + kToken}};
  r = c.Get("/api/queues", bearer);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(body(r).size(), 2U);
  // The token alone is not enough to change anything: the CSRF header too.
  r = c.Post("/api/queues/q1/pause", bearer, "", "application/json");
  EXPECT_EQ(r->status, 403);
  EXPECT_THAT(body(r)["error"].get<std::string>(), HasSubstr("CSRF"));
  EXPECT_FALSE(admin().queue_summary(ac(), "q1").settings.paused);
  auto both = bearer;
  both.emplace("X-Awa-Csrf", "1");
  r = c.Post("/api/queues/q1/pause", both, "", "application/json");
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(admin().queue_summary(ac(), "q1").settings.paused);

  // Login: a wrong token sets no cookie; the right one an HttpOnly, SameSite=Strict one.
  r = c.Post("/login", "token=nope", "application/x-www-form-urlencoded");
  EXPECT_EQ(r->status, 401);
  EXPECT_FALSE(r->has_header("Set-Cookie"));
  r = c.Post("/login", std::string("token=") + kToken, "application/x-www-form-urlencoded");
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string cookie = r->get_header_value("Set-Cookie");
  EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
  EXPECT_THAT(cookie, HasSubstr("SameSite=Strict"));
  EXPECT_THAT(cookie, ::testing::Not(HasSubstr(kToken)));
  const httplib::Headers session{{"Cookie", cookie.substr(0, cookie.find(';'))}};
  r = c.Get("/api/queues", session);
  EXPECT_EQ(r->status, 200);
  r = c.Post("/api/queues/q1/resume", session, "", "application/json");
  EXPECT_EQ(r->status, 403);
  EXPECT_TRUE(admin().queue_summary(ac(), "q1").settings.paused);
  r = c.Get("/api/queues", {{"Cookie", "awa_session=forged"}});
  EXPECT_EQ(r->status, 401);
  // Login CSRF: a cross-origin form post is refused.
  r = c.Post("/login", {{"Origin", "http://evil.example"}}, std::string("token=") + kToken,
             "application/x-www-form-urlencoded");
  EXPECT_EQ(r->status, 403);
}

TEST_F(ServeTest, PostsWithoutTheCsrfHeaderAreRefusedOnLoopbackToo) {
  auto c = client();
  for (const std::string path : {"/api/queues/q1/pause", "/api/dlq/retry?all=true"}) {
    auto r = c.Post(path, "", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403) << path;
    r = c.Post(path, {{"X-Awa-Csrf", "0"}}, "", "application/json");
    EXPECT_EQ(r->status, 403) << path;
  }
  EXPECT_FALSE(admin().queue_summary(ac(), "q1").settings.paused);
  EXPECT_EQ(state_of(ids_["dlq"]), "dlq");
  // DNS rebinding: a page whose host name resolves to 127.0.0.1 still sends its own Host.
  auto r = c.Get("/api/queues", {{"Host", "evil.example"}});
  EXPECT_EQ(r->status, 403);
  r = c.Get("/api/queues", {{"Host", "localhost:8080"}});
  EXPECT_EQ(r->status, 200);
}

TEST(ServeOptionsTest, NonLoopbackNeedsAToken) {
  EXPECT_TRUE(serve::is_loopback("127.0.0.1"));
  EXPECT_TRUE(serve::is_loopback("127.1.2.3"));
  EXPECT_TRUE(serve::is_loopback("::1"));
  EXPECT_TRUE(serve::is_loopback("localhost"));
  EXPECT_FALSE(serve::is_loopback("0.0.0.0"));
  EXPECT_FALSE(serve::is_loopback("::"));
  EXPECT_FALSE(serve::is_loopback("127.0.0.1.evil.example"));
  EXPECT_FALSE(serve::is_loopback("10.0.0.1"));
  serve::ServerOptions o;
  o.host = "0.0.0.0";
  try {
    serve::Server s(o);
    ADD_FAILURE() << "0.0.0.0 without a token was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("without a token"));
  }
  o.token = "0123456789abcdef";
  EXPECT_NO_THROW(serve::Server s(o));
}

TEST(ServeCliTest, RefusesToStartOnANonLoopbackAddressWithoutAToken) {
  auto r = run_cli("--database-url postgresql://nowhere.invalid/x serve --addr 0.0.0.0:0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("refusing to listen on 0.0.0.0 without a token"));
  r = run_cli(
      "--database-url postgresql://nowhere.invalid/x serve --addr 0.0.0.0:0 "
      "--token-file /nonexistent/token");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cannot read"));
  r = run_cli("--database-url postgresql://nowhere.invalid/x serve --addr nonsense");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--addr"));
}

}  // namespace
}  // namespace awa::testing
