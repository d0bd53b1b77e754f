#include "otlp_sink.hpp"

#include <httplib.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace chaos {
namespace {

// An attribute's value in OTLP JSON, or null.
nlohmann::json attribute(const nlohmann::json& span, const std::string& key) {
  for (const auto& a : span.value("attributes", nlohmann::json::array())) {
    if (a.value("key", "") != key) continue;
    const auto& v = a.at("value");
    if (v.contains("stringValue")) return v["stringValue"];
    if (v.contains("intValue")) return v["intValue"];
    return v;
  }
  return nullptr;
}

}  // namespace

struct OtlpSink::Impl {
  httplib::Server server;
  int port = 0;
  std::thread thread;
  mutable std::mutex mu;
  Counts counts;
  std::set<std::string> jobs;

  void take(const std::string& body) {
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    std::lock_guard lock(mu);
    if (doc.is_discarded()) {
      ++counts.malformed;
      return;
    }
    for (const auto& rs : doc.value("resourceSpans", nlohmann::json::array())) {
      for (const auto& ss : rs.value("scopeSpans", nlohmann::json::array())) {
        for (const auto& span : ss.value("spans", nlohmann::json::array())) {
          if (span.value("name", "").rfind("process ", 0) != 0) continue;
          ++counts.process_spans;
          const auto id = attribute(span, "awa.job.id");
          const bool whole = id.is_string() && attribute(span, "awa.job.outcome").is_string() &&
                             attribute(span, "awa.job.attempt").is_string() &&
                             span.value("traceId", "").size() == 32 &&
                             span.value("spanId", "").size() == 16;
          if (!whole) {
            ++counts.malformed;
            continue;
          }
          jobs.insert(id.get<std::string>());
        }
      }
    }
    counts.jobs = jobs.size();
  }
};

OtlpSink::OtlpSink() : impl_(std::make_unique<Impl>()) {
  impl_->server.Post("/v1/traces", [this](const httplib::Request& req, httplib::Response& res) {
    impl_->take(req.body);
    res.set_content("{}", "application/json");
  });
  impl_->server.Post("/refuse", [this](const httplib::Request&, httplib::Response& res) {
    {
      std::lock_guard lock(impl_->mu);
      ++impl_->counts.refused_requests;
    }
    res.status = 503;
  });
  impl_->port = impl_->server.bind_to_any_port("127.0.0.1");
  if (impl_->port <= 0) throw std::runtime_error("the OTLP sink cannot bind 127.0.0.1");
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
}

OtlpSink::~OtlpSink() {
  impl_->server.stop();
  impl_->thread.join();
}

std::string OtlpSink::accepting_url() const {
  return fmt::format("http://127.0.0.1:{}/v1/traces", impl_->port);
}
std::string OtlpSink::refusing_url() const {
  return fmt::format("http://127.0.0.1:{}/refuse", impl_->port);
}

OtlpSink::Counts OtlpSink::counts() const {
  std::lock_guard lock(impl_->mu);
  return impl_->counts;
}

}  // namespace chaos
