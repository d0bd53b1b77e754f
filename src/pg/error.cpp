// Out-of-line members of include/awa/error.hpp.
#include "awa/error.hpp"

#include <string>
#include <utility>

namespace awa {

const char* to_string(Retry retry) {
  switch (retry) {
    case Retry::kRetryCall:
      return "retry_call";
    case Retry::kRetryTransaction:
      return "retry_transaction";
    case Retry::kDoNotRetry:
      return "do_not_retry";
  }
  return "unknown";
}

Error::Error(const std::string& message, Retry retry, std::string sqlstate, std::string detail,
             std::string hint)
    : std::runtime_error(message),
      retry_(retry),
      sqlstate_(std::move(sqlstate)),
      detail_(std::move(detail)),
      hint_(std::move(hint)) {}

PipelineError::PipelineError(const DatabaseError& cause, std::size_t index)
    : DatabaseError("pipeline statement " + std::to_string(index) + ": " + cause.what(),
                    cause.retry(), cause.sqlstate(), cause.detail(), cause.hint()),
      index_(index) {}

}  // namespace awa
