// `awa batch open|seal|show|list`, `awa enqueue --batch` and `awa queue follow-up|follow-ups`
// end to end: the tool as a child process against the real server (docs/workflows.md,
// "Batches" and "Follow-up jobs"); exit codes, --json parsed, refusals that write nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include <fmt/format.h>

#include "admin_jobs_support.hpp"
#include "cli_runner.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CliBatchTest : public JobAdminTest {
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
  // Runs `awa enqueue ...`, which must succeed, and returns the ids it printed.
  std::vector<JobId> enqueue_cli(const std::string& args) {
    const auto r = awa("enqueue " + args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    std::vector<JobId> ids;
    std::istringstream in(r.output);
    for (JobId id = 0; in >> id;) ids.push_back(id);
    return ids;
  }
  std::size_t jobs_in(const std::string& queue) {
    JobFilter f;
    f.queue = queue;
    return admin().list_jobs(ac(), f).size();
  }
};

TEST_F(CliBatchTest, MembersEnqueuedWithBatchAreCountedAndTheCompletionJobGetsTheCounts) {
  const auto opened =
      json("batch open nightly --on-complete import_done --queue done --args '{\"day\": \"mon\"}'");
  EXPECT_EQ(opened.at("name"), "nightly");
  EXPECT_EQ(opened.at("sealed"), false);
  EXPECT_EQ(opened.at("members"), 0);
  EXPECT_EQ(opened.at("on_complete"), "import_done");
  EXPECT_EQ(opened.at("queue"), "done");
  EXPECT_TRUE(opened.at("completion_job").is_null());

  // One job alone and two with --count (one insert call): all three join the batch.
  auto ids = enqueue_cli("item --queue items --max-attempts 1 --batch nightly");
  const auto more = enqueue_cli("item --queue items --max-attempts 1 --count 2 --batch nightly");
  ids.insert(ids.end(), more.begin(), more.end());
  ASSERT_EQ(ids.size(), 3U);

  const auto open = json("batch show nightly --members 3");
  EXPECT_EQ(open.at("members"), 3);
  EXPECT_EQ(open.at("sealed"), false);
  EXPECT_EQ(open.at("pending"), 3);
  EXPECT_EQ(open.at("completed"), 0);
  ASSERT_EQ(open.at("member_jobs").size(), 3U) << open.dump();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(open.at("member_jobs").at(i),
              nlohmann::json({{"id", ids[i]}, {"state", "available"}}));
  }
  EXPECT_FALSE(json("batch show nightly").contains("member_jobs")) << "only with --members";

  const auto sealed = json("batch seal nightly");
  EXPECT_EQ(sealed.at("sealed"), true);
  EXPECT_EQ(sealed.at("members"), 3);
  EXPECT_EQ(sealed.at("finished"), false);
  EXPECT_TRUE(sealed.at("sealed_at").is_string());
  const auto late = awa("enqueue item --queue items --batch nightly");
  EXPECT_EQ(late.exit_code, 1) << late.output;
  EXPECT_THAT(late.output, HasSubstr("batch \"nightly\" is sealed"));
  EXPECT_EQ(jobs_in("items"), 3U) << "the refused insert wrote nothing";

  // The last one cancelled while it waits, the first completed, the second failed for good.
  const auto cancel = awa(fmt::format("job cancel {}", ids[2]));
  EXPECT_EQ(cancel.exit_code, 0) << cancel.output;
  EXPECT_EQ(finish(claim_one("items", ids[0]), Outcome::kCompleted), "completed");
  EXPECT_EQ(finish(claim_one("items", ids[1]), Outcome::kRetry, "boom"), "failed");

  const auto done = json("batch show nightly --members 10");
  EXPECT_EQ(done.at("members"), 3);
  EXPECT_EQ(done.at("completed"), 1);
  EXPECT_EQ(done.at("failed"), 1);
  EXPECT_EQ(done.at("cancelled"), 1);
  EXPECT_EQ(done.at("pending"), 0);
  EXPECT_EQ(done.at("finished"), true);
  ASSERT_TRUE(done.at("completion_job").is_number_integer()) << done.dump();
  EXPECT_EQ(done.at("member_jobs"), nlohmann::json({{{"id", ids[0]}, {"state", "completed"}},
                                                    {{"id", ids[1]}, {"state", "failed"}},
                                                    {{"id", ids[2]}, {"state", "cancelled"}}}));
  const JobId completion = done.at("completion_job").get<JobId>();
  const auto job = admin().job(ac(), completion);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->summary.kind, "import_done");
  EXPECT_EQ(job->summary.queue, "done");
  EXPECT_EQ(nlohmann::json::parse(job->args_json), nlohmann::json({{"day", "mon"},
                                                                   {"batch", "nightly"},
                                                                   {"members", 3},
                                                                   {"completed", 1},
                                                                   {"failed", 1},
                                                                   {"cancelled", 1}}));

  const auto text = awa("batch show nightly --members 2");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_THAT(text.output, HasSubstr("batch nightly  finished"));
  EXPECT_THAT(text.output, HasSubstr("3/3 ended (1 completed, 1 failed, 1 cancelled)"));
  EXPECT_THAT(text.output, HasSubstr(fmt::format("completion   job {}", completion)));
  EXPECT_THAT(text.output, HasSubstr(fmt::format("{:>12} completed", ids[0])));
  EXPECT_THAT(text.output, Not(HasSubstr(fmt::format("{:>12} cancelled", ids[2]))))
      << "--members 2 lists two";

  const auto all = json("batch list");
  ASSERT_EQ(all.size(), 1U);
  EXPECT_EQ(all.at(0).at("name"), "nightly");
  EXPECT_EQ(all.at(0).at("completion_job"), completion);
  EXPECT_EQ(json("batch list --open"), nlohmann::json::array()) << "a finished batch is not open";
  const auto table = awa("batch list");
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("nightly"));
  EXPECT_THAT(table.output, HasSubstr("3/3"));
}

TEST_F(CliBatchTest, AnOpenBatchShowsNoneYetAndAnEmptyBatchFinishesWhenSealed) {
  EXPECT_EQ(awa("batch open pending --on-complete later").exit_code, 0);
  enqueue_cli("item --queue p --batch pending");
  const auto open = awa("batch show pending");
  EXPECT_EQ(open.exit_code, 0) << open.output;
  EXPECT_THAT(open.output, HasSubstr("batch pending  open"));
  EXPECT_THAT(open.output, HasSubstr("0/1 ended (0 completed, 0 failed, 0 cancelled)"));
  EXPECT_THAT(open.output, HasSubstr("completion   none yet"));
  EXPECT_EQ(json("batch list --open").size(), 1U);

  // No completion kind: the batch only counts; sealed empty, it finishes at once.
  EXPECT_EQ(awa("batch open empty").exit_code, 0);
  const auto sealed = json("batch seal empty");
  EXPECT_EQ(sealed.at("finished"), true);
  EXPECT_EQ(sealed.at("members"), 0);
  EXPECT_TRUE(sealed.at("completion_job").is_null());
  EXPECT_TRUE(sealed.at("on_complete").is_null());
  const auto text = awa("batch show empty --members 5");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_THAT(text.output, HasSubstr("none (the batch only counts)"));
  EXPECT_THAT(text.output, HasSubstr("no members"));
  // The newest first.
  const auto all = json("batch list");
  ASSERT_EQ(all.size(), 2U);
  EXPECT_EQ(all.at(0).at("name"), "empty");
  EXPECT_EQ(json("batch list --limit 1").size(), 1U);
}

TEST_F(CliBatchTest, RefusalsAreErrorsAndWriteNothing) {
  const auto missing = awa("enqueue item --batch missing");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("batch \"missing\" does not exist"));
  EXPECT_THAT(missing.output, HasSubstr("SQLSTATE 23503"));
  const auto missing_many = awa("enqueue item --batch missing --count 5");
  EXPECT_EQ(missing_many.exit_code, 1) << missing_many.output;
  EXPECT_TRUE(admin().list_jobs(ac(), JobFilter{}).empty()) << "nothing of the call is written";

  EXPECT_EQ(awa("batch open b").exit_code, 0);
  const auto again = awa("batch open b --on-complete other");
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_THAT(again.output, HasSubstr("batch \"b\" already exists"));
  EXPECT_THAT(again.output, HasSubstr("awa batch show b"));
  EXPECT_TRUE(json("batch show b").at("on_complete").is_null()) << "the first one stands";

  for (const char* cmd : {"batch show nosuch", "batch show nosuch --json"}) {
    const auto r = awa(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr("batch nosuch not found")) << cmd;
  }
  const auto seal = awa("batch seal nosuch");
  EXPECT_EQ(seal.exit_code, 1) << seal.output;
  EXPECT_THAT(seal.output, HasSubstr("batch \"nosuch\" does not exist"));

  for (const char* cmd : {"batch open 'a b'", "batch show 'a/b'", "enqueue item --batch 'x y'"}) {
    const auto r = awa(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr("invalid batch name")) << cmd;
  }
  const auto unique = awa("enqueue item --batch b --unique");
  EXPECT_EQ(unique.exit_code, 1) << unique.output;
  EXPECT_THAT(unique.output, HasSubstr("cannot also be unique"));
  const auto not_object = awa("batch open c --args '[1]'");
  EXPECT_EQ(not_object.exit_code, 1) << not_object.output;
  EXPECT_THAT(not_object.output, HasSubstr("--args must be a JSON object"));
  const auto not_json = awa("batch open c --args '{'");
  EXPECT_EQ(not_json.exit_code, 1) << not_json.output;
  EXPECT_THAT(not_json.output, HasSubstr("--args is not valid JSON"));

  for (const char* cmd : {"batch", "batch show", "batch open", "batch show b --members 0",
                          "batch list --limit 0", "batch seal b c"}) {
    const auto r = awa(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
  }
  EXPECT_EQ(json("batch list").size(), 1U) << "only b was opened";
  EXPECT_TRUE(admin().list_jobs(ac(), JobFilter{}).empty());
}

TEST_F(CliBatchTest, QueueFollowUpsAreSetListedReplacedAndCleared) {
  EXPECT_EQ(json("queue follow-ups"), nlohmann::json::array());
  EXPECT_EQ(json("queue follow-up payments --on completed --kind ledger_sync"),
            nlohmann::json({{{"source_queue", "payments"},
                             {"on", "completed"},
                             {"kind", "ledger_sync"},
                             {"queue", "payments"}}}));
  json("queue follow-up payments --on exhausted --kind payment_alert --to-queue ops");
  json("queue follow-up other --on completed --kind audit --to-queue ledger");
  const auto payments = json("queue follow-ups payments");
  ASSERT_EQ(payments.size(), 2U) << payments.dump();
  EXPECT_EQ(payments.at(1), nlohmann::json({{"source_queue", "payments"},
                                            {"on", "exhausted"},
                                            {"kind", "payment_alert"},
                                            {"queue", "ops"}}));
  EXPECT_EQ(json("queue follow-ups").size(), 3U);

  // Setting a trigger again replaces its job.
  const auto replaced =
      json("queue follow-up payments --on completed --kind ledger_sync --to-queue ledger");
  ASSERT_EQ(replaced.size(), 2U) << replaced.dump();
  EXPECT_EQ(replaced.at(0).at("queue"), "ledger");

  // It fires: a payments job that completes enqueues ledger_sync on ledger.
  const JobId paid = enqueue("payments");
  EXPECT_EQ(finish(claim_one("payments", paid), Outcome::kCompleted), "completed");
  JobFilter f;
  f.queue = "ledger";
  const auto followed = admin().list_jobs(ac(), f);
  ASSERT_EQ(followed.size(), 1U);
  EXPECT_EQ(followed[0].kind, "ledger_sync");

  const auto text = awa("queue follow-ups payments");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_THAT(text.output, HasSubstr("payment_alert"));
  EXPECT_THAT(text.output, HasSubstr("ops"));

  EXPECT_EQ(json("queue follow-up payments --on completed --clear"),
            nlohmann::json({{{"source_queue", "payments"},
                             {"on", "exhausted"},
                             {"kind", "payment_alert"},
                             {"queue", "ops"}}}));
  const auto cleared = awa("queue follow-up payments --on exhausted --clear");
  EXPECT_EQ(cleared.exit_code, 0) << cleared.output;
  EXPECT_THAT(cleared.output, HasSubstr("queue payments has no follow-up jobs"));
  EXPECT_EQ(json("queue follow-ups payments"), nlohmann::json::array());
  EXPECT_EQ(json("queue follow-ups").size(), 1U) << "other's stays";

  for (const char* cmd :
       {"queue follow-up payments --on completed", "queue follow-up payments --kind k",
        "queue follow-up payments --on completed --kind k --clear",
        "queue follow-up payments --on ended --kind k",
        "queue follow-up payments --on completed --clear --to-queue x", "queue follow-ups a b"}) {
    const auto r = awa(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
  }
  const auto bad = awa("queue follow-up 'a b' --on completed --kind k");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("invalid queue name"));
  EXPECT_EQ(json("queue follow-ups").size(), 1U) << "refusals change nothing";
}

}  // namespace
}  // namespace awa::testing
