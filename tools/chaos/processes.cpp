#include "processes.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <stdexcept>
#include <string>
#include <thread>

namespace chaos {
namespace {

int status_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  // Everything the child needs is prepared before fork: the parent has other threads, so
  // the child may only make async-signal-safe calls until exec.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);  // the harness died before prctl
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

std::optional<int> try_reap(pid_t pid) {
  int status = 0;
  const pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid) return status_code(status);
  if (r < 0) return -1;  // not our child (already reaped)
  return std::nullopt;
}

std::optional<int> wait_for(pid_t pid, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto code = try_reap(pid)) return code;
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::optional<int> run(const std::vector<std::string>& argv, const std::string& log_path,
                       std::chrono::milliseconds timeout) {
  const pid_t pid = spawn(argv, log_path);
  if (auto code = wait_for(pid, timeout)) return code;
  ::kill(pid, SIGKILL);
  wait_for(pid, std::chrono::seconds(5));
  return std::nullopt;
}

}  // namespace chaos
