// The export side of Tracer: the bounded queue, the sender thread, and the OTLP/HTTP JSON
// request (the OTLP specification's JSON mapping: ids as hex, 64-bit integers as strings,
// enums as numbers).
#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "awa/error.hpp"
#include "trace/tracer.hpp"

namespace awa::trace::detail {
namespace {

nlohmann::json attribute_value(const nlohmann::json& v) {
  if (v.is_boolean()) return {{"boolValue", v.get<bool>()}};
  if (v.is_number_integer()) return {{"intValue", std::to_string(v.get<std::int64_t>())}};
  if (v.is_number()) return {{"doubleValue", v.get<double>()}};
  if (v.is_string()) return {{"stringValue", v}};
  return {{"stringValue", v.dump()}};
}

nlohmann::json attributes(const std::vector<Attribute>& attrs) {
  auto out = nlohmann::json::array();
  for (const auto& a : attrs) out.push_back({{"key", a.key}, {"value", attribute_value(a.value)}});
  return out;
}

nlohmann::json span_json(const SpanData& s) {
  nlohmann::json j = {
      {"traceId", s.trace_id},
      {"spanId", s.span_id},
      {"name", s.name},
      {"kind", static_cast<int>(s.kind)},
      {"startTimeUnixNano", std::to_string(s.start_ns)},
      {"endTimeUnixNano", std::to_string(s.end_ns)},
      {"attributes", attributes(s.attributes)},
  };
  if (!s.parent_span_id.empty()) j["parentSpanId"] = s.parent_span_id;
  if (!s.trace_state.empty()) j["traceState"] = s.trace_state;
  if (!s.events.empty()) {
    auto events = nlohmann::json::array();
    for (const auto& e : s.events) {
      events.push_back({{"timeUnixNano", std::to_string(e.time_ns)},
                        {"name", e.name},
                        {"attributes", attributes(e.attributes)}});
    }
    j["events"] = std::move(events);
  }
  if (!s.links.empty()) {
    auto links = nlohmann::json::array();
    for (const auto& l : s.links) {
      nlohmann::json link = {{"traceId", l.trace_id}, {"spanId", l.span_id}};
      if (!l.trace_state.empty()) link["traceState"] = l.trace_state;
      links.push_back(std::move(link));
    }
    j["links"] = std::move(links);
  }
  if (s.status_code != 0) {
    j["status"] = {{"code", s.status_code}, {"message", s.status_message}};
  }
  return j;
}

// http://host[:port][/path]; from_env() and the client check the scheme first.
struct Endpoint {
  std::string host;
  int port = 80;
  std::string path = "/";
};

Endpoint parse_endpoint(const std::string& url) {
  constexpr std::string_view scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    throw InvalidArgument(fmt::format(
        "tracing endpoint {:?}: only http:// URLs are supported (OTLP/HTTP without TLS)", url));
  }
  std::string_view rest(url);
  rest.remove_prefix(scheme.size());
  Endpoint e;
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) e.path = std::string(rest.substr(slash));
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    const auto close = authority.find(']');
    if (close == std::string_view::npos) {
      throw InvalidArgument(fmt::format("tracing endpoint {:?}: unclosed '['", url));
    }
    e.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() != ':') {
      throw InvalidArgument(fmt::format("tracing endpoint {:?}: bad host", url));
    }
    if (!authority.empty()) authority.remove_prefix(1);
  } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    e.host = std::string(authority.substr(0, colon));
    authority.remove_prefix(colon + 1);
  } else {
    e.host = std::string(authority);
    authority = {};
  }
  if (!authority.empty()) {
    const auto [p, ec] =
        std::from_chars(authority.data(), authority.data() + authority.size(), e.port);
    if (ec != std::errc() || p != authority.data() + authority.size() || e.port <= 0 ||
        e.port > 65535) {
      throw InvalidArgument(fmt::format("tracing endpoint {:?}: bad port", url));
    }
  }
  if (e.host.empty()) throw InvalidArgument(fmt::format("tracing endpoint {:?}: no host", url));
  return e;
}

}  // namespace

void check(const ExportOptions& o) {
  if (o.max_queue < 1 || o.max_batch < 1 || o.schedule_delay.count() <= 0 ||
      o.timeout.count() <= 0 || !(o.sampler_ratio >= 0.0 && o.sampler_ratio <= 1.0)) {
    throw InvalidArgument(
        "tracing options: max_queue and max_batch must be >= 1, schedule_delay and timeout "
        "> 0, sampler_ratio in 0..1");
  }
}

metrics::Counter& spans_dropped(metrics::Registry& registry) {
  return registry
      .counter("awa_otel_spans_dropped_total",
               "Spans not exported: the export queue was full, or the collector failed or "
               "refused the request")
      .with({});
}

metrics::Counter& spans_exported(metrics::Registry& registry) {
  return registry.counter("awa_otel_spans_exported_total", "Spans the OTLP collector accepted")
      .with({});
}

Tracer::Tracer(ExportOptions options, metrics::Registry& registry)
    : options_(std::move(options)),
      dropped_metric_(spans_dropped(registry)),
      exported_metric_(spans_exported(registry)) {
  const auto e = parse_endpoint(options_.endpoint);
  host_ = e.host;
  port_ = e.port;
  path_ = e.path;
  auto attrs = nlohmann::json::array();
  const auto add = [&](const std::string& k, const std::string& v) {
    attrs.push_back({{"key", k}, {"value", {{"stringValue", v}}}});
  };
  add("service.name", options_.service_name);
  add("telemetry.sdk.name", "awa");
  add("telemetry.sdk.language", "cpp");
  add("telemetry.sdk.version", AWA_VERSION);
  for (const auto& [k, v] : options_.resource_attributes) {
    if (k != "service.name") add(k, v);
  }
  resource_ = {{"attributes", std::move(attrs)}};
  thread_ = std::thread([this] { run(); });
}

Tracer::~Tracer() {
  flush(options_.timeout);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  // What the flush could not send in time is lost: counted.
  std::lock_guard lock(mu_);
  if (!queue_.empty()) {
    stats_.dropped += queue_.size();
    dropped_metric_.inc(queue_.size());
    queue_.clear();
  }
}

void Tracer::count_dropped(std::uint64_t n) {
  stats_.dropped += n;
  dropped_metric_.inc(n);
}

void Tracer::submit(SpanData span) {
  std::unique_lock lock(mu_);
  if (stop_ || queue_.size() >= options_.max_queue) {
    count_dropped(1);
    return;
  }
  queue_.push_back(std::move(span));
  ++submitted_;
  const bool full = queue_.size() >= options_.max_batch;
  lock.unlock();
  if (full) cv_.notify_one();
}

bool Tracer::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  const auto target = submitted_;
  flush_wanted_ = std::max(flush_wanted_, target);
  cv_.notify_one();
  return idle_cv_.wait_for(lock, timeout, [&] { return settled_ >= target || stop_; }) &&
         settled_ >= target;
}

ExportStats Tracer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Tracer::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    // A batch goes when it is full, when its oldest span has waited schedule_delay, when a
    // flush asks, or at stop.
    cv_.wait_for(lock, options_.schedule_delay, [&] {
      return stop_ || queue_.size() >= options_.max_batch ||
             (flush_wanted_ > settled_ && !queue_.empty());
    });
    if (queue_.empty()) {
      if (stop_) return;
      continue;
    }
    const auto n = std::min(queue_.size(), options_.max_batch);
    std::vector<SpanData> batch;
    batch.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    lock.unlock();
    const bool ok = send(batch);
    lock.lock();
    ++stats_.requests;
    if (ok) {
      stats_.exported += n;
      exported_metric_.inc(n);
    } else {
      ++stats_.failed_requests;
      count_dropped(n);
    }
    settled_ += n;
    idle_cv_.notify_all();
  }
}

std::string Tracer::encode(const std::vector<SpanData>& spans) const {
  auto out = nlohmann::json::array();
  for (const auto& s : spans) out.push_back(span_json(s));
  const nlohmann::json body = {{"resourceSpans",
                                {{{"resource", resource_},
                                  {"scopeSpans",
                                   {{{"scope", {{"name", "awa"}, {"version", AWA_VERSION}}},
                                     {"spans", std::move(out)}}}}}}}};
  // A handler's attribute may hold bytes that are not UTF-8: replaced, not a failed batch.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool Tracer::send(const std::vector<SpanData>& batch) {
  const auto body = encode(batch);
  httplib::Client http(host_, port_);
  const auto seconds = [](std::chrono::milliseconds ms) {
    return std::pair<time_t, time_t>(ms.count() / 1000, (ms.count() % 1000) * 1000);
  };
  const auto [s, us] = seconds(options_.timeout);
  http.set_connection_timeout(s, us);
  http.set_read_timeout(s, us);
  http.set_write_timeout(s, us);
  httplib::Headers headers;
  for (const auto& [k, v] : options_.headers) headers.emplace(k, v);
  const auto res = http.Post(path_, headers, body, "application/json");
  std::string failure;
  if (!res) {
    failure = httplib::to_string(res.error());
  } else if (res->status < 200 || res->status >= 300) {
    failure = fmt::format("HTTP {}", res->status);
  } else {
    return true;
  }
  // A collector that is down fails every batch: said once a minute, not once a batch.
  ++unreported_failures_;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_warning_ >= std::chrono::minutes(1)) {
    spdlog::warn(
        "tracing: {} spans not exported to {}: {} ({} failed requests since the last "
        "warning; the spans are counted in awa_otel_spans_dropped_total)",
        batch.size(), options_.endpoint, failure, unreported_failures_);
    last_warning_ = now;
    unreported_failures_ = 0;
  }
  return false;
}

}  // namespace awa::trace::detail
