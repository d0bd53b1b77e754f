// ExportOptions::from_env: the OpenTelemetry SDKs' standard environment variables, so a
// service configured for its other instrumented parts configures awa the same way.
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "awa/error.hpp"
#include "awa/tracing.hpp"

namespace awa::trace {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

// The signal-specific variable wins over the general one.
std::optional<std::pair<std::string, std::string>> env2(const char* specific, const char* general) {
  if (auto v = env(specific)) return std::pair{std::string(specific), *v};
  if (auto v = env(general)) return std::pair{std::string(general), *v};
  return std::nullopt;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string percent_decode(std::string_view s, const std::string& var) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    int v = 0;
    if (i + 2 >= s.size() ||
        std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16).ptr != s.data() + i + 3) {
      throw InvalidArgument(fmt::format("{}: bad percent-encoding in {:?}", var, std::string(s)));
    }
    out += static_cast<char>(v);
    i += 2;
  }
  return out;
}

// k=v,k2=v2 (W3C Baggage's list form, which OTEL_RESOURCE_ATTRIBUTES and the headers use).
std::map<std::string, std::string> key_values(const std::string& text, const std::string& var) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const auto item = std::string_view(text).substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (trim(item).empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw InvalidArgument(fmt::format("{}: {:?} is not key=value", var, std::string(trim(item))));
    }
    auto key = trim(item.substr(0, eq));
    if (key.empty()) throw InvalidArgument(fmt::format("{}: an empty key", var));
    out[percent_decode(key, var)] = percent_decode(trim(item.substr(eq + 1)), var);
  }
  return out;
}

template <class T>
T number(const std::string& var, const std::string& text) {
  T v{};
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v <= 0) {
    throw InvalidArgument(fmt::format("{}={:?}: not a positive integer", var, text));
  }
  return v;
}

void check_http(const std::string& var, const std::string& url) {
  if (url.rfind("http://", 0) != 0) {
    throw InvalidArgument(fmt::format(
        "{}={:?}: only http:// endpoints are supported (OTLP/HTTP without TLS; put a local "
        "collector in front of a TLS one)",
        var, url));
  }
}

}  // namespace

ExportOptions ExportOptions::from_env() {
  ExportOptions o;
  bool exporter_none = false;
  if (auto exporter = env("OTEL_TRACES_EXPORTER")) {
    const auto v = lower(trim(*exporter));
    if (v == "otlp") {
      o.enabled = true;
    } else if (v == "none") {
      exporter_none = true;
    } else {
      throw InvalidArgument(fmt::format(
          "OTEL_TRACES_EXPORTER={:?}: awa exports traces with \"otlp\" (or \"none\")", v));
    }
  }
  if (auto base = env("OTEL_EXPORTER_OTLP_ENDPOINT")) {
    check_http("OTEL_EXPORTER_OTLP_ENDPOINT", *base);
    std::string b = *base;
    while (!b.empty() && b.back() == '/') b.pop_back();
    o.endpoint = b + "/v1/traces";
    o.enabled = true;
  }
  if (auto url = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
    check_http("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", *url);
    o.endpoint = *url;
    o.enabled = true;
  }
  if (auto p = env2("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")) {
    if (trim(p->second) != "http/json") {
      throw InvalidArgument(fmt::format(
          "{}={:?}: awa exports OTLP over HTTP with the JSON encoding only (\"http/json\")",
          p->first, p->second));
    }
  }
  if (auto h = env2("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")) {
    o.headers = key_values(h->second, h->first);
  }
  if (auto r = env("OTEL_RESOURCE_ATTRIBUTES")) {
    o.resource_attributes = key_values(*r, "OTEL_RESOURCE_ATTRIBUTES");
    if (auto it = o.resource_attributes.find("service.name"); it != o.resource_attributes.end()) {
      o.service_name = it->second;
    }
  }
  if (auto name = env("OTEL_SERVICE_NAME")) o.service_name = trim(*name);
  if (auto s = env("OTEL_TRACES_SAMPLER")) {
    const auto v = lower(trim(*s));
    if (v == "always_on") {
      o.sampler = Sampler::kAlwaysOn;
    } else if (v == "always_off") {
      o.sampler = Sampler::kAlwaysOff;
    } else if (v == "traceidratio") {
      o.sampler = Sampler::kTraceIdRatio;
    } else if (v == "parentbased_always_on") {
      o.sampler = Sampler::kParentBasedAlwaysOn;
    } else if (v == "parentbased_always_off") {
      o.sampler = Sampler::kParentBasedAlwaysOff;
    } else if (v == "parentbased_traceidratio") {
      o.sampler = Sampler::kParentBasedTraceIdRatio;
    } else {
      throw InvalidArgument(
          fmt::format("OTEL_TRACES_SAMPLER={:?}: not one of always_on, always_off, traceidratio, "
                      "parentbased_always_on, parentbased_always_off, parentbased_traceidratio",
                      *s));
    }
  }
  if (auto arg = env("OTEL_TRACES_SAMPLER_ARG")) {
    const auto text = trim(*arg);
    double r = -1;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), r);
    if (ec != std::errc() || p != text.data() + text.size() || !(r >= 0.0 && r <= 1.0)) {
      throw InvalidArgument(
          fmt::format("OTEL_TRACES_SAMPLER_ARG={:?}: not a ratio between 0 and 1", *arg));
    }
    o.sampler_ratio = r;
  }
  if (auto v = env("OTEL_BSP_MAX_QUEUE_SIZE")) {
    o.max_queue = number<std::size_t>("OTEL_BSP_MAX_QUEUE_SIZE", trim(*v));
  }
  if (auto v = env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")) {
    o.max_batch = number<std::size_t>("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", trim(*v));
  }
  if (auto v = env("OTEL_BSP_SCHEDULE_DELAY")) {
    o.schedule_delay =
        std::chrono::milliseconds(number<std::int64_t>("OTEL_BSP_SCHEDULE_DELAY", trim(*v)));
  }
  if (auto v = env2("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")) {
    o.timeout = std::chrono::milliseconds(number<std::int64_t>(v->first, trim(v->second)));
  }
  // Last: "none" and a disabled SDK win over everything that would turn tracing on.
  if (exporter_none) o.enabled = false;
  if (auto d = env("OTEL_SDK_DISABLED"); d && lower(trim(*d)) == "true") o.enabled = false;
  return o;
}

}  // namespace awa::trace
