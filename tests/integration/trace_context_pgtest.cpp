// W3C trace context through the queue: a producer's context (InsertOpts::trace, the
// thread's trace::Scope, a SQL producer's metadata, `awa enqueue --traceparent`) is stored
// with the job by every insert path and reaches the handler (JobContext::trace_context),
// which passes it on to the jobs it enqueues and to its follow-ups.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <ostream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/error.hpp"
#include "awa/trace.hpp"
#include "cli_runner.hpp"
#include "runtime_support.hpp"

namespace awa::trace {
// Readable failures: gtest finds it by argument-dependent lookup.
inline void PrintTo(const Context& c, std::ostream* os) {
  *os << c.traceparent << (c.tracestate.empty() ? "" : " " + c.tracestate);
}
}  // namespace awa::trace

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

// Distinct contexts, one per producer under test.
std::string parent_of(int n) {
  return fmt::format("00-{:032x}-{:016x}-01", 0xabc000 + n, 0x100 + n);
}

class TraceContextTest : public RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    queue_ = "traced_" + schema_;
  }

  // Starts a client whose "seen" handler records, by the job's args "name", the context its
  // job carries and the thread's current one; "spawn" also enqueues a child job named
  // "<name>/child" and declares a follow-up "<name>/follow".
  void start() {
    client_ = std::make_unique<Client>(options());
    const auto record = [this](JobContext& job) {
      const auto name = job.args().at("name").get<std::string>();
      const auto* current = trace::current();
      std::lock_guard lock(mu_);
      seen_[name] = job.trace_context();
      current_[name] = current ? std::optional<trace::Context>(*current) : std::nullopt;
    };
    client_->register_worker("seen", [record](JobContext& job) {
      record(job);
      return JobResult::completed();
    });
    client_->register_worker("spawn", [this, record](JobContext& job) {
      record(job);
      const auto name = job.args().at("name").get<std::string>();
      client_->insert(NewJob("seen", {{"name", name + "/child"}}, on_queue(queue_)));
      return JobResult::completed().then(
          FollowUpOn::kCompleted, NewJob("seen", {{"name", name + "/follow"}}, on_queue(queue_)));
    });
    client_->add_queue(queue(queue_, 4));
    client_->start();
  }

  // Waits until the handler saw `name`; its context then.
  std::optional<trace::Context> seen(const std::string& name) {
    std::optional<trace::Context> out;
    const bool arrived = eventually(
        [&] {
          std::lock_guard lock(mu_);
          const auto it = seen_.find(name);
          if (it == seen_.end()) return false;
          out = it->second;
          return true;
        },
        seconds(20));
    EXPECT_TRUE(arrived) << name << " was never handled";
    return out;
  }
  std::optional<trace::Context> current_in_handler(const std::string& name) {
    std::lock_guard lock(mu_);
    return current_.at(name);
  }

  NewJob job(const std::string& name, const std::string& kind = "seen") const {
    return NewJob(kind, {{"name", name}}, on_queue(queue_));
  }

  std::string queue_;
  std::unique_ptr<Client> client_;
  std::mutex mu_;
  std::map<std::string, std::optional<trace::Context>> seen_;     // guarded by mu_
  std::map<std::string, std::optional<trace::Context>> current_;  // guarded by mu_
};

TEST_F(TraceContextTest, EveryInsertPathStoresTheProducersContextForTheHandler) {
  start();
  // InsertOpts::trace through the one-job path, with a tracestate.
  {
    NewJob j = job("explicit");
    j.opts.trace = trace::parse(parent_of(1), "vendor=x");
    client_->insert(j);
  }
  // The thread's context, through the one-job path, an array insert, COPY, a unique
  // insert and a job with a parent.
  JobId parent = 0;
  {
    trace::Scope scope(trace::parse(parent_of(2)));
    client_->insert(job("scoped_one"));
    storage::insert_many(*store_, conn(),
                         std::vector<NewJob>{job("scoped_array_a"), job("scoped_array_b")});
    storage::insert_many_copy(*store_, conn(),
                              std::vector<NewJob>{job("scoped_copy_a"), job("scoped_copy_b")});
    NewJob unique = job("scoped_unique");
    unique.opts.unique.emplace();
    EXPECT_FALSE(client_->insert_result(unique).duplicate);
    parent = client_->insert(job("scoped_parent"));
    NewJob child = job("scoped_after");
    child.opts.after = {parent};
    client_->insert(child);
    // A job that names its own traceparent in its metadata keeps it.
    NewJob own = job("own_metadata");
    own.opts.metadata = {{"traceparent", parent_of(3)}};
    client_->insert(own);
  }
  // After the scope: nothing.
  client_->insert(job("untraced"));

  EXPECT_EQ(seen("explicit"), trace::parse(parent_of(1), "vendor=x"));
  for (const auto* name : {"scoped_one", "scoped_array_a", "scoped_array_b", "scoped_copy_a",
                           "scoped_copy_b", "scoped_unique", "scoped_parent", "scoped_after"}) {
    EXPECT_EQ(seen(name), trace::parse(parent_of(2))) << name;
  }
  EXPECT_EQ(seen("own_metadata"), trace::parse(parent_of(3)));
  EXPECT_EQ(seen("untraced"), std::nullopt);
  // The handler runs with its job's context as the thread's current one.
  EXPECT_EQ(current_in_handler("explicit"), trace::parse(parent_of(1), "vendor=x"));
  EXPECT_EQ(current_in_handler("untraced"), std::nullopt);
  client_->stop();
}

TEST_F(TraceContextTest, AHandlersJobsAndFollowUpsCarryItsTraceOn) {
  start();
  NewJob root = job("root", "spawn");
  root.opts.trace = trace::parse(parent_of(4), "k=v");
  client_->insert(root);
  const auto expected = trace::parse(parent_of(4), "k=v");
  EXPECT_EQ(seen("root"), expected);
  EXPECT_EQ(seen("root/child"), expected) << "a job enqueued inside the handler";
  EXPECT_EQ(seen("root/follow"), expected) << "a follow-up declared by the handler";
  // And an untraced job's children stay untraced.
  client_->insert(job("plain", "spawn"));
  EXPECT_EQ(seen("plain/child"), std::nullopt);
  EXPECT_EQ(seen("plain/follow"), std::nullopt);
  client_->stop();
}

TEST_F(TraceContextTest, ASqlProducersTraceparentArrivesAndABadOneIsRefused) {
  start();
  conn().exec(fmt::format(
      "SELECT insert_job_compat(p_kind => 'seen', p_args => '{{\"name\": \"sql\"}}', "
      "p_queue => '{}', p_metadata => jsonb_build_object('traceparent', '{}', 'tracestate', "
      "'py=1', 'origin', 'python'))",
      queue_, parent_of(5)));
  EXPECT_EQ(seen("sql"), trace::parse(parent_of(5), "py=1"));
  conn().exec(fmt::format(
      "SELECT insert_jobs_compat(jsonb_build_array(jsonb_build_object('kind', 'seen', 'args', "
      "jsonb_build_object('name', 'sql_many'), 'queue', '{}', 'metadata', "
      "jsonb_build_object('traceparent', '{}'))))",
      queue_, parent_of(6)));
  EXPECT_EQ(seen("sql_many"), trace::parse(parent_of(6)));

  const auto before =
      count("SELECT (SELECT count(*) FROM ready_entries) + (SELECT count(*) FROM deferred_jobs)");
  for (const auto* bad :
       {R"({"traceparent": "00-abc"})", R"({"traceparent": 7})", R"({"tracestate": "k=v"})",
        R"({"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"})"}) {
    try {
      conn().exec(fmt::format(
          "SELECT insert_job_compat(p_kind => 'seen', p_queue => '{}', p_metadata => '{}')", queue_,
          bad));
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.sqlstate(), "22023") << bad << ": " << e.what();
      EXPECT_THAT(e.what(), HasSubstr("metadata.trace")) << bad;
    }
  }
  EXPECT_EQ(
      count("SELECT (SELECT count(*) FROM ready_entries) + (SELECT count(*) FROM deferred_jobs)"),
      before)
      << "nothing half-written";
  client_->stop();
}

TEST_F(TraceContextTest, TheCliStoresTraceparentFromItsFlagOrTheEnvironment) {
  const auto awa = [this](const std::string& args) {
    return run_cli(fmt::format("--schema {} {}", schema_, args));
  };
  const auto metadata_of = [&](const std::string& out) {
    const JobId id = std::stoll(out);
    const auto shown = awa(fmt::format("job show {} --json", id));
    EXPECT_EQ(shown.exit_code, 0) << shown.output;
    return nlohmann::json::parse(shown.output).at("metadata");
  };
  auto r = awa(fmt::format("enqueue seen --queue {} --traceparent {} --tracestate a=1", queue_,
                           parent_of(7)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(metadata_of(r.output),
            (nlohmann::json{{"traceparent", parent_of(7)}, {"tracestate", "a=1"}}));

  // run_cli starts with the binary's path: the environment goes through env(1).
  r = [&] {
    const std::string cmd = fmt::format(
        "env TRACEPARENT={} TRACESTATE=b=2 {} --schema {} enqueue "
        "seen --queue {} 2>&1",
        parent_of(8), AWA_CLI_PATH, schema_, queue_);
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[256];
    while (const auto n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    const int status = ::pclose(p);
    return CliResult{WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  }();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(metadata_of(r.output),
            (nlohmann::json{{"traceparent", parent_of(8)}, {"tracestate", "b=2"}}));

  r = awa(fmt::format("enqueue seen --queue {} --traceparent 00-nope", queue_));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("traceparent \"00-nope\" is not 00-"));
  r = awa(fmt::format("enqueue seen --queue {} --tracestate a=1", queue_));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--tracestate needs --traceparent"));
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries"), 2) << "the refused calls wrote nothing";
}

}  // namespace
}  // namespace awa::testing
