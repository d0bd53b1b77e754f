// Child processes of the harness: started with fork/exec, output appended to a log file,
// killed by the kernel if the harness dies (PR_SET_PDEATHSIG), signalled only by pid.
//
// REQUIRES: spawn() is called from the thread that lives as long as the children (the
// main thread): the death signal fires when the *thread* that forked exits.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace chaos {

// Starts argv[0] (a path) with argv; stdout and stderr append to log_path. Throws
// std::runtime_error when fork fails; a failed exec makes the child exit with 127.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path);

// The child's exit, if it has exited (reaps it): the exit code, or 128 + signal.
std::optional<int> try_reap(pid_t pid);

// Waits up to `timeout` for the child to exit (reaping it); nullopt on timeout.
std::optional<int> wait_for(pid_t pid, std::chrono::milliseconds timeout);

// Runs argv to completion within `timeout` (SIGKILL after it); the exit status, or
// nullopt when it had to be killed.
std::optional<int> run(const std::vector<std::string>& argv, const std::string& log_path,
                       std::chrono::milliseconds timeout);

}  // namespace chaos
