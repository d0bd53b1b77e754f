#include "bench_common.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <latch>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "awa/error.hpp"
#include "schema/migrator.hpp"
#include "schema/optional_features.hpp"

namespace awa::bench {

// The benchmark's own SQL: the sampler's poll and the machine description. Library SQL
// lives in sql/; these are diagnostics of the benchmark, not part of awa.
namespace {

constexpr std::string_view kSampleWaits =
    "SELECT coalesce(wait_event_type, ''), coalesce(wait_event, ''), coalesce(state, '') "
    "FROM pg_stat_activity WHERE pid = ANY($1::int[])";

constexpr std::string_view kServerDescription =
    "SELECT current_setting('server_version'), "
    "coalesce(host(inet_server_addr()), 'unix socket') || ':' || "
    "coalesce(inet_server_port()::text, '')";

constexpr std::string_view kServerSettings =
    "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY($1::text[]) "
    "ORDER BY name";

constexpr std::string_view kReportedSettings =
    "{fsync,synchronous_commit,full_page_writes,wal_sync_method,shared_buffers,"
    "max_wal_size,checkpoint_timeout,max_connections}";

}  // namespace

std::string database_url() {
  const char* url = std::getenv("DATABASE_URL");
  if (url == nullptr || *url == '\0') {
    throw std::runtime_error("DATABASE_URL is not set (run the benchmark with scripts/bench)");
  }
  return url;
}

pg::ConnectOptions connect_options(std::string application_name) {
  pg::ConnectOptions options;
  options.url = database_url();
  options.application_name = std::move(application_name);
  return options;
}

pg::Connection connect(std::string application_name, std::chrono::seconds statement_timeout) {
  pg::Connection conn = pg::Connection::connect(connect_options(std::move(application_name)));
  conn.exec(fmt::format("SET statement_timeout = '{}s'", statement_timeout.count()));
  return conn;
}

std::int64_t wal_position(pg::Connection& conn) {
  return conn.exec("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
      .get<std::int64_t>(0, 0);
}

std::vector<int> parse_int_list(std::string_view text, std::string_view what) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    std::string_view item = text.substr(pos, comma - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      throw std::invalid_argument(
          fmt::format("{}: '{}' is not a comma-separated list of integers", what, text));
    }
    out.push_back(value);
    pos = comma + 1;
  }
  return out;
}

Percentiles percentiles(std::vector<double> values) {
  Percentiles p;
  p.n = values.size();
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  const auto at = [&](double q) {
    return values[static_cast<std::size_t>(q * static_cast<double>(values.size() - 1))];
  };
  p.p50 = at(0.50);
  p.p95 = at(0.95);
  p.p99 = at(0.99);
  p.max = values.back();
  return p;
}

double mean(std::span<const double> values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (const double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double median(std::span<const double> values) {
  if (values.empty()) return 0;
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

std::string median_range(std::span<const double> values, std::string_view spec) {
  if (values.empty()) return "–";
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return fmt::format("{} ({}–{})", fmt::format(fmt::runtime(spec), median(values)),
                     fmt::format(fmt::runtime(spec), *lo), fmt::format(fmt::runtime(spec), *hi));
}

std::string thousands(double value) {
  const auto rounded = static_cast<long long>(std::llround(value));
  std::string digits = std::to_string(rounded < 0 ? -rounded : rounded);
  std::string out;
  const std::size_t lead = digits.size() % 3;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (i + 3 - lead) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return rounded < 0 ? "-" + out : out;
}

// --- ScopedSchema -----------------------------------------------------------------------

std::string unique_schema_name(std::string_view prefix) {
  static std::atomic<unsigned> counter{0};
  return fmt::format("bench_{}_{}_{}", prefix, static_cast<long>(::getpid()), counter.fetch_add(1));
}

bool optional_features_off() {
  static const bool off = [] {
    const char* v = std::getenv("AWA_BENCH_FEATURES");
    const std::string_view value = v == nullptr ? "on" : v;
    if (value != "on" && value != "off") {
      throw std::invalid_argument(
          fmt::format("AWA_BENCH_FEATURES must be 'on' or 'off', not '{}'", value));
    }
    return value == "off";
  }();
  return off;
}

void migrate_schema(pg::Connection& admin, const std::string& schema) {
  schema::Migrator(schema).migrate(admin);
  if (optional_features_off()) schema::install_without_optional_features(admin, schema);
}

ScopedSchema::ScopedSchema(pg::Connection& admin, std::string name)
    : admin_(admin), name_(std::move(name)), quoted_(admin.quote_identifier(name_)) {
  admin_.exec(fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0}", quoted_));
}

ScopedSchema::~ScopedSchema() {
  try {
    admin_.exec(fmt::format("DROP SCHEMA IF EXISTS {} CASCADE", quoted_));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: could not drop schema %s: %s\n", name_.c_str(), e.what());
  }
}

// --- run_fleet --------------------------------------------------------------------------

std::chrono::nanoseconds run_fleet(int workers, const std::function<void(int)>& prepare,
                                   const std::function<void(int)>& work, const FleetHooks& hooks) {
  const auto n = static_cast<std::size_t>(workers);
  std::latch ready(workers);
  std::latch go(1);
  std::atomic<bool> abort{false};
  std::vector<std::exception_ptr> errors(n);
  std::vector<Clock::time_point> finished(n);
  std::vector<std::jthread> threads;
  threads.reserve(n);
  for (int i = 0; i < workers; ++i) {
    threads.emplace_back([&, i] {
      const auto slot = static_cast<std::size_t>(i);
      try {
        prepare(i);
      } catch (...) {
        errors[slot] = std::current_exception();
      }
      ready.count_down();
      go.wait();
      if (!errors[slot] && !abort.load()) {
        try {
          work(i);
        } catch (...) {
          errors[slot] = std::current_exception();
        }
      }
      finished[slot] = Clock::now();
    });
  }
  ready.wait();
  // Each worker wrote its own slot before counting down `ready`, which orders the write
  // before this read.
  abort = std::any_of(errors.begin(), errors.end(), [](const auto& e) { return e != nullptr; });
  if (!abort && hooks.on_ready) hooks.on_ready();
  const auto released = Clock::now();
  go.count_down();
  if (!abort && hooks.on_release) hooks.on_release();
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  const auto last = *std::max_element(finished.begin(), finished.end());
  return std::chrono::duration_cast<std::chrono::nanoseconds>(last - released);
}

// --- MachineInfo ------------------------------------------------------------------------

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  if (!(in >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

MachineInfo machine_info(pg::Connection& conn) {
  MachineInfo m;
  m.nproc = std::thread::hardware_concurrency();
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemTotal:") {
      m.memory_bytes = kib * 1024;
      break;
    }
  }
  m.loadavg = loadavg();
  m.optional_features_off = optional_features_off();
  const auto server = conn.exec(kServerDescription);
  m.server_version = server.get<std::string>(0, 0);
  m.server_address = server.get<std::string>(0, 1);
  const auto settings = conn.query(kServerSettings, std::string(kReportedSettings));
  for (int r = 0; r < settings.rows(); ++r) {
    m.settings[settings.get<std::string>(r, 0)] = settings.get<std::string>(r, 1);
  }
  return m;
}

std::string MachineInfo::describe() const {
  std::string s = fmt::format("{} CPUs, {:.1f} GiB RAM, load average {} | PostgreSQL {} at {}",
                              nproc, static_cast<double>(memory_bytes) / (1024.0 * 1024 * 1024),
                              loadavg, server_version, server_address);
  std::string sep = " (";
  for (const auto& [k, v] : settings) {
    s += sep + k + "=" + v;
    sep = ", ";
  }
  if (!settings.empty()) s += ")";
  if (optional_features_off) s += " | optional features OFF (AWA_BENCH_FEATURES=off)";
  return s;
}

nlohmann::json MachineInfo::to_json() const {
  return {{"nproc", nproc},
          {"memory_bytes", memory_bytes},
          {"memory_gib", static_cast<double>(memory_bytes) / (1024.0 * 1024 * 1024)},
          {"loadavg_at_start", loadavg},
          {"postgresql_version", server_version},
          {"postgresql_address", server_address},
          {"postgresql_settings", settings},
          {"optional_features", optional_features_off ? "off" : "on"}};
}

// --- TablePrinter -----------------------------------------------------------------------

TablePrinter::TablePrinter(std::vector<Column> columns) : columns_(std::move(columns)) {}

void TablePrinter::add_row(std::vector<std::string> cells) {
  if (cells.size() != columns_.size()) {
    throw std::logic_error("TablePrinter: row width does not match the columns");
  }
  rows_.push_back(std::move(cells));
}

std::string TablePrinter::render() const {
  std::vector<std::size_t> width(columns_.size());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    width[c] = std::max<std::size_t>(columns_[c].header.size(), 3);
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const bool right = columns_[c].align == Align::kRight;
      s += right ? fmt::format(" {:>{}} |", cells[c], width[c])
                 : fmt::format(" {:<{}} |", cells[c], width[c]);
    }
    return s + "\n";
  };
  std::vector<std::string> headers;
  for (const auto& col : columns_) headers.push_back(col.header);
  std::string out = line(headers);
  out += "|";
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    const bool right = columns_[c].align == Align::kRight;
    out += " " + std::string(width[c] - (right ? 1 : 0), '-') + (right ? ":" : "") + " |";
  }
  out += "\n";
  for (const auto& row : rows_) out += line(row);
  return out;
}

// --- WaitProfile ------------------------------------------------------------------------

void WaitProfile::merge(const WaitProfile& other) {
  for (const auto& [k, v] : other.counts) counts[k] += v;
  samples += other.samples;
  polls += other.polls;
}

std::vector<WaitProfile::Entry> WaitProfile::top(std::size_t limit) const {
  std::vector<std::pair<std::pair<std::string, std::string>, std::uint64_t>> sorted(counts.begin(),
                                                                                    counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<Entry> out;
  for (const auto& [k, v] : sorted) {
    if (out.size() == limit) break;
    out.push_back(
        Entry{k.first, k.second,
              samples == 0 ? 0.0 : 100.0 * static_cast<double>(v) / static_cast<double>(samples)});
  }
  return out;
}

nlohmann::json WaitProfile::to_json(std::size_t limit) const {
  nlohmann::json waits = nlohmann::json::array();
  for (const auto& e : top(limit)) {
    waits.push_back({{"wait_event_type", e.type}, {"wait_event", e.event}, {"percent", e.percent}});
  }
  return {{"samples", samples}, {"polls", polls}, {"top", waits}};
}

std::string WaitProfile::render(std::size_t limit) const {
  TablePrinter t({{"wait type"}, {"wait event"}, {"% of samples", TablePrinter::Align::kRight}});
  for (const auto& e : top(limit)) {
    t.add_row({e.type, e.event, fmt::format("{:.1f}%", e.percent)});
  }
  return t.render();
}

// --- WaitSampler ------------------------------------------------------------------------

WaitSampler::WaitSampler(pg::Connection& conn, std::vector<int> pids,
                         std::chrono::milliseconds interval)
    : conn_(conn), interval_(interval), pids_(pids.begin(), pids.end()) {}

WaitSampler::~WaitSampler() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

void WaitSampler::start() {
  thread_ = std::jthread([this](const std::stop_token& stop) { loop(stop); });
}

WaitProfile WaitSampler::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  if (error_) std::rethrow_exception(error_);
  return profile_;
}

void WaitSampler::watch(int pid) {
  std::lock_guard lock(mu_);
  pids_.insert(pid);
}

void WaitSampler::retire(int pid) {
  std::lock_guard lock(mu_);
  pids_.erase(pid);
}

std::string WaitSampler::pid_array() const {
  std::lock_guard lock(mu_);
  std::string s = "{";
  for (const int pid : pids_) {
    if (s.size() > 1) s += ',';
    s += std::to_string(pid);
  }
  return s + "}";
}

void WaitSampler::loop(const std::stop_token& stop) {
  auto next = Clock::now();
  try {
    while (!stop.stop_requested()) {
      const std::string pids = pid_array();
      if (pids == "{}") break;
      const auto res = conn_.exec_cached(kSampleWaits, pg::make_params(pids));
      ++profile_.polls;
      for (int r = 0; r < res.rows(); ++r) {
        const auto type = res.get<std::string_view>(r, 0);
        const auto event = res.get<std::string_view>(r, 1);
        const auto state = res.get<std::string_view>(r, 2);
        std::pair<std::string, std::string> key;
        if (state == "idle") {
          key = {"Client", "ClientRead (idle in client)"};
        } else if (type.empty()) {
          key = {"CPU", "running"};
        } else if (state == "idle in transaction") {
          key = {std::string(type), std::string(event) + " (idle in transaction)"};
        } else {
          key = {std::string(type), std::string(event)};
        }
        ++profile_.counts[key];
        ++profile_.samples;
      }
      next += interval_;
      const auto now = Clock::now();
      if (next < now) next = now;  // fell behind: do not burst to catch up
      std::this_thread::sleep_until(next);
    }
  } catch (...) {
    error_ = std::current_exception();
  }
}

void write_json(const std::string& path, const nlohmann::json& doc) {
  std::ofstream out(path);
  out << doc.dump(2) << "\n";
  out.close();
  if (!out) throw std::runtime_error("could not write " + path);
}

std::optional<Clock::time_point> wait_until_due(Clock::time_point t0, std::int64_t seq, int rate,
                                                Clock::time_point give_up,
                                                std::chrono::nanoseconds& max_late) {
  const auto due = t0 + std::chrono::nanoseconds(seq * 1'000'000'000LL / rate);
  const auto now = Clock::now();
  if (now > give_up) return std::nullopt;
  if (now < due) {
    std::this_thread::sleep_until(due);
  } else {
    max_late = std::max(max_late, std::chrono::duration_cast<std::chrono::nanoseconds>(now - due));
  }
  return due;
}

nlohmann::json client_stats_json(const ClientStats& stats) {
  return {{"claimed", stats.claimed},
          {"completed", stats.completed},
          {"retried", stats.retried},
          {"failed", stats.failed},
          {"snoozed", stats.snoozed},
          {"cancelled", stats.cancelled},
          {"stale_completions", stats.stale_completions},
          {"rescued", stats.rescued},
          {"promoted", stats.promoted},
          {"rotations", stats.rotations},
          {"prunes", stats.prunes},
          {"released", stats.released},
          {"waiting", stats.waiting}};
}

}  // namespace awa::bench
