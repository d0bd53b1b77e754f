// What a metrics::Family holds behind its public face (include/awa/metrics.hpp), and the
// text exposition of one family (exposition.cpp). Internal to src/metrics.
#pragma once

#include <map>
#include <memory>
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
};

// Appends HELP, TYPE and every series of the family, ordered by label values.
void write_family(std::string& out, const Family<Counter>::Impl& f);
void write_family(std::string& out, const Family<Gauge>::Impl& f);
void write_family(std::string& out, const Family<Histogram>::Impl& f);

}  // namespace awa::metrics
