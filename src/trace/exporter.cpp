// The export side of Tracer: the bounded queue, the sender thread, and the OTLP/HTTP JSON
// request (the OTLP specification's JSON mapping: ids as hex, 64-bit integers as strings,
// enums as numbers).
#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "awa/error.hpp"
#include "trace/tracer.hpp"

namespace awa::trace::detail {
namespace {

// A JSON string. Plain printable ASCII, the usual case, is copied as it is; anything else
// (quotes, control characters, UTF-8, bytes that are not UTF-8) goes through
// nlohmann::json's serializer, which escapes it and replaces invalid bytes, so a
// handler's attribute can never make the request invalid JSON.
void put_string(std::string& out, std::string_view s) {
  const bool plain = std::all_of(
      s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (plain) {
    out += '"';
    out += s;
    out += '"';
    return;
  }
  out +=
      nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void put_value(std::string& out, const Value& v) {
  if (const auto* str = std::get_if<std::string>(&v)) {
    out += R"({"stringValue":)";
    put_string(out, *str);
  } else if (const auto* i = std::get_if<std::int64_t>(&v)) {
    // 64-bit integers are strings in the protobuf JSON mapping.
    fmt::format_to(std::back_inserter(out), R"({{"intValue":"{}")", *i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    if (std::isfinite(*d)) {
      fmt::format_to(std::back_inserter(out), R"({{"doubleValue":{}}})", *d);
      return;
    }
    // JSON has no NaN or infinity; the protobuf JSON mapping spells them as strings.
    fmt::format_to(std::back_inserter(out), R"({{"doubleValue":"{}")",
                   std::isnan(*d) ? "NaN" : (*d > 0 ? "Infinity" : "-Infinity"));
  } else {
    out += std::get<bool>(v) ? R"({"boolValue":true)" : R"({"boolValue":false)";
  }
  out += '}';
}

void put_attributes(std::string& out, const std::vector<Attribute>& attrs) {
  out += '[';
  for (std::size_t i = 0; i < attrs.size(); ++i) {
    if (i > 0) out += ',';
    out += R"({"key":)";
    put_string(out, attrs[i].key);
    out += R"(,"value":)";
    put_value(out, attrs[i].value);
    out += '}';
  }
  out += ']';
}

void put_span(std::string& out, const SpanData& s) {
  // Ids are hex already (the OTLP JSON encoding's exception to protobuf's base64).
  fmt::format_to(std::back_inserter(out), R"({{"traceId":"{}","spanId":"{}")", s.trace_id,
                 s.span_id);
  if (!s.parent_span_id.empty()) {
    fmt::format_to(std::back_inserter(out), R"(,"parentSpanId":"{}")", s.parent_span_id);
  }
  if (!s.trace_state.empty()) {
    out += R"(,"traceState":)";
    put_string(out, s.trace_state);
  }
  out += R"(,"name":)";
  put_string(out, s.name);
  fmt::format_to(std::back_inserter(out),
                 R"(,"kind":{},"startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":)",
                 static_cast<int>(s.kind), s.start_ns, s.end_ns);
  put_attributes(out, s.attributes);
  if (!s.events.empty()) {
    out += R"(,"events":[)";
    for (std::size_t i = 0; i < s.events.size(); ++i) {
      const auto& e = s.events[i];
      if (i > 0) out += ',';
      fmt::format_to(std::back_inserter(out), R"({{"timeUnixNano":"{}","name":)", e.time_ns);
      put_string(out, e.name);
      out += R"(,"attributes":)";
      put_attributes(out, e.attributes);
      out += '}';
    }
    out += ']';
  }
  if (!s.links.empty()) {
    out += R"(,"links":[)";
    for (std::size_t i = 0; i < s.links.size(); ++i) {
      const auto& l = s.links[i];
      if (i > 0) out += ',';
      fmt::format_to(std::back_inserter(out), R"({{"traceId":"{}","spanId":"{}")", l.trace_id,
                     l.span_id);
      if (!l.trace_state.empty()) {
        out += R"(,"traceState":)";
        put_string(out, l.trace_state);
      }
      out += '}';
    }
    out += ']';
  }
  if (s.status_code != 0) {
    fmt::format_to(std::back_inserter(out), R"(,"status":{{"code":{},"message":)", s.status_code);
    put_string(out, s.status_message);
    out += '}';
  }
  out += '}';
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

namespace {

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

}  // namespace

std::shared_ptr<Tracer> make_tracer(ExportOptions o, metrics::Registry& registry) {
  spans_dropped(registry);
  spans_exported(registry);
  if (!o.enabled) return nullptr;
  if (o.max_queue < 1 || o.max_batch < 1 || o.schedule_delay.count() <= 0 ||
      o.timeout.count() <= 0 || !(o.sampler_ratio >= 0.0 && o.sampler_ratio <= 1.0)) {
    throw InvalidArgument(
        "tracing options: max_queue and max_batch must be >= 1, schedule_delay and timeout "
        "> 0, sampler_ratio in 0..1");
  }
  return std::make_shared<Tracer>(std::move(o), registry);
}

Tracer::Tracer(ExportOptions options, metrics::Registry& registry)
    : options_(std::move(options)),
      dropped_metric_(spans_dropped(registry)),
      exported_metric_(spans_exported(registry)) {
  const auto e = parse_endpoint(options_.endpoint);
  host_ = e.host;
  port_ = e.port;
  path_ = e.path;
  std::vector<Attribute> attrs{{"service.name", Value(options_.service_name)},
                               {"telemetry.sdk.name", Value(std::string("awa"))},
                               {"telemetry.sdk.language", Value(std::string("cpp"))},
                               {"telemetry.sdk.version", Value(std::string(AWA_VERSION))}};
  for (const auto& [k, v] : options_.resource_attributes) {
    if (k != "service.name") attrs.push_back({k, Value(v)});
  }
  resource_json_ = R"({"attributes":)";
  put_attributes(resource_json_, attrs);
  resource_json_ += '}';
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
  std::string out;
  out.reserve(256 + spans.size() * 1024);
  out += R"({"resourceSpans":[{"resource":)";
  out += resource_json_;
  out += R"(,"scopeSpans":[{"scope":{"name":"awa","version":")" AWA_VERSION R"("},"spans":[)";
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (i > 0) out += ',';
    put_span(out, spans[i]);
  }
  out += "]}]}]}";
  return out;
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
