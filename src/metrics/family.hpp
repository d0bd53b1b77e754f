// What a metrics::Family holds behind its public face (include/awa/metrics.hpp), and the
// text exposition of one family (exposition.cpp). Internal to src/metrics.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "awa/metrics.hpp"

namespace awa::metrics {

enum class Type { kCounter, kGauge, kHistogram };

template <class Metric>
struct Family<Metric>::Impl {
  std::string name;
  std::string help;
  Type type;
  std::vector<std::string> label_names;
  std::vector<double> bounds;  // histograms only
  mutable std::shared_mutex mu;
  // Series by label values; never erased, so references handed out stay valid.
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> series;  // guarded by mu
  // Family::cap_values(): the position of the capped label, how many distinct values it
  // may take, the value standing in for the rest, and the values admitted. Guarded by mu.
  std::optional<std::size_t> capped_label;
  std::size_t max_values = 0;
  std::string overflow;
  std::set<std::string> admitted;
};

// Appends HELP, TYPE and every series of the family, ordered by label values.
void write_family(std::string& out, const Family<Counter>::Impl& f);
void write_family(std::string& out, const Family<Gauge>::Impl& f);
void write_family(std::string& out, const Family<Histogram>::Impl& f);

}  // namespace awa::metrics
