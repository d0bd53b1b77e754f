// awa::trace::Span: an application's span, recorded through the tracer of the thread (a
// handler's client) or of the process.
#include <fmt/format.h>

#include "awa/error.hpp"
#include "awa/tracing.hpp"
#include "trace/tracer.hpp"

namespace awa::trace {
namespace {

detail::Kind kind_of(std::string_view kind) {
  if (kind == "internal") return detail::Kind::kInternal;
  if (kind == "server") return detail::Kind::kServer;
  if (kind == "client") return detail::Kind::kClient;
  if (kind == "producer") return detail::Kind::kProducer;
  if (kind == "consumer") return detail::Kind::kConsumer;
  throw InvalidArgument(
      fmt::format("span kind {:?}: not one of internal, server, client, producer, consumer", kind));
}

}  // namespace

struct Span::Impl {
  detail::ActiveSpan span;
  std::optional<Scope> scope;  // its context is the thread's current one while it lives
};

Span::Span(std::string name, std::string_view kind) : Span(std::move(name), kind, false) {}

Span::Span(std::string name, std::string_view kind, bool root) {
  const auto k = kind_of(kind);
  auto tracer = detail::active_tracer();
  const Context* parent = current();
  if (!tracer || (!parent && !root)) return;
  impl_ = std::make_unique<Impl>();
  impl_->span = detail::ActiveSpan(std::move(tracer), std::move(name), k, parent);
  impl_->scope.emplace(impl_->span.context());
}

Span Span::root(std::string name, std::string_view kind) {
  return Span(std::move(name), kind, true);
}

Span::~Span() {
  if (!impl_) return;
  impl_->scope.reset();
  impl_->span.end();
}

bool Span::recording() const { return impl_ && impl_->span.recording(); }

std::optional<Context> Span::context() const {
  if (impl_) return impl_->span.context();
  if (const auto* c = current()) return *c;
  return std::nullopt;
}

void Span::set_attribute(std::string key, std::string value) {
  if (impl_) impl_->span.attribute(std::move(key), std::move(value));
}
void Span::set_attribute(std::string key, const char* value) {
  set_attribute(std::move(key), std::string(value));
}
void Span::set_attribute(std::string key, std::int64_t value) {
  if (impl_) impl_->span.attribute(std::move(key), value);
}
void Span::set_attribute(std::string key, double value) {
  if (impl_) impl_->span.attribute(std::move(key), value);
}
void Span::set_attribute(std::string key, bool value) {
  if (impl_) impl_->span.attribute(std::move(key), value);
}
void Span::add_event(std::string name) {
  if (impl_) impl_->span.event(std::move(name));
}
void Span::set_error(std::string message) {
  if (impl_) impl_->span.error(message);
}

}  // namespace awa::trace

namespace awa::trace {

struct Tracing::Impl {
  std::shared_ptr<detail::Tracer> tracer;
};

Tracing::Tracing(ExportOptions options, metrics::Registry* registry)
    : impl_(std::make_unique<Impl>()) {
  impl_->tracer =
      detail::make_tracer(std::move(options), registry ? *registry : metrics::default_registry());
  if (impl_->tracer) detail::install(impl_->tracer);
}

Tracing::~Tracing() {
  if (!impl_->tracer) return;
  detail::uninstall(impl_->tracer.get());
  impl_->tracer->flush(impl_->tracer->options().timeout);
}

ExportStats Tracing::stats() const {
  return impl_->tracer ? impl_->tracer->stats() : ExportStats{};
}

bool Tracing::flush(std::chrono::milliseconds timeout) {
  return !impl_->tracer || impl_->tracer->flush(timeout);
}

}  // namespace awa::trace
