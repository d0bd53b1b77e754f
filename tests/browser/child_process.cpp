#include "child_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace awa::browser {
namespace {

using Clock = std::chrono::steady_clock;

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

}  // namespace

std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return name;
    throw std::runtime_error(name + ": not an executable file");
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw std::runtime_error(name + " not found in PATH (scripts/install-deps --test installs it)");
}

ChildProcess::ChildProcess(std::vector<std::string> argv, std::string log_path)
    : log_path_(std::move(log_path)) {
  if (argv.empty()) throw std::invalid_argument("ChildProcess: empty argv");
  program_ = find_program(argv[0]);
  argv[0] = program_;
  // Everything the child needs is prepared before fork: the parent may have other threads,
  // so the child may only make async-signal-safe calls until exec.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) throw std::runtime_error("cannot open " + log_path_);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);  // the test died before prctl
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::execve(args[0], args.data(), environ);
    ::_exit(127);
  }
  // Also from the parent: whichever runs first, the group exists before stop() needs it.
  ::setpgid(pid, pid);
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  pid_ = pid;
}

ChildProcess::~ChildProcess() { stop(); }

std::string ChildProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  exit_status_ = status;
  // Reaped: its group may still hold helpers it started.
  ::kill(-pid_, SIGKILL);
  pid_ = -1;
  return false;
}

std::string ChildProcess::wait_for_log(const std::regex& re, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const std::string text = log();
    std::smatch m;
    if (std::regex_search(text, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
    if (!running()) {
      throw std::runtime_error(program_ + " exited (" + describe_status(exit_status_) +
                               ") before it was ready; its output:\n" + text);
    }
    if (Clock::now() >= deadline) {
      throw std::runtime_error(program_ + " not ready within " + std::to_string(timeout.count()) +
                               " ms; its output:\n" + text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void ChildProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return;
  const pid_t pid = pid_;
  ::kill(pid, SIGTERM);
  const auto deadline = Clock::now() + grace;
  int status = 0;
  pid_t r = 0;
  while ((r = ::waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (r == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  exit_status_ = status;
  ::kill(-pid, SIGKILL);  // helpers it left behind in its group, if any
  pid_ = -1;
}

}  // namespace awa::browser
