// The Prometheus text exposition format 0.0.4 of the metric families.
#include <charconv>
#include <cmath>
#include <mutex>

#include "metrics/family.hpp"

namespace awa::metrics {
namespace {

// Backslash, double quote and newline escaped, as label values need.
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

template <class F>
void append_header(std::string& out, const F& f) {
  out += "# HELP ";
  out += f.name;
  out += ' ';
  append_help(out, f.help);
  out += "\n# TYPE ";
  out += f.name;
  out += ' ';
  out += type_name(f.type);
  out += '\n';
}

}  // namespace

void write_family(std::string& out, const Family<Counter>::Impl& f) {
  append_header(out, f);
  std::shared_lock lock(f.mu);
  for (const auto& [values, c] : f.series) {
    out += f.name;
    append_labels(out, f.label_names, values);
    out += ' ';
    append_uint(out, c->value());
    out += '\n';
  }
}

void write_family(std::string& out, const Family<Gauge>::Impl& f) {
  append_header(out, f);
  std::shared_lock lock(f.mu);
  for (const auto& [values, g] : f.series) {
    out += f.name;
    append_labels(out, f.label_names, values);
    out += ' ';
    append_double(out, g->value());
    out += '\n';
  }
}

void write_family(std::string& out, const Family<Histogram>::Impl& f) {
  append_header(out, f);
  std::vector<std::string> les;
  for (const double b : f.bounds) {
    std::string le;
    append_double(le, b);
    les.push_back(std::move(le));
  }
  les.emplace_back("+Inf");
  std::shared_lock lock(f.mu);
  for (const auto& [values, h] : f.series) {
    const auto snap = h->snapshot();
    for (std::size_t i = 0; i < les.size(); ++i) {
      out += f.name;
      out += "_bucket";
      append_labels(out, f.label_names, values, les[i].c_str());
      out += ' ';
      append_uint(out, snap.cumulative[i]);
      out += '\n';
    }
    out += f.name;
    out += "_sum";
    append_labels(out, f.label_names, values);
    out += ' ';
    append_double(out, snap.sum);
    out += '\n';
    out += f.name;
    out += "_count";
    append_labels(out, f.label_names, values);
    out += ' ';
    append_uint(out, snap.count);
    out += '\n';
  }
}

}  // namespace awa::metrics
