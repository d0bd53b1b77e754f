// Reading the /metrics of another process (`awa work --metrics-addr 127.0.0.1:0`): the
// port it logged, and one sample's value from the Prometheus text. What a test can see of
// a worker process's claim cycles or maintenance rounds without a hook of its own.
#pragma once

#include <httplib.h>

#include <optional>
#include <regex>
#include <sstream>
#include <string>

namespace awa::testing {

// The port in the log's "metrics on http://127.0.0.1:PORT/metrics", or 0 while there is
// none yet.
inline int logged_metrics_port(const std::string& log) {
  static const std::regex kListening(R"(metrics on http://127\.0\.0\.1:(\d+)/metrics)");
  std::smatch m;
  return std::regex_search(log, m, kListening) ? std::stoi(m[1]) : 0;
}

// The value of `series` — the name and labels exactly as exposed, e.g.
// awa_claim_duration_seconds_count{queue="q"} — on 127.0.0.1:port/metrics; nullopt when
// the scrape fails or the series is not there (yet).
inline std::optional<double> scrape(int port, const std::string& series) {
  httplib::Client http("127.0.0.1", port);
  http.set_connection_timeout(5);
  http.set_read_timeout(10);
  const auto res = http.Get("/metrics");
  if (!res || res->status != 200) return std::nullopt;
  std::istringstream in(res->body);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > series.size() + 1 && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

}  // namespace awa::testing
