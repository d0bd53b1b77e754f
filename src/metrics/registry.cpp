// Counters, gauges, histograms, their families and the registry (include/awa/metrics.hpp);
// the text format is in exposition.cpp.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <variant>

#include "awa/error.hpp"
#include "metrics/family.hpp"

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

// Throws InvalidArgument for a name or label name Prometheus would reject.
void check_names(const std::string& name, Type type, const std::vector<std::string>& labels) {
  if (!valid_metric_name(name)) throw InvalidArgument("metrics: invalid metric name: " + name);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const auto& l = labels[i];
    if (!valid_label_name(l) || (type == Type::kHistogram && l == "le")) {
      throw InvalidArgument("metrics: invalid label name for " + name + ": " + l);
    }
    if (std::find(labels.begin(), labels.begin() + static_cast<std::ptrdiff_t>(i), l) !=
        labels.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw InvalidArgument("metrics: duplicate label name for " + name + ": " + l);
    }
  }
}

}  // namespace

// --- series ----------------------------------------------------------------------------

void Counter::inc(std::uint64_t n) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
std::uint64_t Counter::value() const noexcept { return value_.load(std::memory_order_relaxed); }

void Gauge::set(double v) noexcept { value_.store(v, std::memory_order_relaxed); }
void Gauge::inc(double d) noexcept { value_.fetch_add(d, std::memory_order_relaxed); }
void Gauge::dec(double d) noexcept { value_.fetch_add(-d, std::memory_order_relaxed); }
double Gauge::value() const noexcept { return value_.load(std::memory_order_relaxed); }

struct Histogram::Impl {
  explicit Impl(std::span<const double> b)
      : bounds(b.begin(), b.end()),
        buckets(std::make_unique<std::atomic<std::uint64_t>[]>(bounds.size() + 1)) {}
  std::vector<double> bounds;
  // Not cumulative: observe() touches one bucket; snapshot() accumulates.
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets;  // bounds.size() + 1
  std::atomic<double> sum{0.0};
};

Histogram::Histogram(std::span<const double> bounds) {
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (std::isnan(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i]))) {
      throw InvalidArgument("histogram: bucket bounds must be ascending numbers");
    }
  }
  impl_ = std::make_unique<Impl>(bounds);
}

Histogram::~Histogram() = default;

std::span<const double> Histogram::bounds() const noexcept { return impl_->bounds; }

void Histogram::observe(double v) noexcept {
  // lower_bound: a value equal to a bound belongs to that bucket (le is inclusive).
  const auto& bounds = impl_->bounds;
  const auto it = std::lower_bound(bounds.begin(), bounds.end(), v);
  const auto i = static_cast<std::size_t>(it - bounds.begin());
  impl_->buckets[i].fetch_add(1, std::memory_order_relaxed);
  impl_->sum.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  const std::size_t n = impl_->bounds.size() + 1;
  s.cumulative.reserve(n);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    total += impl_->buckets[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(total);
  }
  // _count is derived from the buckets, so it always equals the +Inf bucket even when a
  // scrape races an observation.
  s.count = total;
  s.sum = impl_->sum.load(std::memory_order_relaxed);
  return s;
}

// --- families --------------------------------------------------------------------------

template <class Metric>
Family<Metric>::Family(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  if (impl_->label_names.empty()) with({});  // an unlabelled metric shows 0 from the start
}

template <class Metric>
Family<Metric>::~Family() = default;

template <class Metric>
const std::string& Family<Metric>::name() const noexcept {
  return impl_->name;
}

template <class Metric>
Metric& Family<Metric>::with(std::initializer_list<std::string_view> values) {
  return with(std::span<const std::string_view>(values.begin(), values.size()));
}

template <class Metric>
Metric& Family<Metric>::with(std::span<const std::string_view> values) {
  Impl& f = *impl_;
  if (values.size() != f.label_names.size()) {
    throw InvalidArgument("metrics: " + f.name + " takes " + std::to_string(f.label_names.size()) +
                          " label values, got " + std::to_string(values.size()));
  }
  std::vector<std::string> key(values.begin(), values.end());
  {
    std::shared_lock lock(f.mu);
    if (const auto it = f.series.find(key); it != f.series.end()) return *it->second;
  }
  std::unique_lock lock(f.mu);
  if (f.capped_label) {
    auto& value = key[*f.capped_label];
    if (!f.admitted.contains(value)) {
      if (f.admitted.size() < f.max_values) {
        f.admitted.insert(value);
      } else {
        value = f.overflow;
      }
    }
  }
  auto& slot = f.series[std::move(key)];
  if (!slot) {
    if constexpr (std::is_same_v<Metric, Histogram>) {
      slot = std::make_unique<Histogram>(f.bounds);
    } else {
      slot = std::make_unique<Metric>();
    }
  }
  return *slot;
}

template <class Metric>
void Family<Metric>::cap_values(std::string_view label, std::size_t max_values,
                                std::string overflow) {
  Impl& f = *impl_;
  const auto it = std::find(f.label_names.begin(), f.label_names.end(), label);
  if (it == f.label_names.end()) {
    throw InvalidArgument("metrics: " + f.name + " has no label " + std::string(label));
  }
  std::unique_lock lock(f.mu);
  f.capped_label = static_cast<std::size_t>(it - f.label_names.begin());
  f.max_values = max_values;
  f.overflow = std::move(overflow);
  f.admitted.clear();
  for (const auto& [key, series] : f.series) f.admitted.insert(key[*f.capped_label]);
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// --- registry --------------------------------------------------------------------------

struct Registry::Impl {
  using Entry = std::variant<std::unique_ptr<Family<Counter>>, std::unique_ptr<Family<Gauge>>,
                             std::unique_ptr<Family<Histogram>>>;
  mutable std::shared_mutex mu;
  std::vector<Entry> families;  // guarded by mu; in registration order
  // The engine's families in this registry (engine_metrics), made once.
  std::once_flag engine_once;
  std::unique_ptr<EngineMetrics> engine;

  // The family registered under `name` as a Family<Metric> with these labels; nullptr when
  // there is none. Throws when the name is taken by another type or label set.
  template <class Metric>
  Family<Metric>* find(const std::string& name, const std::vector<std::string>& labels) const {
    for (const auto& e : families) {
      const bool same_name = std::visit([&](const auto& f) { return f->name() == name; }, e);
      if (!same_name) continue;
      const auto* f = std::get_if<std::unique_ptr<Family<Metric>>>(&e);
      if (f == nullptr || (*f)->impl_->label_names != labels) {
        throw InvalidArgument("metrics: " + name +
                              " is already registered with another type or labels");
      }
      return f->get();
    }
    return nullptr;
  }
};

Registry::Registry() : impl_(std::make_unique<Impl>()) {}
Registry::~Registry() = default;

namespace {

template <class Metric>
std::unique_ptr<typename Family<Metric>::Impl> family_impl(const std::string& name,
                                                           const std::string& help, Type type,
                                                           std::vector<std::string> labels,
                                                           std::vector<double> bounds = {}) {
  check_names(name, type, labels);
  auto f = std::make_unique<typename Family<Metric>::Impl>();
  f->name = name;
  f->help = help;
  f->type = type;
  f->label_names = std::move(labels);
  f->bounds = std::move(bounds);
  return f;
}

}  // namespace

Family<Counter>& Registry::counter(const std::string& name, const std::string& help,
                                   std::vector<std::string> label_names) {
  std::unique_lock lock(impl_->mu);
  if (auto* f = impl_->find<Counter>(name, label_names)) return *f;
  std::unique_ptr<Family<Counter>> owned(new Family<Counter>(
      family_impl<Counter>(name, help, Type::kCounter, std::move(label_names))));
  auto& ref = *owned;
  impl_->families.emplace_back(std::move(owned));
  return ref;
}

Family<Gauge>& Registry::gauge(const std::string& name, const std::string& help,
                               std::vector<std::string> label_names) {
  std::unique_lock lock(impl_->mu);
  if (auto* f = impl_->find<Gauge>(name, label_names)) return *f;
  std::unique_ptr<Family<Gauge>> owned(
      new Family<Gauge>(family_impl<Gauge>(name, help, Type::kGauge, std::move(label_names))));
  auto& ref = *owned;
  impl_->families.emplace_back(std::move(owned));
  return ref;
}

Family<Histogram>& Registry::histogram(const std::string& name, const std::string& help,
                                       std::vector<std::string> label_names,
                                       std::span<const double> bounds) {
  // Validate the bounds before anything is registered (Histogram's constructor checks).
  const Histogram probe(bounds);
  std::unique_lock lock(impl_->mu);
  if (auto* f = impl_->find<Histogram>(name, label_names)) {
    const auto& have = f->impl_->bounds;
    if (!std::equal(have.begin(), have.end(), bounds.begin(), bounds.end())) {
      throw InvalidArgument("metrics: " + name + " is already registered with other buckets");
    }
    return *f;
  }
  std::unique_ptr<Family<Histogram>> owned(new Family<Histogram>(
      family_impl<Histogram>(name, help, Type::kHistogram, std::move(label_names),
                             std::vector<double>(bounds.begin(), bounds.end()))));
  auto& ref = *owned;
  impl_->families.emplace_back(std::move(owned));
  return ref;
}

std::string Registry::expose() const {
  std::string out;
  std::shared_lock lock(impl_->mu);
  for (const auto& e : impl_->families) {
    std::visit([&](const auto& f) { write_family(out, *f->impl_); }, e);
  }
  return out;
}

Registry& default_registry() {
  // Never destroyed: worker threads may still record during static destruction.
  static auto* const registry = new Registry();
  return *registry;
}

EngineMetrics& engine() { return engine_metrics(default_registry()); }

EngineMetrics& engine_metrics(Registry& r) {
  std::call_once(r.impl_->engine_once, [&r] {
    r.impl_->engine.reset(new EngineMetrics{
        r.counter("awa_job_claimed_total", "Jobs claimed, by queue and enqueue shard.",
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
        [&]() -> Family<Counter>& {
          auto& f = r.counter("awa_job_unknown_kind_total",
                              "Claimed jobs of a kind with no handler in this process, sent "
                              "back to the queue for a worker that has one (kinds past the "
                              "first few seen count under kind=\"other\").",
                              {"queue", "kind"});
          f.cap_values("kind", kUnknownKindLabels);
          return f;
        }(),
        r.gauge("awa_jobs_prefetched",
                "Jobs claimed ahead of a free worker and not started yet (the dispatcher's "
                "bounded prefetch buffer) in this process.",
                {"queue"}),
        r.counter("awa_job_released_total",
                  "Prefetched jobs handed back unstarted (a stopping client), claimable at once.",
                  {"queue"}),
        r.counter("awa_periodic_fires_total",
                  "Periodic schedules fired by this process as leader: outcome enqueued (per "
                  "job) or failed (the schedule stays due).",
                  {"periodic", "outcome"}),
        r.counter("awa_claims_limited_total",
                  "Claims of a limited queue that came back empty while it had available jobs "
                  "(its rate or global concurrency limit held them back).",
                  {"queue", "limit"}),
        r.counter("awa_completion_flush_server_errors_total",
                  "Completion flushes failed by an error of the server or schema, not of a row "
                  "(read-only after a fail-over, database dropped, function missing or "
                  "ambiguous, feature refused); the rows are kept and retried. Needs an operator.",
                  {"sqlstate"}),
        r.gauge("awa_queue_waiting", "Jobs waiting for their parents (InsertOpts::after).",
                {"queue"}),
    });
  });
  return *r.impl_->engine;
}

}  // namespace awa::metrics
