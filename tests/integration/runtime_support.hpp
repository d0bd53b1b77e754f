// The runtime tests' shared fixture: RuntimeTest (a migrated schema, client options, an
// enqueue helper) and WorkerProcess (an `awa work` child process); bounded polling,
// eventually(), is support.hpp's.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "awa/client.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

extern char** environ;

namespace awa::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// An `awa --schema S ARGS...` child process; SIGKILLed and reaped on destruction whatever
// happens, and its output printed when the test failed.
class AwaProcess {
 public:
  AwaProcess(const std::string& schema, const std::vector<std::string>& args)
      : AwaProcess(AWA_CLI_PATH, with_schema(schema, args), schema) {}
  // Another program (a test worker): `binary` with `args`, logged like `awa`.
  AwaProcess(const std::string& binary, const std::vector<std::string>& args,
             const std::string& schema)
      : log_path_(::testing::TempDir() + "awa_" + schema + "_" + std::to_string(counter_++) +
                  ".log") {
    std::vector<std::string> argv_s{binary};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    // DATABASE_URL is inherited from the test's environment.
    const int rc = posix_spawn(&pid_, binary.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("posix_spawn failed: " + std::to_string(rc));
  }
  ~AwaProcess() {
    kill9();
    if (::testing::Test::HasFailure()) std::cerr << "--- " << log_path_ << ":\n" << log();
  }
  AwaProcess(const AwaProcess&) = delete;
  AwaProcess& operator=(const AwaProcess&) = delete;

  pid_t pid() const { return pid_; }
  void kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // Sends `sig` and waits (bounded) for a graceful exit; returns the exit code or -1.
  int terminate(milliseconds timeout, int sig = SIGTERM) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    const bool exited = eventually([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; },
                                   timeout, milliseconds(10));
    if (!exited) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  static std::vector<std::string> with_schema(const std::string& schema,
                                              const std::vector<std::string>& args) {
    std::vector<std::string> out{"--schema", schema};
    out.insert(out.end(), args.begin(), args.end());
    return out;
  }

  static inline std::atomic<int> counter_{0};
  std::string log_path_;
  pid_t pid_ = -1;
};

// An `awa work` child process. These tests read the attempt history afterwards: no ring
// prune may remove it (--rotate-ms 0).
class WorkerProcess : public AwaProcess {
 public:
  WorkerProcess(const std::string& schema, std::vector<std::string> args)
      : AwaProcess(schema, with_work(std::move(args))) {}

 private:
  static std::vector<std::string> with_work(std::vector<std::string> args) {
    args.insert(args.begin(), {"work", "--rotate-ms", "0"});
    return args;
  }
};

// A handler for the cancel tests: it says it started, then waits (bounded: 20 s, so a
// missing cancel fails the test instead of hanging it) for its attempt's stop token.
class StopProbe {
 public:
  Handler handler() {
    return [this](JobContext& job) {
      {
        std::lock_guard lock(mu_);
        started_ = true;
      }
      cv_.notify_all();
      std::mutex m;
      std::condition_variable_any w;
      std::unique_lock lock(m);
      saw_stop_ =
          w.wait_for(lock, job.stop_token(), std::chrono::seconds(20), [] { return false; }) ||
          job.stop_token().stop_requested();
      return JobResult::completed();
    };
  }
  bool wait_started(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return started_; });
  }
  bool saw_stop() const { return saw_stop_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;  // guarded by mu_
  std::atomic<bool> saw_stop_{false};
};

class RuntimeTest : public StorageTest {
 protected:
  ClientOptions options() const {
    ClientOptions o;
    o.database_url = database_url();
    o.schema = schema_;
    o.heartbeat_interval = milliseconds(200);
    o.stale_after = seconds(30);
    o.maintenance_interval = milliseconds(100);
    // These tests read the attempt history afterwards, so no ring prune may remove it;
    // rings_runtime_pgtest.cpp runs the runtime with rotation on.
    o.ring_rotate_interval = milliseconds(0);
    o.application_name = "awa_tests_runtime";
    return o;
  }

  QueueConfig queue(const std::string& name, int workers) const {
    QueueConfig q;
    q.name = name;
    q.max_workers = workers;
    return q;
  }

  std::vector<JobId> enqueue(const std::string& q, int n, const std::string& kind = "noop",
                             const nlohmann::json& args = nlohmann::json::object(),
                             int max_attempts = 25) {
    std::vector<JobId> ids;
    for (int done = 0; done < n;) {
      const int k = std::min(500, n - done);
      InsertOpts o = on_queue(q);
      o.max_attempts = max_attempts;
      std::vector<NewJob> jobs(static_cast<std::size_t>(k), NewJob(kind, args, o));
      const auto got = storage::insert_many_copy(*store_, conn(), jobs);
      ids.insert(ids.end(), got.begin(), got.end());
      done += k;
    }
    return ids;
  }

  // Terminal rows: completed, failed, cancelled, dlq ('retried', 'snoozed' and 'rescued'
  // rows close an attempt, not the job).
  std::int64_t terminal(const std::string& where = "true") {
    return count(
        "SELECT count(*) FROM attempt_outcomes WHERE state IN "
        "('completed','failed','cancelled','dlq') "
        "AND " +
        where);
  }

  // The os pid of the `awa work` process holding this schema's leader lock, or 0.
  int leader_os_pid() {
    const auto r = conn().query(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objid = 1279607108 "
        "AND l.objsubid = 2 AND l.classid = hashtext($1)::oid "
        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        schema_);
    if (r.rows() == 0) return 0;
    const auto app = r.get<std::string>(0, 0);
    const std::string prefix = "awa-work-";
    if (app.rfind(prefix, 0) != 0) return -1;  // held by something else (an in-process client)
    return std::stoi(app.substr(prefix.size()));
  }

  // Leader fail-over between two `awa work` processes started with `args` (queue
  // "failover"): once one leads (leader_pid() gives its OS pid), it is SIGKILLed; the
  // survivor must take over and do what only a leader does — promote a scheduled job and
  // rescue an attempt a claimer left open ("orphan" has no workers, so it stays rescued).
  // `check_survivor` runs before the survivor is stopped gracefully.
  void expect_leader_fail_over(const std::vector<std::string>& args,
                               const std::function<int()>& leader_pid,
                               const std::function<void(WorkerProcess&)>& check_survivor) {
    WorkerProcess a(schema_, args);
    WorkerProcess b(schema_, args);
    int leader = 0;
    ASSERT_TRUE(eventually(
        [&] {
          leader = leader_pid();
          return leader > 0;
        },
        seconds(30)))
        << a.log() << b.log();
    ASSERT_TRUE(leader == a.pid() || leader == b.pid()) << leader;
    WorkerProcess& old_leader = leader == a.pid() ? a : b;
    WorkerProcess& survivor = leader == a.pid() ? b : a;
    old_leader.kill9();

    InsertOpts later = on_queue("failover");
    later.run_at = std::chrono::system_clock::now() + seconds(1);
    const auto scheduled =
        storage::insert_many(*store_, conn(),
                             std::vector<NewJob>{NewJob("noop", nlohmann::json::object(), later)})
            .at(0);
    const auto orphan = enqueue("orphan", 1).at(0);
    ASSERT_EQ(storage::consumer(*store_).claim(conn(), "orphan").size(), 1U);

    ASSERT_TRUE(eventually([&] { return leader_pid() == survivor.pid(); }, seconds(30)))
        << "leader " << leader_pid();
    ASSERT_TRUE(eventually(
        [&] {
          return terminal(fmt::format("job_id = {} AND state = 'completed'", scheduled)) == 1;
        },
        seconds(30)));
    ASSERT_TRUE(eventually(
        [&] {
          return count(fmt::format("SELECT count(*) FROM attempt_outcomes WHERE job_id = {} AND "
                                   "state = 'rescued'",
                                   orphan)) == 1;
        },
        seconds(30)));
    check_survivor(survivor);
    EXPECT_EQ(survivor.terminate(seconds(20)), 0) << survivor.log();
  }
};

}  // namespace awa::testing
