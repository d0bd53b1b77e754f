#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "awa/error.hpp"
#include "awa/trace.hpp"

namespace awa::trace {
namespace {

thread_local const Context* t_current = nullptr;

bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool all_zero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '0'; });
}

}  // namespace

bool Context::sampled() const {
  if (traceparent.size() != 55) return false;  // not a valid context: nothing is sampled
  const auto flags = std::string_view(traceparent).substr(53, 2);
  const char low = flags[1];
  const int bits = low <= '9' ? low - '0' : low - 'a' + 10;
  return (bits & 1) != 0;
}

std::string invalid_reason(std::string_view traceparent, std::string_view tracestate) {
  // version "-" trace-id "-" parent-id "-" trace-flags: 2 + 1 + 32 + 1 + 16 + 1 + 2.
  if (traceparent.size() != 55 || traceparent[2] != '-' || traceparent[35] != '-' ||
      traceparent[52] != '-') {
    return fmt::format(
        "traceparent {:?} is not 00-<32 hex digits>-<16 hex digits>-<2 hex digits> (W3C trace "
        "context, version 00)",
        std::string(traceparent.substr(0, 80)));
  }
  const auto version = traceparent.substr(0, 2);
  const auto trace_id = traceparent.substr(3, 32);
  const auto parent_id = traceparent.substr(36, 16);
  const auto flags = traceparent.substr(53, 2);
  if (!lower_hex(version) || !lower_hex(trace_id) || !lower_hex(parent_id) || !lower_hex(flags)) {
    return fmt::format("traceparent {:?} has a character that is not a lower-case hex digit",
                       std::string(traceparent));
  }
  if (version != "00") {
    return fmt::format("traceparent {:?} has version {}; only version 00 is understood",
                       std::string(traceparent), std::string(version));
  }
  if (all_zero(trace_id)) {
    return fmt::format("traceparent {:?} has an all-zero trace id", std::string(traceparent));
  }
  if (all_zero(parent_id)) {
    return fmt::format("traceparent {:?} has an all-zero parent id", std::string(traceparent));
  }
  if (tracestate.size() > kMaxTracestateBytes) {
    return fmt::format("tracestate is {} bytes; the limit is {}", tracestate.size(),
                       kMaxTracestateBytes);
  }
  if (std::any_of(tracestate.begin(), tracestate.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return "tracestate has a control character";
  }
  return {};
}

Context parse(std::string traceparent, std::string tracestate) {
  if (auto why = invalid_reason(traceparent, tracestate); !why.empty()) throw InvalidArgument(why);
  return Context{std::move(traceparent), std::move(tracestate)};
}

std::optional<Context> from_metadata(const nlohmann::json& metadata) {
  if (!metadata.is_object()) return std::nullopt;
  const auto tp = metadata.find(kTraceparentKey);
  if (tp == metadata.end() || !tp->is_string()) return std::nullopt;
  std::string state;
  if (const auto ts = metadata.find(kTracestateKey); ts != metadata.end() && ts->is_string()) {
    state = ts->get<std::string>();
  }
  const auto& parent = tp->get_ref<const std::string&>();
  // A malformed tracestate alone is dropped, as W3C asks; the traceparent still counts.
  if (!invalid_reason(parent, state).empty()) {
    if (!invalid_reason(parent).empty()) return std::nullopt;
    state.clear();
  }
  return Context{parent, std::move(state)};
}

const Context* current() { return t_current; }

Scope::Scope(Context context) : context_(std::move(context)), previous_(t_current) {
  if (auto why = invalid_reason(context_->traceparent, context_->tracestate); !why.empty()) {
    throw InvalidArgument(why);
  }
  t_current = &*context_;
}

Scope::Scope() : previous_(t_current) { t_current = nullptr; }

Scope::~Scope() { t_current = previous_; }

}  // namespace awa::trace
