// Regression test: awa_job_unknown_kind_total must not take producer-chosen kinds as
// unbounded label values. Any producer can enqueue jobs of arbitrary kinds; a series per
// kind, never freed, lets one grow a worker's memory and every scrape without bound.
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "awa/metrics.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

constexpr const char* kQueue = "unbounded_kinds";

struct Series {
  int count = 0;
  std::uint64_t total = 0;
  bool has_other = false;
};

// The awa_job_unknown_kind_total series of kQueue in the process's exposition.
Series unknown_kind_series() {
  const auto text = metrics::default_registry().expose();
  const auto prefix = fmt::format("awa_job_unknown_kind_total{{queue=\"{}\",kind=\"", kQueue);
  Series s;
  for (std::size_t at = text.find(prefix); at != std::string::npos;
       at = text.find(prefix, at + 1)) {
    if (at != 0 && text[at - 1] != '\n') continue;
    const auto eol = text.find('\n', at);
    const auto line = text.substr(at, eol - at);
    ++s.count;
    s.total += std::stoull(line.substr(line.rfind(' ') + 1));
    if (line.find("kind=\"other\"") != std::string::npos) s.has_other = true;
  }
  return s;
}

class UnknownKindMetricTest : public RuntimeTest {};

TEST_F(UnknownKindMetricTest, ManyDistinctUnknownKindsMakeABoundedNumberOfSeries) {
  constexpr int kKinds = 100;
  std::vector<NewJob> jobs;
  for (int i = 0; i < kKinds; ++i) {
    jobs.emplace_back(fmt::format("producer_kind_{}", i), nlohmann::json::object(),
                      on_queue(kQueue));
  }
  storage::insert_many_copy(*store_, conn(), jobs);
  const auto before = unknown_kind_series();

  Client client(options());
  client.register_worker("noop", [](JobContext&) { return JobResult::completed(); });
  client.add_queue(queue(kQueue, 4));
  client.start();
  // Every job claimed once and sent back (snoozed) as a kind this process cannot run.
  ASSERT_TRUE(eventually(
      [&] {
        return count(
                   "SELECT count(DISTINCT job_id) FROM attempt_outcomes WHERE state = "
                   "'snoozed'") >= kKinds;
      },
      seconds(30)))
      << count("SELECT count(DISTINCT job_id) FROM attempt_outcomes WHERE state = 'snoozed'");
  client.stop();

  const auto after = unknown_kind_series();
  EXPECT_GE(after.total - before.total, static_cast<std::uint64_t>(kKinds))
      << "every unknown-kind job still counted";
  // A small, fixed number of kinds keep their own series; the rest share kind="other".
  EXPECT_LE(after.count, 21) << "series for " << kKinds << " distinct producer-chosen kinds";
  EXPECT_TRUE(after.has_other);
}

}  // namespace
}  // namespace awa::testing
