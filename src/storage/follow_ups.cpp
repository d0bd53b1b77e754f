#include "storage/follow_ups.hpp"

#include <chrono>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "storage/job_metadata.hpp"

namespace awa::storage {

namespace {

// timestamptz input text, UTC, to the microsecond.
std::string utc_text(std::chrono::system_clock::time_point at) {
  const auto micros = std::chrono::floor<std::chrono::microseconds>(at);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}+00", micros);
}

}  // namespace

std::string follow_ups_json(std::span<const FollowUp> follow_ups) {
  std::string out = "[";
  for (const auto& f : follow_ups) {
    const auto& job = f.job;
    const auto& o = job.opts;
    if (out.size() > 1) out += ',';
    // The args text is embedded as given (validated JSON): parsing and printing it again
    // could change a number's representation.
    out +=
        fmt::format(R"({{"on":{},"kind":{},"args":{},"queue":{},"priority":{},"max_attempts":{})",
                    nlohmann::json(follow_up_on_name(f.on)).dump(), nlohmann::json(job.kind).dump(),
                    job.args_json, nlohmann::json(o.queue).dump(), o.priority, o.max_attempts);
    if (o.run_at) out += fmt::format(R"(,"run_at":"{}")", utc_text(*o.run_at));
    if (const auto meta = metadata_text(job)) out += fmt::format(R"(,"metadata":{})", *meta);
    if (!o.tags.empty()) out += fmt::format(R"(,"tags":{})", nlohmann::json(o.tags).dump());
    if (o.ordering_key) {
      out += fmt::format(R"(,"ordering_key":{})", nlohmann::json(*o.ordering_key).dump());
    }
    out += '}';
  }
  out += ']';
  return out;
}

}  // namespace awa::storage
