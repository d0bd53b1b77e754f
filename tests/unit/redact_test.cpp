// redact_url / scrub_password: passwords in connection strings never reach a message.
#include <gtest/gtest.h>

#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "awa/url.hpp"

namespace awa {
namespace {

TEST(RedactUrl, MasksTheUserinfoPassword) {
  EXPECT_EQ(redact_url("postgresql://u:secret@h/db"), "postgresql://u:***@h/db");
  EXPECT_EQ(redact_url("postgres://u:secret@h:5432"), "postgres://u:***@h:5432");
  // '@' and ':' may appear (percent-encoded or not) in the password: the last '@' ends it.
  EXPECT_EQ(redact_url("postgresql://u:p%40ss:w@rd@h/db?sslmode=require"),
            "postgresql://u:***@h/db?sslmode=require");
}

TEST(RedactUrl, MasksThePasswordQueryParameter) {
  EXPECT_EQ(redact_url("postgresql://h/db?user=u&password=secret&sslmode=require"),
            "postgresql://h/db?user=u&password=***&sslmode=require");
  EXPECT_EQ(redact_url("postgresql:///db?PASSWORD=secret"), "postgresql:///db?PASSWORD=***");
}

TEST(RedactUrl, KeepsAUrlWithoutPassword) {
  EXPECT_EQ(redact_url("postgresql://awa@127.0.0.1:54320/awa"),
            "postgresql://awa@127.0.0.1:54320/awa");
  EXPECT_EQ(redact_url("postgresql://h/db"), "postgresql://h/db");
  EXPECT_EQ(redact_url(""), "");
}

TEST(RedactUrl, MasksKeywordValueForms) {
  EXPECT_EQ(redact_url("host=h password=secret user=u"), "host=h password=*** user=u");
  EXPECT_EQ(redact_url("host=h password = secret"), "host=h password = ***");
  EXPECT_EQ(redact_url("password='it\\'s a secret' dbname=d"), "password=*** dbname=d");
  EXPECT_EQ(redact_url("dbname=d"), "dbname=d");
}

TEST(ScrubPassword, RemovesTheDecodedAndTheWrittenPassword) {
  const std::string url = "postgresql://u:p%40ssw0rd@h/db";
  EXPECT_EQ(scrub_password("auth failed for p@ssw0rd", url), "auth failed for ***");
  EXPECT_EQ(scrub_password("bad value p%40ssw0rd", url), "bad value ***");
  EXPECT_EQ(scrub_password("connecting to " + url + " failed", url),
            "connecting to postgresql://u:***@h/db failed");
}

TEST(ScrubPassword, MasksUrisAndPasswordsInFreeText) {
  EXPECT_EQ(scrub_password("unexpected argument: postgres://u:s3cret@h/db", ""),
            "unexpected argument: postgres://u:***@h/db");
  EXPECT_EQ(scrub_password("conninfo \"host=h password=s3cret\" rejected", ""),
            "conninfo \"host=h password=***\" rejected");
  EXPECT_EQ(scrub_password("nothing to hide", "host=h"), "nothing to hide");
}

}  // namespace
}  // namespace awa

namespace awa::metrics {
namespace {

TEST(ListenAddress, PortAloneBindsLoopback) {
  const auto a = parse_listen_address("9464");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 9464);
  EXPECT_EQ(parse_listen_address(":9464").host, "127.0.0.1");
  EXPECT_EQ(parse_listen_address("0").port, 0);
}

TEST(ListenAddress, AnExplicitHostIsKept) {
  EXPECT_EQ(parse_listen_address("0.0.0.0:9464").host, "0.0.0.0");
  EXPECT_EQ(parse_listen_address("localhost:1").host, "localhost");
  const auto v6 = parse_listen_address("[::1]:9464");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 9464);
}

TEST(ListenAddress, RejectsMalformedAddresses) {
  for (const char* bad :
       {"", "host", "host:", "1:2:3", "70000", "-1", "[]:80", "[::1:80", "127.0.0.1:http"}) {
    EXPECT_THROW(parse_listen_address(bad), InvalidArgument) << bad;
  }
}

TEST(ListenAddress, ServerWithoutAddressBindsLoopback) {
  Registry registry;
  Server server("", 0, registry);
  server.start();
  EXPECT_EQ(server.address(), "127.0.0.1");
  EXPECT_GT(server.port(), 0);
  server.stop();
}

}  // namespace
}  // namespace awa::metrics
