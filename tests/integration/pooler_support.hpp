// The pooler tests' shared fixture (issue 15, "Pooler mode"; docs/deployment.md): the
// project's PgBouncer (scripts/pgbouncer, transaction pool mode) in front of the server
// DATABASE_URL names. ctest starts it (fixture `pooler`, CMakeLists.txt); run by hand,
// start it first: `scripts/pgbouncer start`. A missing pooler FAILS these tests: they are
// never skipped.
#pragma once

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include "awa/client.hpp"
#include "awa/metrics.hpp"
#include "pg/connection.hpp"
#include "runtime_support.hpp"

namespace awa::testing {

// $AWA_POOLER_URL, else what `scripts/pgbouncer url` prints; throws when neither has one.
inline std::string pooler_url() {
  if (const char* env = std::getenv("AWA_POOLER_URL"); env != nullptr && *env != '\0') return env;
  const std::string cmd = std::string(AWA_PGBOUNCER_SCRIPT) + " url 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
  if (!p) throw std::runtime_error("cannot run " + cmd);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p.get()) != nullptr) out += buf;
  const int rc = ::pclose(p.release());
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (rc != 0 || out.rfind("postgresql://", 0) != 0) {
    throw std::runtime_error(
        "no PgBouncer for the pooler tests (run `scripts/pgbouncer start`, or set "
        "AWA_POOLER_URL): " +
        out);
  }
  return out;
}

// The pooler's second database: the same server database through ONE server connection,
// so every client of it shares that session — the pooler's mixing made deterministic.
inline std::string single_session_url(const std::string& pooled) { return pooled + "_pool1"; }

inline pg::ConnectOptions pooled_connect(const std::string& url, bool pooled = true) {
  pg::ConnectOptions o;
  o.url = url;
  o.pooled = pooled;
  o.application_name = "awa_tests_pooler";
  return o;
}

// Clients of the pooler with this application_name, from its admin console (SHOW
// CLIENTS); raw libpq: the console accepts none of the SETs pg::Connection sends.
inline int pooler_clients(const std::string& pooled, const std::string& application_name) {
  const auto slash = pooled.rfind('/');
  const std::string console = pooled.substr(0, slash + 1) + "pgbouncer";
  std::unique_ptr<PGconn, void (*)(PGconn*)> c(PQconnectdb(console.c_str()), PQfinish);
  if (PQstatus(c.get()) != CONNECTION_OK)
    throw std::runtime_error("pgbouncer console: " + std::string(PQerrorMessage(c.get())));
  std::unique_ptr<PGresult, void (*)(PGresult*)> r(PQexec(c.get(), "SHOW CLIENTS"), PQclear);
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK)
    throw std::runtime_error("SHOW CLIENTS: " + std::string(PQerrorMessage(c.get())));
  const int col = PQfnumber(r.get(), "application_name");
  if (col < 0) throw std::runtime_error("SHOW CLIENTS has no application_name");
  int n = 0;
  for (int i = 0; i < PQntuples(r.get()); ++i)
    n += application_name == PQgetvalue(r.get(), i, col) ? 1 : 0;
  return n;
}

// The value of awa_notify_ok{schema} in the process's registry, or -1 when absent.
inline int notify_ok_gauge(const std::string& schema) {
  const std::string text = metrics::default_registry().expose();
  const std::string series = fmt::format("awa_notify_ok{{schema=\"{}\"}} ", schema);
  const auto at = text.find(series);
  if (at == std::string::npos) return -1;
  return std::stoi(text.substr(at + series.size()));
}

class PoolerTest : public RuntimeTest {
 protected:
  void SetUpSchema() override {
    RuntimeTest::SetUpSchema();
    pooled_url_ = pooler_url();
    // The pooler must front the server these tests create their schemas on.
    auto through = pg::Connection::connect(pooled_connect(pooled_url_));
    const auto a = through.exec("SELECT current_database(), current_setting('port')");
    const auto b = conn().exec("SELECT current_database(), current_setting('port')");
    ASSERT_EQ(a.get<std::string>(0, 0), b.get<std::string>(0, 0));
    ASSERT_EQ(a.get<std::string>(0, 1), b.get<std::string>(0, 1))
        << "scripts/pgbouncer fronts another server than DATABASE_URL; restart it with this "
           "DATABASE_URL";
  }

  // The runtime through the pooler; `direct`: with DATABASE_URL as its direct URL.
  ClientOptions pooled_options(bool direct) const {
    ClientOptions o = options();
    o.database_url = pooled_url_;
    o.pooled = true;
    if (direct) o.direct_database_url = database_url();
    // Per test process, so counting a client's sessions by it sees no other test's.
    o.application_name =
        fmt::format("awa_tests_pooler_{}_{}", direct ? "direct" : "poll", ::getpid());
    return o;
  }

  // The os pid of the `awa work` process holding this schema's leader lease, or 0.
  int lease_holder_os_pid() {
    const auto r = conn().exec(
        "SELECT i.pid FROM leader_lease l JOIN runtime_instances i "
        "ON i.instance_id::text = l.holder WHERE l.expires_at > now()");
    return r.rows() == 0 ? 0 : r.get<int>(0, 0);
  }

  std::string pooled_url_;
};

}  // namespace awa::testing
