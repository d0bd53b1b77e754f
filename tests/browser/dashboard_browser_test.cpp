// The dashboard in a real browser (issue 13): headless chromium driven over WebDriver
// loads each page of `awa serve` against a seeded schema (dashboard_fixture.hpp), checks
// what it shows against the database (awa::Admin), clicks the actions and checks the
// database changed, saves a screenshot of each page and fails on any console error.
// The DOM it reads is the pages' contract (serve/ui/): ids, data-page / data-loaded on
// main#page, data-* attributes on rows and cells.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "dashboard_fixture.hpp"

namespace awa::testing {
namespace {

using nlohmann::json;

constexpr const char* kCountCols[] = {"available", "running", "scheduled", "retryable",
                                      "completed", "failed",  "cancelled", "dlq"};

std::int64_t count_of(const QueueCounts& c, const std::string& col) {
  if (col == "available") return c.available;
  if (col == "running") return c.running;
  if (col == "scheduled") return c.scheduled;
  if (col == "retryable") return c.retryable;
  if (col == "completed") return c.completed;
  if (col == "failed") return c.failed;
  if (col == "cancelled") return c.cancelled;
  if (col == "dlq") return c.dlq;
  throw std::logic_error("count column " + col);
}

void expect_counts(const std::map<std::string, std::string>& cells, const QueueCounts& want,
                   const std::string& where) {
  for (const std::string col : kCountCols) {
    ASSERT_TRUE(cells.count(col)) << where << ": no td[data-col=" << col << "]";
    EXPECT_EQ(cells.at(col), std::to_string(count_of(want, col))) << where << ", " << col;
  }
}

double median(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 == 1 ? static_cast<double>(v[n / 2])
                    : static_cast<double>(v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// The harness itself, on what awa serve has always served (the JSON API): the browser
// loads a page, its text matches the database, and the console check sees an error.
TEST_F(DashboardTest, HarnessReadsPagesAndSeesConsoleErrors) {
  web().navigate(serve().base_url() + "/api/queues");
  const auto shown =
      json::parse(web().execute("return document.body.innerText").get<std::string>());
  const auto queues = admin().list_queues(ac());
  ASSERT_EQ(shown.size(), queues.size());
  for (std::size_t i = 0; i < queues.size(); ++i) {
    EXPECT_EQ(shown[i]["queue"], queues[i].settings.queue);
    EXPECT_EQ(shown[i]["available"], queues[i].counts.available);
    EXPECT_EQ(shown[i]["paused"], queues[i].settings.paused);
  }
  EXPECT_TRUE(web().find_all("#page").empty());

  web().execute("console.error('harness probe')");
  const auto status = web().execute("return fetch('/api/jobs/999999999').then(r => r.status)");
  EXPECT_EQ(status, 404);
  // Chromium also asks for /favicon.ico, which the JSON API answers with 404.
  std::vector<std::string> severe;
  wait_for("both console errors logged", [&] {
    for (const auto& e : web().browser_log()) {
      if (e.level == "SEVERE" && e.message.find("/favicon.ico") == std::string::npos)
        severe.push_back(e.message);
    }
    return severe.size() >= 2;
  });
  ASSERT_EQ(severe.size(), 2U);
  EXPECT_NE(severe[0].find("harness probe"), std::string::npos) << severe[0];
  EXPECT_NE(severe[1].find("/api/jobs/999999999 - Failed to load resource"), std::string::npos)
      << severe[1];
  screenshot("harness-api-queues");
}

TEST_F(DashboardTest, OverviewShowsEveryQueueAsTheDatabaseCountsIt) {
  open("/", "overview");
  const auto queues = admin().list_queues(ac());
  ASSERT_EQ(queues.size(), 2U);
  const auto shown = rows("#queues tbody tr[data-queue]");
  ASSERT_EQ(shown.size(), queues.size()) << describe_page();
  std::int64_t completed = 0;
  std::int64_t failed = 0;
  for (const auto& q : queues) {
    const std::string& name = q.settings.queue;
    const auto row = std::find_if(shown.begin(), shown.end(),
                                  [&](const Row& r) { return r.data.at("queue") == name; });
    ASSERT_NE(row, shown.end()) << "no row for " << name;
    expect_counts(row->cells, q.counts, "overview row " + name);
    EXPECT_EQ(row->cells.at("paused"), q.settings.paused ? "paused" : "active") << name;
    const std::string age = row->cells.at("oldest_available_age_s");
    if (q.oldest_available_age_s) {
      EXPECT_TRUE(leading_int(age).has_value()) << name << ": " << age;
    } else {
      EXPECT_EQ(age, "—") << name;
    }
    EXPECT_TRUE(exists("#queues tbody tr" + css_attr("data-queue", name) + " a" +
                       css_attr("href", "/queues/" + name)))
        << name;
    completed += q.counts.completed;
    failed += q.counts.failed + q.counts.dlq;
  }
  // Every job of the seed ended within the last minutes: the hour's totals are all-time.
  EXPECT_EQ(text_of("#throughput-completed"), std::to_string(completed));
  EXPECT_EQ(text_of("#throughput-failed"), std::to_string(failed));
  // The chart's bars add up to the same totals.
  const auto bars = web().execute(R"(
    const out = {completed: 0, failed: 0};
    for (const r of document.querySelectorAll('svg#throughput-chart rect[data-series]'))
      out[r.dataset.series] += +r.dataset.value;
    return out;)");
  EXPECT_EQ(bars.value("completed", -1), completed);
  EXPECT_EQ(bars.value("failed", -1), failed);

  const auto health = admin().health(ac());
  EXPECT_EQ(rows("#workers tbody tr[data-instance]").size(), health.workers.size());
  EXPECT_EQ(text_of("#leader"), health.leader_present ? "present" : "absent");
  for (const char* nav : {"#nav-overview", "#nav-jobs", "#nav-batches", "#nav-dlq", "#nav-storage"})
    EXPECT_TRUE(exists(std::string("a") + nav)) << nav;
  finish_page("overview");
}

TEST_F(DashboardTest, QueuePageShowsLanesAndTheStarvedShardAndPausesAndResumes) {
  // Reached the way an operator does: a click on the queue's name in the overview.
  open("/", "overview");
  expect_clean_console("overview (on the way to the queue page)");
  click("#queues a" + css_attr("href", std::string("/queues/") + kOrders));
  wait_for("the queue page of orders", [&] {
    const auto p = web().execute(
        "return [document.getElementById('page')?.dataset.page, "
        "+(document.getElementById('page')?.dataset.loaded || 0)]");
    return p[0] == "queue" && p[1].get<int>() >= 1 &&
           web().current_url() == serve().base_url() + "/queues/" + kOrders;
  });
  EXPECT_EQ(text_of("h1#queue-name"), kOrders);
  EXPECT_EQ(text_of("#queue-state"), "active");
  EXPECT_EQ(text_of("dl#settings dd" + css_attr("data-setting", "enqueue_shards")),
            std::to_string(kShards));

  // The seed's premise, from the database: shard 2 alone is starved by the lag rule.
  const auto lanes = admin().queue_shards(ac(), kOrders);
  std::map<int, std::int64_t> lag;
  std::map<int, std::int64_t> available;
  for (const auto& l : lanes) {
    lag[l.enqueue_shard] += l.lag;
    available[l.enqueue_shard] += l.available;
  }
  ASSERT_EQ(lag.size(), static_cast<std::size_t>(kShards));
  std::vector<std::int64_t> lags;
  for (const auto& [s, n] : lag) lags.push_back(n);
  const double med = median(lags);
  for (const auto& [s, n] : lag) {
    const bool starved = static_cast<double>(n) >= 4 * med && n >= 10;
    ASSERT_EQ(starved, s == kStarvedShard) << "seed: shard " << s << " lag " << n;
  }

  const auto shown = rows("table#lanes tr[data-shard]");
  ASSERT_EQ(shown.size(), lanes.size()) << describe_page();
  for (const auto& l : lanes) {
    const std::string where = fmt::format("lane p{} s{}", l.priority, l.enqueue_shard);
    const auto row = std::find_if(shown.begin(), shown.end(), [&](const Row& r) {
      return r.data.at("priority") == std::to_string(l.priority) &&
             r.data.at("shard") == std::to_string(l.enqueue_shard);
    });
    ASSERT_NE(row, shown.end()) << "no row for " << where;
    EXPECT_EQ(row->cells.at("enqueue_cursor"), std::to_string(l.enqueue_cursor)) << where;
    EXPECT_EQ(row->cells.at("claim_cursor"), std::to_string(l.claim_cursor)) << where;
    EXPECT_EQ(row->cells.at("lag"), std::to_string(l.lag)) << where;
    EXPECT_EQ(row->cells.at("available"), std::to_string(l.available)) << where;
    // Every claim of the seed was a priority-2 claim, within the page's 15-minute window.
    const int claims = l.priority == 2 ? seed_.claims_by_shard[l.enqueue_shard] : 0;
    EXPECT_EQ(row->cells.at("claims"), std::to_string(claims)) << where;
    EXPECT_EQ(row->has_class("starved"), l.enqueue_shard == kStarvedShard) << where;
  }

  const auto bars = rows("div#shard-bars div.shard-bar[data-shard]");
  ASSERT_EQ(bars.size(), static_cast<std::size_t>(kShards)) << describe_page();
  for (const auto& b : bars) {
    const int s = std::stoi(b.data.at("shard"));
    EXPECT_EQ(b.data.at("lag"), std::to_string(lag[s])) << "bar of shard " << s;
    EXPECT_EQ(b.data.at("available"), std::to_string(available[s])) << "bar of shard " << s;
    EXPECT_EQ(b.has_class("starved"), s == kStarvedShard) << "bar of shard " << s;
  }

  // The claims chart sums to the claims the seed made, per shard.
  const auto chart = web().execute(R"(
    const out = {};
    for (const r of document.querySelectorAll('svg#claims-chart rect[data-shard][data-value]'))
      out[r.dataset.shard] = (out[r.dataset.shard] || 0) + (+r.dataset.value);
    return out;)");
  for (int s = 0; s < kShards; ++s) {
    const auto key = std::to_string(s);
    EXPECT_EQ(chart.value(key, 0), seed_.claims_by_shard[s]) << "claims chart, shard " << s;
  }

  const auto counts_rows = rows("table#counts tbody tr");
  const auto counts_row = std::find_if(counts_rows.begin(), counts_rows.end(),
                                       [](const Row& r) { return !r.cells.empty(); });
  ASSERT_NE(counts_row, counts_rows.end()) << describe_page();
  expect_counts(counts_row->cells, admin().queue_summary(ac(), kOrders).counts, "queue counts");
  screenshot("queue");
  expect_clean_console("queue");

  EXPECT_FALSE(exists("button#resume"));
  int before = loaded();
  click("button#pause");
  wait_for("orders paused in queue_meta",
           [&] { return admin().queue_summary(ac(), kOrders).settings.paused; });
  wait_render_after(before, "the page shows orders paused", [&] {
    return text_of("#queue-state") == "paused" && exists("button#resume") &&
           !exists("button#pause");
  });
  EXPECT_NE(text_of("#notice").value_or(""), "");
  screenshot("queue-paused");

  before = loaded();
  click("button#resume");
  wait_for("orders resumed in queue_meta",
           [&] { return !admin().queue_summary(ac(), kOrders).settings.paused; });
  wait_render_after(before, "the page shows orders active", [&] {
    return text_of("#queue-state") == "active" && exists("button#pause") &&
           !exists("button#resume");
  });
  finish_page("queue-resumed");
}

}  // namespace
}  // namespace awa::testing
