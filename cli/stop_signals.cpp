#include <pthread.h>

#include <cstring>
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

}  // namespace awa::cli
