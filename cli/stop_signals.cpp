#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

#include "awa/error.hpp"
#include "cli.hpp"

namespace awa::cli {

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  if (const int rc = pthread_sigmask(SIG_BLOCK, &set_, &old_); rc != 0)
    throw Error(std::string("pthread_sigmask: ") + std::strerror(rc));
}

StopSignals::~StopSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

int StopSignals::wait() const {
  int sig = 0;
  while (sigwait(&set_, &sig) != 0) {
  }
  return sig;
}

std::optional<int> StopSignals::wait_for(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::max(std::chrono::nanoseconds(0),
                 std::chrono::nanoseconds(deadline - std::chrono::steady_clock::now()));
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(left.count() / 1000000000);
    ts.tv_nsec = static_cast<long>(left.count() % 1000000000);
    const int sig = sigtimedwait(&set_, nullptr, &ts);
    if (sig > 0) return sig;
    if (errno == EAGAIN) return std::nullopt;
    // EINTR: another signal's handler ran; wait out the rest.
  }
}

}  // namespace awa::cli
