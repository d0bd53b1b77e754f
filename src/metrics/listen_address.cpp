#include "awa/metrics.hpp"

#include <charconv>

#include "awa/error.hpp"

namespace awa::metrics {
namespace {

bool parse_port(std::string_view s, int& port) {
  if (s.empty() || s.size() > 5) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), port);
  return ec == std::errc() && end == s.data() + s.size() && port >= 0 && port <= 65535;
}

[[noreturn]] void bad(std::string_view text) {
  throw InvalidArgument("metrics address '" + std::string(text) +
                        "': use PORT (binds 127.0.0.1), or HOST:PORT to bind elsewhere, e.g. "
                        "9464, 127.0.0.1:9464, 0.0.0.0:9464, [::1]:9464");
}

}  // namespace

ListenAddress parse_listen_address(std::string_view text) {
  ListenAddress out;
  const auto colon = text.rfind(':');
  std::string_view host;
  std::string_view port;
  if (colon == std::string_view::npos) {
    port = text;
  } else {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (!parse_port(port, out.port)) bad(text);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') bad(text);
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    bad(text);  // a bare IPv6 address is ambiguous: "::1:9464"
  }
  out.host = host.empty() ? std::string(kDefaultMetricsHost) : std::string(host);
  return out;
}

}  // namespace awa::metrics
