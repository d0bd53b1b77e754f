// The reconnect back-off of every runtime thread that talks to the server (claimers, the
// listener, completion writers, the maintenance leader): doubled from kMinBackoff after
// each failure, capped at kMaxBackoff.
#pragma once

#include <chrono>

namespace awa::runtime {

inline constexpr std::chrono::milliseconds kMinBackoff{100};
// Short: after a server restart the runtime should be back within a second of the
// server, and a reconnect attempt per second per thread costs the server nothing.
inline constexpr std::chrono::milliseconds kMaxBackoff{1000};

}  // namespace awa::runtime
