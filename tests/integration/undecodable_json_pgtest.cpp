// Jobs whose stored JSON has no nlohmann::json form (issue 31, defect 2): PostgreSQL's
// jsonb accepts numbers beyond a double's range (1e400), nesting thousands of levels deep
// and any Unicode; producers in SQL or another language write them. A claimed batch holding
// one must not be stranded: that job fails alone, with the reason on the job, and the rest
// run. `awa job show`, the dashboard's API and `awa cron list` show such rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "awa/periodic.hpp"
#include "cli_runner.hpp"
#include "runtime_support.hpp"
#include "serve_support.hpp"
#include "storage/store_access.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

// jsonb prints 1e400 as a 1 and 400 zeros: too large for a double.
constexpr const char* kHugeArgs = R"({"x": 1e400})";
constexpr const char* kHugeMetadata = R"({"trace": {"n": 1e400}})";
// PostgreSQL (max_stack_depth 2 MB) takes 10,000 levels of arrays; 20,000 overflow its stack.
constexpr int kDeep = 10000;

std::string deep_array_sql() {
  return fmt::format("(repeat('[', {0}) || repeat(']', {0}))::jsonb", kDeep);
}

class UndecodableJsonTest : public RuntimeTest {
 protected:
  // insert_job_compat, the SQL producer other languages' clients use; args and metadata
  // are SQL expressions.
  JobId insert_sql(const std::string& queue, const std::string& args_sql,
                   const std::string& metadata_sql = "NULL", const std::string& kind = "reads") {
    return conn()
        .exec(fmt::format("SELECT id FROM insert_job_compat(p_kind => '{}', p_queue => '{}', "
                          "p_args => {}, p_metadata => {})",
                          kind, queue, args_sql, metadata_sql))
        .get<std::int64_t>(0, 0);
  }
  static std::string literal(const std::string& json) { return "'" + json + "'::jsonb"; }

  std::string state_of(JobId id) {
    const Admin admin(schema_);
    auto c = Connection::connect(database_url());
    const auto d = admin.job(c, id);
    return d ? d->summary.state : "missing";
  }
  std::int64_t running_jobs() {
    const Admin admin(schema_);
    auto c = Connection::connect(database_url());
    JobFilter f;
    f.state = "running";
    return static_cast<std::int64_t>(admin.list_jobs(c, f).size());
  }
  std::string last_error(JobId id) {
    const auto r = conn().exec(fmt::format(
        "SELECT coalesce(error, '') FROM attempt_outcomes WHERE job_id = {} ORDER BY attempt DESC, "
        "run_lease DESC LIMIT 1",
        id));
    return r.rows() == 0 ? std::string() : r.get<std::string>(0, 0);
  }

  CliResult awa(const std::string& args) {
    return run_cli(fmt::format("--schema {} {}", schema_, args));
  }
};

// The handler of every job here reads its args and metadata, as handlers do.
Handler reading_handler(std::atomic<int>& ran) {
  return [&ran](JobContext& job) {
    const auto& args = job.args();
    const auto& metadata = job.metadata();
    (void)args;
    (void)metadata;
    ++ran;
    return JobResult::completed();
  };
}

TEST_F(UndecodableJsonTest, ClaimReturnsEveryRowOfABatchHoldingAnUndecodableOne) {
  enqueue("claimq", 2, "reads");
  const auto poison = insert_sql("claimq", "'{}'::jsonb", literal(kHugeMetadata));
  enqueue("claimq", 2, "reads");
  QueueStorage::ClaimOptions o;
  o.max_batch = 10;
  std::vector<ClaimedEntry> got;
  ASSERT_NO_THROW(got = storage::consumer(*store_).claim(conn(), "claimq", o));
  ASSERT_EQ(got.size(), 5U);
  bool seen = false;
  for (const auto& e : got) {
    if (e.job_id != poison) {
      EXPECT_EQ(e.metadata_error, "") << e.job_id;
      continue;
    }
    seen = true;
    // Kept as text, with the reason; the value itself is null.
    EXPECT_TRUE(e.metadata.is_null());
    EXPECT_THAT(e.metadata_json, HasSubstr("10000000000000000000"));
    EXPECT_THAT(e.metadata_error, HasSubstr("metadata could not be decoded: number 1000"));
    EXPECT_THAT(e.metadata_error, HasSubstr("(401 characters) is out of the range of a double"));
  }
  EXPECT_TRUE(seen);
}

TEST_F(UndecodableJsonTest, AHandlerThatReadsTheStoredTextGetsItExactly) {
  // Accepted at enqueue (jsonb stores it), so delivered: args_json() and metadata_json()
  // hold what a double cannot.
  const auto id = insert_sql("rawq", literal(kHugeArgs), literal(kHugeMetadata), "raw");
  Client client(options());
  std::mutex mu;
  std::string args_text, metadata_text;  // guarded by mu
  client.register_worker("raw", [&](JobContext& job) {
    std::lock_guard lock(mu);
    args_text = job.args_json();
    metadata_text = job.metadata_json();
    return JobResult::completed();
  });
  client.add_queue(queue("rawq", 2));
  client.start();
  const bool done = eventually([&] { return terminal() >= 1; }, seconds(20));
  client.stop();
  ASSERT_TRUE(done);
  EXPECT_EQ(state_of(id), "completed");
  std::lock_guard lock(mu);
  EXPECT_EQ(args_text, R"({"x": 1)" + std::string(400, '0') + "}");
  EXPECT_EQ(metadata_text, R"({"trace": {"n": 1)" + std::string(400, '0') + "}}");
}

TEST_F(UndecodableJsonTest, AwaWorkRunsEveryJobOfABatchHoldingUndecodableOnes) {
  // The issue's measurement, with `awa work`'s built-in kinds: noop does not read its
  // metadata, so it completes; echo prints its args, which cannot be decoded: failed,
  // once. Nothing is left running.
  enqueue("work", 10, "noop");
  const auto noop = insert_sql("work", "'{}'::jsonb", literal(kHugeMetadata), "noop");
  const auto echo = insert_sql("work", literal(kHugeArgs), "NULL", "echo");
  enqueue("work", 10, "noop");
  WorkerProcess worker(schema_, {"--queue", "work:4"});
  ASSERT_TRUE(eventually([&] { return terminal() >= 22; }, seconds(30)))
      << "terminal " << terminal() << ", running " << running_jobs() << "\n"
      << worker.log();
  EXPECT_EQ(terminal("state = 'completed'"), 21);
  EXPECT_EQ(state_of(noop), "completed");
  EXPECT_EQ(state_of(echo), "failed");
  EXPECT_THAT(last_error(echo), HasSubstr("args could not be decoded: number 1000"));
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes"), 22);
  EXPECT_EQ(running_jobs(), 0);
  EXPECT_EQ(worker.terminate(seconds(20)), 0) << worker.log();
}

TEST_F(UndecodableJsonTest, OneUndecodableJobFailsAloneAndTheRestOfItsBatchRuns) {
  // The issue's measurement: metadata 1e400 among ordinary jobs, and the same in args.
  // All are ready before the client starts, so they share claim batches.
  const auto before = enqueue("poison", 10, "reads");
  const auto bad_metadata = insert_sql("poison", "'{}'::jsonb", literal(kHugeMetadata));
  const auto bad_args = insert_sql("poison", literal(kHugeArgs));
  const auto after = enqueue("poison", 10, "reads");

  Client client(options());
  std::atomic<int> ran{0};
  client.register_worker("reads", reading_handler(ran));
  client.add_queue(queue("poison", 4));
  client.start();
  const bool done = eventually([&] { return terminal() >= 22; }, seconds(20));
  client.stop();
  ASSERT_TRUE(done) << "terminal " << terminal() << ", running " << running_jobs();

  EXPECT_EQ(ran.load(), 20);
  EXPECT_EQ(terminal("state = 'completed'"), 20);
  for (const auto id : before) EXPECT_EQ(state_of(id), "completed") << id;
  for (const auto id : after) EXPECT_EQ(state_of(id), "completed") << id;
  // Terminal at once: a value that cannot be decoded never will be.
  for (const auto id : {bad_metadata, bad_args}) {
    EXPECT_EQ(state_of(id), "failed") << id;
    EXPECT_EQ(count(fmt::format("SELECT count(*) FROM attempt_outcomes WHERE job_id = {}", id)), 1);
  }
  EXPECT_THAT(last_error(bad_metadata), HasSubstr("metadata could not be decoded"));
  EXPECT_THAT(last_error(bad_metadata), HasSubstr("out of the range of a double"));
  EXPECT_THAT(last_error(bad_args), HasSubstr("args could not be decoded"));
  EXPECT_THAT(last_error(bad_args), HasSubstr("out of the range of a double"));
  EXPECT_EQ(running_jobs(), 0);
  const auto s = client.stats();
  EXPECT_EQ(s.completed, 20U);
  EXPECT_EQ(s.failed, 2U);
  EXPECT_EQ(s.retried, 0U);
  EXPECT_EQ(s.stale_completions, 0U);
}

TEST_F(UndecodableJsonTest, DeepNestingAndNonBmpTextRunOrFailCleanly) {
  // Non-BMP text, as \u escapes (a surrogate pair) and as raw UTF-8: decoded, the job runs.
  const auto escaped = insert_sql("unicode", literal(R"({"s": "\ud83d\ude00"})"),
                                  literal(R"({"m": "\ud83d\ude00"})"), "emoji");
  const auto raw =
      insert_sql("unicode", literal(R"({"s": "😀"})"), literal(R"({"m": "😀"})"), "emoji");
  // 10,000 levels: far past what a handler can walk, copy or print without risking its
  // stack. Fails cleanly, alone.
  const auto deep_args = insert_sql("unicode", deep_array_sql());
  const auto deep_metadata = insert_sql(
      "unicode", "'{}'::jsonb", fmt::format("jsonb_build_object('d', {})", deep_array_sql()));
  const auto plain = enqueue("unicode", 3, "reads");

  Client client(options());
  std::atomic<int> ran{0};
  std::mutex mu;
  std::map<JobId, std::pair<std::string, std::string>> seen;  // guarded by mu
  client.register_worker("reads", reading_handler(ran));
  client.register_worker("emoji", [&](JobContext& job) {
    std::lock_guard lock(mu);
    seen[job.job_id()] = {job.args().at("s").get<std::string>(),
                          job.metadata().at("m").get<std::string>()};
    return JobResult::completed();
  });
  client.add_queue(queue("unicode", 4));
  client.start();
  const bool done = eventually([&] { return terminal() >= 7; }, seconds(20));
  client.stop();
  ASSERT_TRUE(done) << "terminal " << terminal() << ", running " << running_jobs();

  const std::string smiley = "\xF0\x9F\x98\x80";  // U+1F600
  for (const auto id : {escaped, raw}) {
    EXPECT_EQ(state_of(id), "completed") << id;
    EXPECT_EQ(seen[id], std::make_pair(smiley, smiley)) << id;
  }
  for (const auto id : plain) EXPECT_EQ(state_of(id), "completed") << id;
  EXPECT_EQ(state_of(deep_args), "failed");
  EXPECT_EQ(state_of(deep_metadata), "failed");
  EXPECT_THAT(last_error(deep_args), HasSubstr("args could not be decoded: nested deeper than"));
  EXPECT_THAT(last_error(deep_metadata),
              HasSubstr("metadata could not be decoded: nested deeper than"));
  EXPECT_EQ(running_jobs(), 0);
  EXPECT_EQ(client.stats().retried, 0U);
}

TEST_F(UndecodableJsonTest, JobShowPrintsJobsWhoseJsonHasNoDecodedForm) {
  const std::vector<JobId> ids = {
      insert_sql("show", literal(kHugeArgs), literal(kHugeMetadata)),
      insert_sql("show", deep_array_sql(),
                 fmt::format("jsonb_build_object('d', {})", deep_array_sql())),
      insert_sql("show", literal(R"({"s": "\ud83d\ude00"})"), literal(R"({"m": "😀"})")),
  };
  for (const auto id : ids) {
    const auto text = awa(fmt::format("job show {}", id));
    EXPECT_EQ(text.exit_code, 0) << text.output.substr(0, 2000);
    EXPECT_THAT(text.output, HasSubstr(fmt::format("job {}", id)));
    const auto json = awa(fmt::format("job show {} --json", id));
    ASSERT_EQ(json.exit_code, 0) << json.output.substr(0, 2000);
    const auto j = nlohmann::json::parse(json.output, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << json.output.substr(0, 2000);
    EXPECT_EQ(j.at("id"), id);
    EXPECT_FALSE(j.at("args").is_null());
    EXPECT_FALSE(j.at("metadata").is_null());
  }
  // What cannot be decoded is shown as the stored text (a JSON string).
  const auto huge = nlohmann::json::parse(awa(fmt::format("job show {} --json", ids[0])).output);
  ASSERT_TRUE(huge.at("args").is_string());
  EXPECT_THAT(huge.at("args").get<std::string>(), HasSubstr("10000000000000000000"));
  const auto emoji = nlohmann::json::parse(awa(fmt::format("job show {} --json", ids[2])).output);
  EXPECT_EQ(emoji.at("args"), nlohmann::json({{"s", "\xF0\x9F\x98\x80"}}));
}

TEST_F(UndecodableJsonTest, CronListShowsScheduleWhoseJsonHasNoDecodedForm) {
  const PeriodicAdmin periodic(schema_);
  auto c = Connection::connect(database_url());
  PeriodicJob job;
  job.name = "huge";
  job.schedule = "@hourly";
  job.kind = "reads";
  periodic.add(c, job);
  job.name = "deep";
  periodic.add(c, job);
  // Another language's producer (or an operator) wrote these rows.
  conn().exec(fmt::format("UPDATE periodic_jobs SET args = {}, metadata = {} WHERE name = 'huge'",
                          literal(kHugeArgs), literal(kHugeMetadata)));
  conn().exec(
      fmt::format("UPDATE periodic_jobs SET args = {} WHERE name = 'deep'", deep_array_sql()));
  const auto text = awa("cron list");
  EXPECT_EQ(text.exit_code, 0) << text.output.substr(0, 2000);
  EXPECT_THAT(text.output, HasSubstr("huge"));
  EXPECT_THAT(text.output, HasSubstr("deep"));
  const auto json = awa("cron list --json");
  ASSERT_EQ(json.exit_code, 0) << json.output.substr(0, 2000);
  const auto j = nlohmann::json::parse(json.output, nullptr, false);
  ASSERT_TRUE(j.is_array()) << json.output.substr(0, 2000);
  ASSERT_EQ(j.size(), 2U);
  // What cannot be decoded is shown as the stored text (a JSON string).
  for (const auto& s : j) EXPECT_TRUE(s.at("args").is_string()) << s.at("name");
  EXPECT_EQ(j[0].at("name"), "deep");
  EXPECT_TRUE(j[0].at("metadata").is_null());
  EXPECT_EQ(j[1].at("name"), "huge");
  EXPECT_THAT(j[1].at("metadata").get<std::string>(), HasSubstr("10000000000000000000"));
}

class UndecodableJsonServeTest : public ServeTest {};

TEST_F(UndecodableJsonServeTest, JobDetailApiAnswersForJobsWhoseJsonHasNoDecodedForm) {
  const auto huge = conn()
                        .exec(fmt::format("SELECT id FROM insert_job_compat(p_kind => 'k', "
                                          "p_queue => 'api', p_args => '{}'::jsonb, p_metadata "
                                          "=> '{}'::jsonb)",
                                          kHugeArgs, kHugeMetadata))
                        .get<std::int64_t>(0, 0);
  const auto deep = conn()
                        .exec(fmt::format("SELECT id FROM insert_job_compat(p_kind => 'k', "
                                          "p_queue => 'api', p_args => {})",
                                          deep_array_sql()))
                        .get<std::int64_t>(0, 0);
  for (const auto id : {huge, deep}) {
    const auto j = get(fmt::format("/api/jobs/{}", id));
    ASSERT_TRUE(j.is_object()) << id;
    EXPECT_EQ(j.at("id"), id);
    EXPECT_TRUE(j.at("args").is_string()) << id;
  }
  const auto list = get("/api/jobs?queue=api");
  EXPECT_EQ(list.at("jobs").size(), 2U);
}

}  // namespace
}  // namespace awa::testing
