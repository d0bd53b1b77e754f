// A child process of the browser test (chromedriver, `awa serve`): fork/exec with stdout
// and stderr going to a log file, learned facts read back from that log (a port), and
// ended by its pid when the owner goes.
//
// The child gets a process group of its own, so stop() can also end what it started in
// turn (chromedriver starts chromium and chromium its helpers): after the child itself
// has gone, the group's leftovers get SIGKILL. The group id is the child's pid, and the
// group holds only processes this test started.
//
// If the test process dies, PR_SET_PDEATHSIG kills the child. REQUIRES: construct from
// the thread that outlives the child (the main thread): the death signal fires when the
// *thread* that forked exits. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <regex>
#include <string>
#include <vector>

namespace awa::browser {

class ChildProcess {
 public:
  // argv[0] without a slash is looked up in PATH (before fork: only async-signal-safe
  // calls happen between fork and exec). Throws std::runtime_error when it is not found
  // or fork fails; a failed exec makes the child exit with 127.
  ChildProcess(std::vector<std::string> argv, std::string log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const noexcept { return pid_; }
  const std::string& log_path() const noexcept { return log_path_; }
  // Everything the child wrote so far.
  std::string log() const;

  // Polls the log until `re` matches and returns the first capture group. Throws
  // std::runtime_error, quoting the log, when `timeout` passes or the child exits first.
  std::string wait_for_log(const std::regex& re, std::chrono::milliseconds timeout);

  // SIGTERM, up to `grace` for the child to exit, then SIGKILL; reaps it, then SIGKILLs
  // whatever is left of its process group. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

  // Whether the child is still running (reaps it when it has exited).
  bool running();

 private:
  std::string log_path_;
  std::string program_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

// `name` resolved through PATH (as execvp would), or `name` itself when it has a slash.
// Throws std::runtime_error when no executable is found.
std::string find_program(const std::string& name);

}  // namespace awa::browser
