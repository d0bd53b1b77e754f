// `awa job ...` and `awa dlq ...` end to end: the tool as a child process against the real
// server; exit codes, --json parsed, errors for unknown ids, bad queues and values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "admin_jobs_support.hpp"
#include "cli_runner.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

class CliJobsTest : public JobAdminTest {
 protected:
  CliResult awa(const std::string& args) {
    return run_cli(fmt::format("--schema {} {}", schema_, args));
  }
  // Runs a command that must succeed and print one JSON document.
  nlohmann::json json(const std::string& args) {
    const auto r = awa(args + " --json");
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    try {
      return nlohmann::json::parse(r.output);
    } catch (const std::exception& e) {
      ADD_FAILURE() << args << ": not JSON: " << r.output;
      return nullptr;
    }
  }
};

TEST_F(CliJobsTest, ListAndShowEveryStateAsJson) {
  set_shards("cl", 8);
  const auto ids = every_state("cl");
  const auto list = json("job list --queue cl");
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), ids.size());
  std::map<JobId, std::string> states;
  for (const auto& j : list) states[j.at("id").get<JobId>()] = j.at("state").get<std::string>();
  EXPECT_EQ(states[ids.at("waiting_external")], "waiting_external");
  EXPECT_EQ(states[ids.at("dlq")], "dlq");
  EXPECT_EQ(states[ids.at("cancelled_scheduled")], "cancelled");

  const auto failed = json("job list --state failed");
  ASSERT_EQ(failed.size(), 1U);
  EXPECT_EQ(failed[0].at("id"), ids.at("failed"));
  EXPECT_EQ(failed[0].at("kind"), "failing");
  EXPECT_TRUE(failed[0].at("enqueue_shard").is_number());
  const auto page = json(fmt::format("job list --queue cl --limit 2 --after {}", ids.at("failed")));
  ASSERT_EQ(page.size(), 2U);
  EXPECT_GT(page[0].at("id").get<JobId>(), ids.at("failed"));

  const auto show = json(fmt::format("job show {}", ids.at("waiting_external")));
  EXPECT_EQ(show.at("state"), "waiting_external");
  EXPECT_EQ(show.at("progress"), nlohmann::json({{"step", 3}}));
  EXPECT_EQ(show.at("args"), nlohmann::json::object());
  EXPECT_TRUE(show.at("lane_seq").is_number());
  const auto dead = json(fmt::format("job show {}", ids.at("dlq")));
  EXPECT_EQ(dead.at("errors").at(0).at("error"), "fatal");
  EXPECT_EQ(dead.at("timeline").at(0).at("event"), "created");
  EXPECT_TRUE(dead.at("enqueue_shard").is_null());

  const auto text = awa(fmt::format("job show {}", ids.at("failed")));
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_THAT(text.output, HasSubstr("failed"));
  EXPECT_THAT(text.output, HasSubstr("boom"));
  const auto table = awa("job list --queue cl");
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("waiting_external"));
}

TEST_F(CliJobsTest, ErrorsForUnknownIdsBadValuesAndMissingOptions) {
  const auto id = enqueue("ce");
  const auto missing = awa("job show 999999");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output, HasSubstr("job 999999 not found"));
  EXPECT_EQ(awa("job retry 999999").exit_code, 1);
  EXPECT_THAT(awa("job retry 999999").output, HasSubstr("job 999999 not found"));
  const auto live = awa(fmt::format("job retry {}", id));
  EXPECT_EQ(live.exit_code, 1);
  EXPECT_THAT(live.output, HasSubstr("is available"));
  const auto prio = awa(fmt::format("job set-priority {} 5", id));
  EXPECT_EQ(prio.exit_code, 1);
  EXPECT_THAT(prio.output, HasSubstr("priority 5 is outside 1..4"));
  const auto bad_queue = awa(fmt::format("job move {} --queue 'a b'", id));
  EXPECT_EQ(bad_queue.exit_code, 1);
  EXPECT_THAT(bad_queue.output, HasSubstr("invalid queue name \"a b\""));
  EXPECT_NE(awa(fmt::format("job move {}", id)).exit_code, 0);  // --queue is required
  const auto state = awa("job list --state sleeping");
  EXPECT_EQ(state.exit_code, 1);
  EXPECT_THAT(state.output, HasSubstr("unknown job state \"sleeping\""));
  EXPECT_EQ(awa("job list --limit 0").exit_code, 1);
  const auto neither = awa("job retry-failed");
  EXPECT_EQ(neither.exit_code, 1);
  EXPECT_THAT(neither.output, HasSubstr("needs --queue Q or --kind K"));
  EXPECT_NE(awa("job show notanumber").exit_code, 0);
  // Nothing changed.
  EXPECT_EQ(state_of(id), "available");
  EXPECT_EQ(admin().job(ac(), id)->summary.priority, 2);
  EXPECT_EQ(admin().job(ac(), id)->summary.queue, "ce");
}

TEST_F(CliJobsTest, RetryMoveSetPriorityAndCancel) {
  set_shards("dst", 4);
  const auto f = enqueue(opts("cm", 2, std::nullopt, 1), "f");
  EXPECT_EQ(finish(claim_one("cm", f), Outcome::kFail, "x"), "failed");
  const auto retried = json(fmt::format("job retry {}", f));
  EXPECT_EQ(retried, nlohmann::json({{"id", f}, {"state", "failed"}, {"outcome", "retried"}}));
  EXPECT_EQ(state_of(f), "available");

  const auto moved = awa(fmt::format("job move {} --queue dst", f));
  EXPECT_EQ(moved.exit_code, 0) << moved.output;
  EXPECT_THAT(moved.output, HasSubstr("moved"));
  EXPECT_EQ(admin().job(ac(), f)->summary.queue, "dst");
  EXPECT_EQ(awa(fmt::format("job set-priority {} 1", f)).exit_code, 0);
  EXPECT_EQ(admin().job(ac(), f)->summary.priority, 1);
  EXPECT_LT(*admin().job(ac(), f)->summary.enqueue_shard, 4);

  claim_one("dst", f);
  const auto running = awa(fmt::format("job move {} --queue cm", f));
  EXPECT_EQ(running.exit_code, 1);
  EXPECT_THAT(running.output, HasSubstr("is running"));
  const auto cancel = awa(fmt::format("job cancel {}", f));
  EXPECT_EQ(cancel.exit_code, 0) << cancel.output;
  EXPECT_EQ(state_of(f), "cancelled");
  EXPECT_EQ(awa(fmt::format("job cancel {}", f)).exit_code, 1);  // already finished

  const auto g = enqueue(opts("cm", 2, std::nullopt, 1), "g");
  EXPECT_EQ(finish(claim_one("cm", g), Outcome::kFail, "x"), "failed");
  const auto bulk = json("job retry-failed --kind g");
  EXPECT_EQ(bulk, nlohmann::json({{"retried", {g}}}));
  EXPECT_EQ(state_of(g), "available");
}

TEST_F(CliJobsTest, DlqListDepthRetryPurge) {
  set_dlq("dq", true);
  std::vector<JobId> dead;
  for (int i = 0; i < 3; ++i) {
    const auto id = enqueue(opts("dq"), "k" + std::to_string(i));
    EXPECT_EQ(finish(claim_one("dq", id), Outcome::kFail, "bad"), "dlq");
    dead.push_back(id);
  }
  const auto list = json("dlq list --queue dq");
  ASSERT_EQ(list.size(), 3U);
  EXPECT_EQ(list[0].at("id"), dead[0]);
  EXPECT_EQ(list[0].at("reason"), "bad");
  EXPECT_EQ(list[0].at("errors").at(0).at("attempt"), 1);
  EXPECT_EQ(json("dlq list --kind k1").size(), 1U);
  EXPECT_EQ(json("dlq depth"),
            nlohmann::json({{"total", 3}, {"queues", {{{"queue", "dq"}, {"depth", 3}}}}}));

  // Bulk guards: nothing changes.
  for (const char* cmd : {"dlq retry", "dlq purge"}) {
    const auto r = awa(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_THAT(r.output, HasSubstr("without a filter")) << cmd;
  }
  EXPECT_EQ(admin().queue_counts(ac(), "dq").dlq, 3);
  const auto bad_age = awa("dlq purge --older-than 7weeks");
  EXPECT_EQ(bad_age.exit_code, 1);
  EXPECT_THAT(bad_age.output, HasSubstr("like 7d, 12h, 30m or 90s"));
  EXPECT_EQ(awa("dlq purge --older-than 7d").exit_code, 0);  // none that old
  EXPECT_EQ(admin().queue_counts(ac(), "dq").dlq, 3);

  EXPECT_EQ(json(fmt::format("dlq retry {}", dead[0])), nlohmann::json({{"retried", {dead[0]}}}));
  EXPECT_EQ(state_of(dead[0]), "available");
  const auto gone = awa(fmt::format("dlq retry {}", dead[0]));
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.output, HasSubstr("not in the dlq"));
  EXPECT_EQ(json("dlq retry --kind k1"), nlohmann::json({{"retried", {dead[1]}}}));
  EXPECT_EQ(json(fmt::format("dlq purge {}", dead[2])), nlohmann::json({{"purged", 1}}));
  EXPECT_EQ(json("dlq purge --all"), nlohmann::json({{"purged", 0}}));
  EXPECT_EQ(json("dlq depth"), nlohmann::json({{"total", 0}, {"queues", nlohmann::json::array()}}));
  EXPECT_EQ(admin().queue_counts(ac(), "dq").available, 2);
}

}  // namespace
}  // namespace awa::testing
