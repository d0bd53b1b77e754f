// `awa serve`'s login sessions: a new random session per login, ended by logout on the
// server (a copied cookie stops working), expiring after session_ttl; behind a
// TLS-terminating proxy (X-Forwarded-Proto: https) the cookie is Secure and the https
// origin may log in. Before, every login got the one session value made at start-up,
// logout only asked the browser to forget it, and it never expired.
#include <chrono>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime_support.hpp"
#include "serve_support.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ServeSessionTest : public ServeTest {
 protected:
  // Logs in on `server`; returns the Set-Cookie header.
  static std::string login(const serve::Server& server, const httplib::Headers& extra = {}) {
    auto c = client(server);
    auto r = c.Post("/login", extra, std::string("token=") + kToken,
                    "application/x-www-form-urlencoded");
    if (!r || r->status != 200) return "";
    return r->get_header_value("Set-Cookie");
  }
  static httplib::Headers with_cookie(const std::string& set_cookie) {
    return {{"Cookie", set_cookie.substr(0, set_cookie.find(';'))}};
  }
  static int status(const serve::Server& server, const httplib::Headers& h) {
    auto c = client(server);
    auto r = c.Get("/api/queues", h);
    return r ? r->status : -1;
  }
};

TEST_F(ServeSessionTest, LogoutRevokesTheSessionOnTheServer) {
  auto& s = another({.read_only = false, .token = true});
  const auto cookie = login(s);
  ASSERT_FALSE(cookie.empty());
  ASSERT_EQ(status(s, with_cookie(cookie)), 200);
  auto c = client(s);
  auto r = c.Post("/logout", with_cookie(cookie), "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->get_header_value("Set-Cookie"), HasSubstr("Max-Age=0"));
  // A copy of the cookie kept after the logout.
  EXPECT_EQ(status(s, with_cookie(cookie)), 401);
}

TEST_F(ServeSessionTest, EachLoginGetsASessionOfItsOwn) {
  auto& s = another({.read_only = false, .token = true});
  const auto first = login(s);
  const auto second = login(s);
  ASSERT_FALSE(first.empty());
  EXPECT_NE(with_cookie(first), with_cookie(second));
  auto c = client(s);
  ASSERT_TRUE(c.Post("/logout", with_cookie(first), "", "application/json"));
  EXPECT_EQ(status(s, with_cookie(first)), 401);
  EXPECT_EQ(status(s, with_cookie(second)), 200) << "one logout ended another login's session";
}

TEST_F(ServeSessionTest, ASessionExpiresAfterItsTimeToLive) {
  auto& s = another({.read_only = false, .token = true, .session_ttl = std::chrono::seconds(1)});
  const auto cookie = login(s);
  ASSERT_FALSE(cookie.empty());
  EXPECT_THAT(cookie, HasSubstr("Max-Age=1"));
  EXPECT_EQ(status(s, with_cookie(cookie)), 200);
  EXPECT_TRUE(eventually([&] { return status(s, with_cookie(cookie)) == 401; }, seconds(5)))
      << "the session outlived its time to live";
  // A new login works again.
  EXPECT_EQ(status(s, with_cookie(login(s))), 200);
}

TEST_F(ServeSessionTest, BehindATlsTerminatingProxyTheCookieIsSecure) {
  auto& s = another({.read_only = false, .token = true});
  const std::string host = "127.0.0.1:" + std::to_string(s.port());
  // Plain HTTP: no Secure attribute (a browser would drop such a cookie over http).
  EXPECT_THAT(login(s), Not(HasSubstr("Secure")));
  // Through the proxy: the page's origin is https, the proxy says so.
  const auto cookie = login(s, {{"X-Forwarded-Proto", "https"}, {"Origin", "https://" + host}});
  ASSERT_FALSE(cookie.empty()) << "an https origin of our own host was refused";
  EXPECT_THAT(cookie, HasSubstr("; Secure"));
  EXPECT_EQ(status(s, with_cookie(cookie)), 200);
  // Another site, over https or not, still may not log in.
  EXPECT_TRUE(
      login(s, {{"X-Forwarded-Proto", "https"}, {"Origin", "https://evil.example"}}).empty());
}

}  // namespace
}  // namespace awa::testing
