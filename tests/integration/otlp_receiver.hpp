// A stand-in OpenTelemetry collector for the tracing tests: an OTLP/HTTP receiver of the
// JSON encoding on 127.0.0.1 (an ephemeral port), recording every span it is sent,
// flattened, with what came with it (resource, scope, request headers). It can refuse
// requests (set_status) or answer slowly (set_delay), to play a collector that is down or
// overloaded, and it checks each request against the OTLP JSON mapping as it goes:
// whatever breaks it (an id of the wrong length, an int64 sent as a number, a missing
// field) is kept in problems(), so that a test can insist on none instead of each test
// re-checking the encoding.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace awa::testing {

// Attributes as plain values: a string, an int64 (intValue's decimal string parsed), a
// double, a bool, or an array of those.
using Attributes = std::map<std::string, nlohmann::json>;

struct ReceivedEvent {
  std::string name;
  std::string time_unix_nano;
  Attributes attributes;
};

struct ReceivedLink {
  std::string trace_id;
  std::string span_id;
  std::string trace_state;
  Attributes attributes;
};

// One span as received, with the request it came in.
struct ReceivedSpan {
  std::string trace_id;
  std::string span_id;
  std::string parent_span_id;  // "" for a root span (absent or empty on the wire)
  std::string trace_state;
  std::string name;
  int kind = 0;  // 1 internal, 2 server, 3 client, 4 producer, 5 consumer
  std::uint64_t start_unix_nano = 0;
  std::uint64_t end_unix_nano = 0;
  Attributes attributes;
  std::vector<ReceivedEvent> events;
  std::vector<ReceivedLink> links;
  int status_code = 0;  // 0 unset, 1 ok, 2 error
  std::string status_message;
  Attributes resource;
  std::string scope_name;
  std::string scope_version;
  // The request's headers, names in lower case.
  std::map<std::string, std::string> headers;

  // The attribute's value, or null when the span has none of that name.
  nlohmann::json attr(const std::string& key) const {
    const auto it = attributes.find(key);
    return it == attributes.end() ? nlohmann::json() : it->second;
  }
  bool has_attr(const std::string& key) const { return attributes.count(key) != 0; }
  // The resource's attribute, or null.
  nlohmann::json resource_attr(const std::string& key) const {
    const auto it = resource.find(key);
    return it == resource.end() ? nlohmann::json() : it->second;
  }
  // The request header (name in lower case), or "".
  std::string header(const std::string& lower_case_name) const {
    const auto it = headers.find(lower_case_name);
    return it == headers.end() ? std::string() : it->second;
  }
  // The first event of that name, or nullptr.
  const ReceivedEvent* event(const std::string& event_name) const {
    for (const auto& e : events) {
      if (e.name == event_name) return &e;
    }
    return nullptr;
  }
};

class OtlpReceiver {
 public:
  OtlpReceiver() {
    server_.Post("/v1/traces",
                 [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); });
    // An exporter keeps its connection between batches; a short idle limit lets stop()
    // end the server's connection threads at once instead of after the default 5 s.
    server_.set_keep_alive_timeout(1);
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("OtlpReceiver: cannot bind 127.0.0.1");
    // The socket listens from bind_to_any_port on: a request sent before the thread
    // accepts waits in the backlog, so no start-up wait is needed.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~OtlpReceiver() { stop(); }
  OtlpReceiver(const OtlpReceiver&) = delete;
  OtlpReceiver& operator=(const OtlpReceiver&) = delete;

  int port() const { return port_; }
  // Where spans are POSTed: ExportOptions::endpoint.
  std::string url() const { return base_url() + "/v1/traces"; }
  // Without the path: OTEL_EXPORTER_OTLP_ENDPOINT, to which the exporter adds it.
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Answers every request with `status` from now on; 200 (the default) accepts. The spans
  // of a refused request are not recorded: the collector did not take them.
  void set_status(int status) {
    std::lock_guard lock(mu_);
    status_ = status;
  }
  // Waits this long before answering each request (a slow collector). stop() cuts the
  // wait short.
  void set_delay(std::chrono::milliseconds delay) {
    std::lock_guard lock(mu_);
    delay_ = delay;
  }

  // Closes the port (a collector that is down: connections are refused from now on) and
  // joins the server's thread. Idempotent.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  std::vector<ReceivedSpan> spans() const {
    std::lock_guard lock(mu_);
    return spans_;
  }
  std::vector<ReceivedSpan> spans_named(const std::string& name) const {
    return spans_where([&](const ReceivedSpan& s) { return s.name == name; });
  }
  std::vector<ReceivedSpan> spans_with(const std::string& key, const nlohmann::json& value) const {
    return spans_where([&](const ReceivedSpan& s) { return s.attr(key) == value; });
  }
  std::vector<ReceivedSpan> spans_where(
      const std::function<bool(const ReceivedSpan&)>& pred) const {
    std::lock_guard lock(mu_);
    std::vector<ReceivedSpan> out;
    std::copy_if(spans_.begin(), spans_.end(), std::back_inserter(out), pred);
    return out;
  }
  // The one span `pred` picks; nullopt when none or several do.
  std::optional<ReceivedSpan> only(const std::function<bool(const ReceivedSpan&)>& pred) const {
    auto found = spans_where(pred);
    if (found.size() != 1) return std::nullopt;
    return found.front();
  }

  // Requests received (accepted or not), and those answered 200.
  int requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  int accepted_requests() const {
    std::lock_guard lock(mu_);
    return accepted_;
  }
  // The Content-Type of every request, in order.
  std::vector<std::string> content_types() const {
    std::lock_guard lock(mu_);
    return content_types_;
  }
  // What the requests broke of the OTLP JSON mapping; empty when nothing.
  std::vector<std::string> problems() const {
    std::lock_guard lock(mu_);
    return problems_;
  }

  // Waits until `pred` holds of the spans received so far (checked again on every
  // request, so no polling interval delays it), or `timeout` passes; true when it held.
  bool wait_for(const std::function<bool(const std::vector<ReceivedSpan>&)>& pred,
                std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(spans_); });
  }
  // Waits for at least `n` spans matching `pred`.
  bool wait_for_count(const std::function<bool(const ReceivedSpan&)>& pred, std::size_t n,
                      std::chrono::milliseconds timeout) const {
    return wait_for(
        [&](const std::vector<ReceivedSpan>& all) {
          return static_cast<std::size_t>(std::count_if(all.begin(), all.end(), pred)) >= n;
        },
        timeout);
  }

 private:
  void handle(const httplib::Request& req, httplib::Response& res) {
    int status = 200;
    std::chrono::milliseconds delay{0};
    {
      std::lock_guard lock(mu_);
      ++requests_;
      content_types_.push_back(req.get_header_value("Content-Type"));
      status = status_;
      delay = delay_;
    }
    if (delay.count() > 0) {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, delay, [&] { return stopping_; });
    }
    if (status != 200) {
      res.status = status;
      res.set_content(R"({"message":"refused by the test"})", "application/json");
      std::lock_guard lock(mu_);
      cv_.notify_all();
      return;
    }

    std::vector<std::string> problems;
    std::vector<ReceivedSpan> got;
    nlohmann::json body;
    try {
      body = nlohmann::json::parse(req.body);
    } catch (const std::exception& e) {
      problems.push_back(std::string("body is not JSON: ") + e.what());
    }
    if (problems.empty()) parse_request(body, req, got, problems);

    {
      std::lock_guard lock(mu_);
      ++accepted_;
      spans_.insert(spans_.end(), got.begin(), got.end());
      problems_.insert(problems_.end(), problems.begin(), problems.end());
    }
    cv_.notify_all();
    res.status = 200;
    res.set_content("{}", "application/json");
  }

  static bool is_hex(const std::string& s, std::size_t len) {
    return s.size() == len &&
           std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }) &&
           s != std::string(len, '0');
  }
  static bool is_decimal(const nlohmann::json& v) {
    if (!v.is_string()) return false;
    const auto& s = v.get_ref<const std::string&>();
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  }
  // A decimal-string uint64 (a time) or 0, noting a problem when it is not one.
  static std::uint64_t nanos(const nlohmann::json& obj, const char* key, const std::string& where,
                             std::vector<std::string>& problems) {
    if (!obj.contains(key) || !is_decimal(obj[key])) {
      problems.push_back(where + ": " + key + " is not a decimal string: " +
                         (obj.contains(key) ? obj[key].dump() : "absent"));
      return 0;
    }
    return std::stoull(obj[key].get<std::string>());
  }

  // An AnyValue, unwrapped.
  static nlohmann::json value_of(const nlohmann::json& v, const std::string& where,
                                 std::vector<std::string>& problems) {
    if (!v.is_object() || v.size() != 1) {
      problems.push_back(where + ": not an AnyValue of one field: " + v.dump());
      return nullptr;
    }
    if (v.contains("stringValue") && v["stringValue"].is_string()) return v["stringValue"];
    if (v.contains("boolValue") && v["boolValue"].is_boolean()) return v["boolValue"];
    if (v.contains("doubleValue") && v["doubleValue"].is_number()) {
      return v["doubleValue"].get<double>();
    }
    // The protobuf JSON mapping's spelling of the doubles JSON has no number for.
    if (v.contains("doubleValue") && v["doubleValue"].is_string()) {
      const auto d = v["doubleValue"].get<std::string>();
      if (d == "NaN" || d == "Infinity" || d == "-Infinity") return d;
    }
    if (v.contains("intValue")) {
      const auto& i = v["intValue"];
      // The OTLP JSON mapping writes an int64 as a decimal string (optionally signed).
      const std::string s = i.is_string() ? i.get<std::string>() : "";
      const std::string digits = !s.empty() && s[0] == '-' ? s.substr(1) : s;
      if (!is_decimal(digits)) {
        problems.push_back(where + ": intValue is not a decimal string: " + i.dump());
        return i.is_number_integer() ? i : nlohmann::json();
      }
      return static_cast<std::int64_t>(std::stoll(s));
    }
    if (v.contains("arrayValue")) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& e : v["arrayValue"].value("values", nlohmann::json::array())) {
        out.push_back(value_of(e, where, problems));
      }
      return out;
    }
    problems.push_back(where + ": unknown AnyValue: " + v.dump());
    return nullptr;
  }

  static Attributes attributes_of(const nlohmann::json& obj, const std::string& where,
                                  std::vector<std::string>& problems) {
    Attributes out;
    if (!obj.contains("attributes")) return out;
    if (!obj["attributes"].is_array()) {
      problems.push_back(where + ": attributes is not an array");
      return out;
    }
    for (const auto& kv : obj["attributes"]) {
      if (!kv.contains("key") || !kv["key"].is_string() || !kv.contains("value")) {
        problems.push_back(where + ": attribute without key or value: " + kv.dump());
        continue;
      }
      const auto key = kv["key"].get<std::string>();
      if (out.count(key)) problems.push_back(where + ": attribute " + key + " given twice");
      out[key] = value_of(kv["value"], where + " attribute " + key, problems);
    }
    return out;
  }

  static void parse_request(const nlohmann::json& body, const httplib::Request& req,
                            std::vector<ReceivedSpan>& got, std::vector<std::string>& problems) {
    std::map<std::string, std::string> headers;
    for (const auto& [k, v] : req.headers) {
      std::string lower = k;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      headers[lower] = v;
    }
    if (!body.is_object() || !body.contains("resourceSpans") || !body["resourceSpans"].is_array()) {
      problems.push_back("no resourceSpans array: " + body.dump().substr(0, 200));
      return;
    }
    for (const auto& rs : body["resourceSpans"]) {
      const auto resource =
          attributes_of(rs.value("resource", nlohmann::json::object()), "resource", problems);
      for (const auto& ss : rs.value("scopeSpans", nlohmann::json::array())) {
        const auto scope = ss.value("scope", nlohmann::json::object());
        for (const auto& s : ss.value("spans", nlohmann::json::array())) {
          got.push_back(parse_span(s, problems));
          auto& span = got.back();
          span.resource = resource;
          span.scope_name = scope.value("name", "");
          span.scope_version = scope.value("version", "");
          span.headers = headers;
        }
      }
    }
  }

  static ReceivedSpan parse_span(const nlohmann::json& s, std::vector<std::string>& problems) {
    ReceivedSpan span;
    span.name = s.value("name", "");
    const std::string where = "span \"" + span.name + "\"";
    const auto str = [&](const char* key) {
      return s.contains(key) && s[key].is_string() ? s[key].get<std::string>() : std::string();
    };
    span.trace_id = str("traceId");
    span.span_id = str("spanId");
    span.parent_span_id = str("parentSpanId");
    span.trace_state = str("traceState");
    if (!is_hex(span.trace_id, 32)) problems.push_back(where + ": traceId " + span.trace_id);
    if (!is_hex(span.span_id, 16)) problems.push_back(where + ": spanId " + span.span_id);
    if (!span.parent_span_id.empty() && !is_hex(span.parent_span_id, 16)) {
      problems.push_back(where + ": parentSpanId " + span.parent_span_id);
    }
    if (span.name.empty()) problems.push_back("a span without a name");
    if (s.contains("kind") && s["kind"].is_number_integer()) {
      span.kind = s["kind"].get<int>();
    } else {
      problems.push_back(where + ": kind is not an integer: " +
                         (s.contains("kind") ? s["kind"].dump() : "absent"));
    }
    span.start_unix_nano = nanos(s, "startTimeUnixNano", where, problems);
    span.end_unix_nano = nanos(s, "endTimeUnixNano", where, problems);
    if (span.end_unix_nano < span.start_unix_nano)
      problems.push_back(where + ": ends before it starts");
    span.attributes = attributes_of(s, where, problems);
    for (const auto& e : s.value("events", nlohmann::json::array())) {
      ReceivedEvent ev;
      ev.name = e.value("name", "");
      if (!e.contains("timeUnixNano") || !is_decimal(e["timeUnixNano"])) {
        problems.push_back(where + " event " + ev.name + ": timeUnixNano is not a decimal string");
      } else {
        ev.time_unix_nano = e["timeUnixNano"].get<std::string>();
      }
      ev.attributes = attributes_of(e, where + " event " + ev.name, problems);
      span.events.push_back(std::move(ev));
    }
    for (const auto& l : s.value("links", nlohmann::json::array())) {
      ReceivedLink link;
      link.trace_id = l.value("traceId", "");
      link.span_id = l.value("spanId", "");
      link.trace_state = l.value("traceState", "");
      if (!is_hex(link.trace_id, 32) || !is_hex(link.span_id, 16)) {
        problems.push_back(where + ": a link's ids: " + l.dump());
      }
      link.attributes = attributes_of(l, where + " link", problems);
      span.links.push_back(std::move(link));
    }
    if (s.contains("status")) {
      const auto& st = s["status"];
      if (st.contains("code")) {
        if (st["code"].is_number_integer()) {
          span.status_code = st["code"].get<int>();
        } else {
          problems.push_back(where + ": status code is not an integer: " + st["code"].dump());
        }
      }
      span.status_message = st.value("message", "");
    }
    return span;
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  int status_ = 200;                        // guarded by mu_
  std::chrono::milliseconds delay_{0};      // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  int requests_ = 0;                        // guarded by mu_
  int accepted_ = 0;                        // guarded by mu_
  std::vector<std::string> content_types_;  // guarded by mu_
  std::vector<ReceivedSpan> spans_;         // guarded by mu_
  std::vector<std::string> problems_;       // guarded by mu_
};

}  // namespace awa::testing
