// Two awa::Clients in one process, each given its own metrics registry
// (ClientOptions::metrics_registry), keep their own counters: what one claims, completes
// and enqueues never shows in the other's registry or in the process-wide default one.
#include <gtest/gtest.h>

#include <string>

#include "awa/client.hpp"
#include "awa/metrics.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

class MetricsRegistryTest : public RuntimeTest {};

TEST_F(MetricsRegistryTest, TwoClientsWithTheirOwnRegistriesKeepTheirOwnCounters) {
  metrics::Registry a_registry;
  metrics::Registry b_registry;
  auto& a = metrics::engine_metrics(a_registry);
  auto& b = metrics::engine_metrics(b_registry);
  // Unique queue names: the default registry is shared by every test of this process.
  const std::string qa = schema_ + "_a";
  const std::string qb = schema_ + "_b";
  const auto default_before = metrics::engine().job_completed.with({qa, "completed"}).value();

  auto oa = options();
  oa.metrics_registry = &a_registry;
  auto ob = options();
  ob.metrics_registry = &b_registry;
  Client ca(oa);
  Client cb(ob);
  ca.register_worker("noop", [](JobContext&) { return JobResult::completed(); });
  cb.register_worker("noop", [](JobContext&) { return JobResult::completed(); });
  ca.add_queue(queue(qa, 2));
  cb.add_queue(queue(qb, 2));
  ca.start();
  cb.start();
  InsertOpts o;
  o.queue = qa;
  for (int i = 0; i < 3; ++i) ca.insert(NewJob("noop", nlohmann::json::object(), o));
  o.queue = qb;
  for (int i = 0; i < 5; ++i) cb.insert(NewJob("noop", nlohmann::json::object(), o));
  ASSERT_TRUE(eventually([&] { return ca.stats().completed == 3 && cb.stats().completed == 5; },
                         std::chrono::seconds(30), std::chrono::milliseconds(20)));
  ca.stop();
  cb.stop();

  // Each registry exposes the other client's work nowhere (read before the lookups below,
  // which create the series they ask for). The per-lane gauges are another matter: the
  // schema's maintenance leader, either client, sets them for every queue of the schema.
  const std::string ea = a_registry.expose();
  const std::string eb = b_registry.expose();
  EXPECT_NE(ea.find("awa_job_completed_total{queue=\"" + qa), std::string::npos) << ea;
  for (const char* family : {"awa_job_enqueued_total", "awa_job_claimed_total",
                             "awa_job_completed_total", "awa_jobs_running"}) {
    EXPECT_EQ(ea.find(std::string(family) + "{queue=\"" + qb), std::string::npos) << ea;
    EXPECT_EQ(eb.find(std::string(family) + "{queue=\"" + qa), std::string::npos) << eb;
  }
  EXPECT_EQ(a.job_enqueued.with({qa}).value(), 3u);
  EXPECT_EQ(a.job_completed.with({qa, "completed"}).value(), 3u);
  EXPECT_EQ(a.job_claimed.with({qa, "0"}).value(), 3u);
  EXPECT_EQ(b.job_enqueued.with({qb}).value(), 5u);
  EXPECT_EQ(b.job_completed.with({qb, "completed"}).value(), 5u);
  // Nothing went to the default registry.
  EXPECT_EQ(metrics::engine().job_completed.with({qa, "completed"}).value(), default_before);
}

}  // namespace
}  // namespace awa::testing
