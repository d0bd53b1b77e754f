// Parsing of a metrics listen address (`awa work --metrics-addr`).
//
// Loopback unless told otherwise: a metrics endpoint shows queue names and rates, so it
// is reachable from other hosts only when the operator names a host explicitly.
#pragma once

#include <string>
#include <string_view>

namespace awa::metrics {

inline constexpr const char* kDefaultMetricsHost = "127.0.0.1";

struct ListenAddress {
  std::string host;  // as httplib binds it: "127.0.0.1", "0.0.0.0", "::1", a name
  int port = 0;      // 0: the kernel picks one
};

// "PORT" or ":PORT" -> 127.0.0.1:PORT; "HOST:PORT" -> HOST:PORT; "[V6]:PORT" -> V6:PORT.
// Throws awa::InvalidArgument for anything else (PORT outside 0..65535, empty host in
// brackets, a missing port).
ListenAddress parse_listen_address(std::string_view text);

}  // namespace awa::metrics
