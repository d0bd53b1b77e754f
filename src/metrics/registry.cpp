#include <algorithm>
#include <charconv>
#include <cmath>
#include <mutex>

#include "awa/error.hpp"
#include "awa/metrics.hpp"

namespace awa::metrics {
namespace {

bool valid_metric_name(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool valid_label_name(std::string_view s) {
  if (s.empty() || s.starts_with("__")) return false;  // "__" is Prometheus' own
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

const char* type_name(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Shortest round-trip digits, which Go's strconv.ParseFloat reads back exactly. Fixed
// notation in the range bucket bounds and latencies live in, so a bound reads le="0.0005"
// rather than the equally short "5e-04"; infinities and NaN as the format spells them.
void append_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[64];
    const double a = std::fabs(v);
    const auto fmt = (a == 0.0 || (a >= 1e-6 && a < 1e15)) ? std::chars_format::fixed
                                                           : std::chars_format::scientific;
    const auto r = std::to_chars(buf, buf + sizeof buf, v, fmt);
    out.append(buf, r.ptr);
  }
}

void append_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_help(std::string& out, std::string_view help) {
  // HELP text escapes backslash and newline only (quotes are literal there).
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

// name{a="x",b="y"[,le="..."]}; nothing when there are no labels at all.
void append_labels(std::string& out, const std::vector<std::string>& names,
                   const std::vector<std::string>& values, const char* le = nullptr) {
  if (names.empty() && le == nullptr) return;
  out += '{';
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    append_escaped_label_value(out, values[i]);
    out += '"';
  }
  if (le != nullptr) {
    if (!names.empty()) out += ',';
    out += "le=\"";
    out += le;
    out += '"';
  }
  out += '}';
}

void append_header(std::string& out, const FamilyBase& f) {
  out += "# HELP ";
  out += f.name();
  out += ' ';
  append_help(out, f.help());
  out += "\n# TYPE ";
  out += f.name();
  out += ' ';
  out += type_name(f.type());
  out += '\n';
}

}  // namespace

void append_escaped_label_value(std::string& out, std::string_view value) {
  for (const char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

// --- Histogram -------------------------------------------------------------------------

Histogram::Histogram(std::span<const double> bounds)
    : bounds_(bounds.begin(), bounds.end()),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    if (std::isnan(bounds_[i]) || (i > 0 && !(bounds_[i - 1] < bounds_[i]))) {
      throw InvalidArgument("histogram: bucket bounds must be ascending numbers");
    }
  }
}

void Histogram::observe(double v) noexcept {
  // lower_bound: a value equal to a bound belongs to that bucket (le is inclusive).
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  const auto i = static_cast<std::size_t>(it - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.cumulative.reserve(bounds_.size() + 1);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(total);
  }
  // _count is derived from the buckets, so it always equals the +Inf bucket even when a
  // scrape races an observation.
  s.count = total;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

// --- families --------------------------------------------------------------------------

FamilyBase::FamilyBase(std::string name, std::string help, Type type,
                       std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {
  if (!valid_metric_name(name_)) throw InvalidArgument("metrics: invalid metric name: " + name_);
  for (std::size_t i = 0; i < label_names_.size(); ++i) {
    const auto& l = label_names_[i];
    if (!valid_label_name(l) || (type_ == Type::kHistogram && l == "le")) {
      throw InvalidArgument("metrics: invalid label name for " + name_ + ": " + l);
    }
    if (std::find(label_names_.begin(), label_names_.begin() + static_cast<std::ptrdiff_t>(i), l) !=
        label_names_.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw InvalidArgument("metrics: duplicate label name for " + name_ + ": " + l);
    }
  }
}

void FamilyBase::check_arity(std::size_t values) const {
  if (values != label_names_.size()) {
    throw InvalidArgument("metrics: " + name_ + " takes " + std::to_string(label_names_.size()) +
                          " label values, got " + std::to_string(values));
  }
}

template <>
void Family<Counter>::write(std::string& out) const {
  append_header(out, *this);
  std::shared_lock lock(mu_);
  for (const auto& [values, c] : series_) {
    out += name();
    append_labels(out, label_names(), values);
    out += ' ';
    append_uint(out, c->value());
    out += '\n';
  }
}

template <>
void Family<Gauge>::write(std::string& out) const {
  append_header(out, *this);
  std::shared_lock lock(mu_);
  for (const auto& [values, g] : series_) {
    out += name();
    append_labels(out, label_names(), values);
    out += ' ';
    append_double(out, g->value());
    out += '\n';
  }
}

template <>
void Family<Histogram>::write(std::string& out) const {
  append_header(out, *this);
  std::vector<std::string> les;
  for (const double b : bounds_) {
    std::string le;
    append_double(le, b);
    les.push_back(std::move(le));
  }
  les.emplace_back("+Inf");
  std::shared_lock lock(mu_);
  for (const auto& [values, h] : series_) {
    const auto snap = h->snapshot();
    for (std::size_t i = 0; i < les.size(); ++i) {
      out += name();
      out += "_bucket";
      append_labels(out, label_names(), values, les[i].c_str());
      out += ' ';
      append_uint(out, snap.cumulative[i]);
      out += '\n';
    }
    out += name();
    out += "_sum";
    append_labels(out, label_names(), values);
    out += ' ';
    append_double(out, snap.sum);
    out += '\n';
    out += name();
    out += "_count";
    append_labels(out, label_names(), values);
    out += ' ';
    append_uint(out, snap.count);
    out += '\n';
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// --- registry --------------------------------------------------------------------------

FamilyBase* Registry::find(const std::string& name) const {
  for (const auto& f : families_) {
    if (f->name() == name) return f.get();
  }
  return nullptr;
}

namespace {

// The family already registered under this name, if it is the same metric.
template <class F>
F* existing(FamilyBase* found, Type type, const std::vector<std::string>& label_names) {
  if (found == nullptr) return nullptr;
  if (found->type() != type || found->label_names() != label_names) {
    throw InvalidArgument("metrics: " + found->name() +
                          " is already registered with another type or labels");
  }
  return static_cast<F*>(found);
}

}  // namespace

Family<Counter>& Registry::counter(const std::string& name, const std::string& help,
                                   std::vector<std::string> label_names) {
  std::unique_lock lock(mu_);
  if (auto* f = existing<Family<Counter>>(find(name), Type::kCounter, label_names)) return *f;
  auto f = std::make_unique<Family<Counter>>(name, help, Type::kCounter, std::move(label_names));
  auto& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

Family<Gauge>& Registry::gauge(const std::string& name, const std::string& help,
                               std::vector<std::string> label_names) {
  std::unique_lock lock(mu_);
  if (auto* f = existing<Family<Gauge>>(find(name), Type::kGauge, label_names)) return *f;
  auto f = std::make_unique<Family<Gauge>>(name, help, Type::kGauge, std::move(label_names));
  auto& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

Family<Histogram>& Registry::histogram(const std::string& name, const std::string& help,
                                       std::vector<std::string> label_names,
                                       std::span<const double> bounds) {
  // Validate the bounds before anything is registered (Histogram's constructor checks).
  const Histogram probe(bounds);
  std::unique_lock lock(mu_);
  if (auto* f = existing<Family<Histogram>>(find(name), Type::kHistogram, label_names)) {
    const auto have = f->bounds();
    if (!std::equal(have.begin(), have.end(), bounds.begin(), bounds.end())) {
      throw InvalidArgument("metrics: " + name + " is already registered with other buckets");
    }
    return *f;
  }
  auto f = std::make_unique<Family<Histogram>>(name, help, Type::kHistogram, std::move(label_names),
                                               std::vector<double>(bounds.begin(), bounds.end()));
  auto& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

std::string Registry::expose() const {
  std::string out;
  std::shared_lock lock(mu_);
  for (const auto& f : families_) f->write(out);
  return out;
}

Registry& default_registry() {
  // Never destroyed: worker threads may still record during static destruction.
  static auto* const registry = new Registry();
  return *registry;
}

EngineMetrics& engine() {
  static EngineMetrics* const m = [] {
    auto& r = default_registry();
    return new EngineMetrics{
        r.counter("awa_job_claimed_total", "Jobs claimed, by queue and enqueue shard (ADR-025).",
                  {"queue", "awa_enqueue_shard"}),
        r.counter("awa_job_enqueued_total", "Jobs enqueued.", {"queue"}),
        r.counter("awa_job_completed_total",
                  "Attempts ended, by end state (completed, retried, failed, dlq, snoozed, "
                  "cancelled; stale: the attempt was already closed).",
                  {"queue", "state"}),
        r.histogram("awa_claim_duration_seconds", "Duration of one claim call.", {"queue"}),
        r.histogram("awa_completion_flush_seconds",
                    "Duration of one completion flush (one fused completion statement)."),
        r.gauge("awa_queue_available", "Committed, unclaimed jobs per lane.",
                {"queue", "priority", "awa_enqueue_shard"}),
        r.gauge("awa_queue_lag", "Enqueue cursor minus claim cursor per lane.",
                {"queue", "priority", "awa_enqueue_shard"}),
        r.gauge("awa_jobs_running", "Handlers running in this process.", {"queue"}),
        r.counter("awa_job_unknown_kind_total",
                  "Claimed jobs of a kind with no handler in this process, sent back to the "
                  "queue for a worker that has one.",
                  {"queue", "kind"}),
        r.gauge("awa_jobs_prefetched",
                "Jobs claimed ahead of a free worker and not started yet (the dispatcher's "
                "bounded prefetch buffer) in this process.",
                {"queue"}),
        r.counter("awa_job_released_total",
                  "Prefetched jobs handed back unstarted (a stopping client), claimable at once.",
                  {"queue"}),
    };
  }();
  return *m;
}

}  // namespace awa::metrics
