// Runs the awa command-line tool as a child process (tests of the CLI and of
// multi-process behaviour).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace awa::testing {

struct CliResult {
  int exit_code;
  std::string output;  // stdout and stderr
};

// `args` is appended to the binary's path as shell words; the caller quotes them.
inline CliResult run_cli(const std::string& args) {
  const std::string cmd = std::string(AWA_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("popen failed: " + cmd);
  std::string out;
  std::array<char, 4096> buf{};
  while (const auto n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = ::pclose(p);
  return CliResult{WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace awa::testing
