// Fixture for the `awa serve` API tests: a migrated schema seeded with jobs in every state
// (queue "q1") and keyed jobs on 4 shards (queue "sharded": shard s holds s + 1 available
// jobs), and an in-process server on an ephemeral loopback port.
#pragma once

#include <httplib.h>

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "admin_jobs_support.hpp"
#include "awa/serve.hpp"

namespace awa::testing {

class ServeTest : public JobAdminTest {
 protected:
  static constexpr const char* kToken = "s3cret-token-0123456789";
  static constexpr const char* kCallbackSecret = "callback-secret-0123456789";

  void SetUpSchema() override {
    JobAdminTest::SetUpSchema();
    ids_ = every_state("q1");
    admin().set_enqueue_shards(ac(), "sharded", 4);
    for (int shard = 0; shard < 4; ++shard) {
      for (int i = 0; i <= shard; ++i) enqueue(opts("sharded", 2, key_on_shard(4, shard)), "keyed");
    }
    server_ = start({});
  }
  void TearDown() override {
    for (auto& s : extra_) s->stop();
    if (server_) server_->stop();
    JobAdminTest::TearDown();
  }

  struct Setup {
    bool read_only = false;
    bool token = false;
    bool callbacks = false;               // callback_secret = kCallbackSecret
    std::chrono::seconds session_ttl{0};  // 0: the default
  };
  std::unique_ptr<serve::Server> start(Setup s) {
    serve::ServerOptions o;
    o.database_url = database_url();
    o.schema = schema_;
    o.host = "127.0.0.1";
    o.port = 0;
    o.read_only = s.read_only;
    if (s.token) o.token = kToken;
    if (s.callbacks) o.callback_secret = kCallbackSecret;
    if (s.session_ttl.count() > 0) o.session_ttl = s.session_ttl;
    auto server = std::make_unique<serve::Server>(o);
    server->start();
    return server;
  }
  // A second server on the same schema (read-only, with a token), stopped at tear-down.
  serve::Server& another(Setup s) {
    extra_.push_back(start(s));
    return *extra_.back();
  }

  static httplib::Client client(const serve::Server& s) {
    httplib::Client c("127.0.0.1", s.port());
    c.set_connection_timeout(5);
    c.set_read_timeout(30);
    return c;
  }
  httplib::Client client() const { return client(*server_); }

  static nlohmann::json body(const httplib::Result& r) {
    if (!r) throw std::runtime_error("no response: " + httplib::to_string(r.error()));
    return nlohmann::json::parse(r->body);
  }
  // GET that must answer 200 with JSON.
  nlohmann::json get(const std::string& path) {
    auto c = client();
    auto r = c.Get(path);
    EXPECT_TRUE(r) << path;
    if (!r) return nullptr;
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    return nlohmann::json::parse(r->body);
  }
  static httplib::Headers csrf() { return {{"X-Awa-Csrf", "1"}}; }
  // POST with the CSRF header; returns the status and the JSON body.
  std::pair<int, nlohmann::json> post(const std::string& path, const std::string& json_body = "") {
    auto c = client();
    auto r = c.Post(path, csrf(), json_body, "application/json");
    if (!r) throw std::runtime_error("no response: " + path);
    return {r->status, nlohmann::json::parse(r->body)};
  }

  std::map<std::string, JobId> ids_;
  std::unique_ptr<serve::Server> server_;
  std::vector<std::unique_ptr<serve::Server>> extra_;
};

}  // namespace awa::testing
