// Family::cap_values: a label fed by outside input keeps a bounded number of series.
#include <string>

#include <gtest/gtest.h>

#include "awa/error.hpp"
#include "awa/metrics.hpp"

namespace awa::metrics {
namespace {

int series_count(const Registry& r, const std::string& prefix) {
  const auto text = r.expose();
  int n = 0;
  for (auto at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    if (at == 0 || text[at - 1] == '\n') ++n;
  }
  return n;
}

TEST(MetricsCapTest, ValuesPastTheCapShareTheOverflowSeries) {
  Registry r;
  auto& f = r.counter("kinds_total", "kinds", {"queue", "kind"});
  f.cap_values("kind", 3);
  for (int i = 0; i < 50; ++i) f.with({"q", "k" + std::to_string(i)}).inc();
  EXPECT_EQ(series_count(r, "kinds_total{"), 4);  // k0, k1, k2, other
  EXPECT_EQ(f.with({"q", "k1"}).value(), 1U);
  EXPECT_EQ(f.with({"q", "other"}).value(), 47U);
  // A kind admitted before the cap was reached keeps its series on every queue.
  f.with({"q2", "k2"}).inc();
  EXPECT_EQ(f.with({"q2", "k2"}).value(), 1U);
  f.with({"q2", "k49"}).inc();
  EXPECT_EQ(f.with({"q2", "other"}).value(), 1U);
}

TEST(MetricsCapTest, UnknownLabelIsRejected) {
  Registry r;
  auto& f = r.counter("kinds_total", "kinds", {"queue", "kind"});
  EXPECT_THROW(f.cap_values("kinds", 3), InvalidArgument);
}

TEST(MetricsCapTest, TheEnginesUnknownKindFamilyIsCapped) {
  auto& f = engine().job_unknown_kind;
  for (int i = 0; i < 200; ++i) f.with({"metrics_cap_test", "kind_" + std::to_string(i)}).inc();
  EXPECT_LE(
      series_count(default_registry(), "awa_job_unknown_kind_total{queue=\"metrics_cap_test\""),
      static_cast<int>(kUnknownKindLabels) + 1);
}

}  // namespace
}  // namespace awa::metrics
