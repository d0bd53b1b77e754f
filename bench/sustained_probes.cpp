#include "sustained_probes.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

namespace awa::bench::sustained {
namespace {

using std::chrono::duration;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

constexpr auto kWatchInterval = milliseconds(1);

// The benchmark's own SQL: diagnostics of the run, not part of awa.
constexpr std::string_view kMark =
    "SELECT split_part(virtualtransaction, '/', 2)::bigint, pg_stat_force_next_flush() "
    "FROM pg_locks WHERE locktype = 'virtualxid' AND pid = pg_backend_pid()";
constexpr std::string_view kDbCounters =
    "SELECT d.xact_commit, d.xact_rollback, split_part(l.virtualtransaction, '/', 2)::bigint "
    "FROM pg_stat_database d, pg_locks l WHERE d.datname = current_database() "
    "AND l.locktype = 'virtualxid' AND l.pid = pg_backend_pid()";
constexpr std::string_view kAutovacuumRuns =
    "SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0)::bigint "
    "FROM pg_stat_user_tables WHERE schemaname = $1";
// {0}: the schema. $1 queue, $2 the benchmark's application_name pattern.
constexpr std::string_view kDepthAndOthers =
    "SELECT (SELECT coalesce(sum(available), 0)::bigint FROM {0}.queue_shard_lag($1)), "
    "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
    "AND pid <> pg_backend_pid() AND state <> 'idle' "
    "AND coalesce(application_name, '') NOT LIKE $2)";
// Per table, partitions summed into their parent. $1 the schema's name.
constexpr std::string_view kDeadTuples =
    "SELECT root.relname::text, coalesce(sum(s.n_dead_tup), 0)::bigint "
    "FROM pg_stat_user_tables s JOIN pg_class root "
    "ON root.oid = coalesce(pg_partition_root(s.relid::regclass), s.relid::regclass)::oid "
    "WHERE s.schemaname = $1 GROUP BY root.relname";

std::string percent_encode(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if ((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || ch == '-' ||
        ch == '_' || ch == '.') {
      out.push_back(ch);
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned>(u));
    }
  }
  return out;
}

}  // namespace

std::int64_t mark(pg::Connection& c) {
  const auto res = c.exec(kMark);
  if (res.rows() != 1) throw std::runtime_error("a session shows no virtualxid in pg_locks");
  return res.get<std::int64_t>(0, 0);
}

DbCounters read_db(pg::Connection& c) {
  const auto res = c.exec(kDbCounters);
  if (res.rows() != 1) throw std::runtime_error("pg_stat_database: no row for this database");
  return {res.get<std::int64_t>(0, 0), res.get<std::int64_t>(0, 1), res.get<std::int64_t>(0, 2)};
}

std::int64_t autovacuum_runs(pg::Connection& c, const std::string& schema) {
  return c.query(kAutovacuumRuns, schema).get<std::int64_t>(0, 0);
}

std::string client_url() {
  std::string url = database_url();
  if (url.find("options=") != std::string::npos) {
    throw std::runtime_error(
        "DATABASE_URL already sets options=; sustained sets statement_timeout and "
        "synchronous_commit for the Client's sessions through it");
  }
  const std::string options =
      fmt::format("-c statement_timeout={}s -c synchronous_commit=on", kStatementTimeout.count());
  if (url.starts_with("postgres://") || url.starts_with("postgresql://")) {
    url += url.find('?') == std::string::npos ? '?' : '&';
    url += "options=" + percent_encode(options);
  } else {
    url += " options='" + options + "'";
  }
  return url;
}

pg::Connection open_session(std::string_view role) {
  auto c = connect(fmt::format("{}_{}", kAppPrefix, role), kStatementTimeout);
  c.exec("SET synchronous_commit = on");
  return c;
}

// --- CompletionWatcher ------------------------------------------------------------------

std::vector<CompletionWatcher::Point> CompletionWatcher::stop() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  return points_;
}

void CompletionWatcher::poll() {
  const auto c = client_.stats().completed - completed0_;
  if (points_.empty() || points_.back().second != c) {
    points_.emplace_back(std::chrono::duration_cast<nanoseconds>(Clock::now() - base_).count(), c);
  }
}

void CompletionWatcher::loop(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    poll();
    std::this_thread::sleep_for(kWatchInterval);
  }
  poll();  // the last word, after the caller saw the drain end
}

std::uint64_t completed_at(const std::vector<CompletionWatcher::Point>& points, std::int64_t t_ns) {
  const auto it = std::upper_bound(points.begin(), points.end(), t_ns,
                                   [](std::int64_t t, const auto& p) { return t < p.first; });
  return it == points.begin() ? 0 : std::prev(it)->second;
}

// --- Sampler ----------------------------------------------------------------------------

Sampler::Sampler(pg::Connection& conn, const Client& client, const ScopedSchema& schema,
                 Clock::time_point t0, std::uint64_t completed0)
    : conn_(conn),
      client_(client),
      schema_(schema.name()),
      depth_sql_(fmt::format(kDepthAndOthers, schema.quoted())),
      t0_(t0),
      completed0_(completed0),
      thread_([this](const std::stop_token& stop) { loop(stop); }) {}

void Sampler::prime(pg::Connection& conn, const ScopedSchema& schema) {
  conn.query(fmt::format(kDepthAndOthers, schema.quoted()), std::string(kQueue),
             std::string(kAppPrefix) + "%");
  conn.query(kDeadTuples, schema.name());
}

std::vector<SustainedSample> Sampler::stop() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
  return samples_;
}

void Sampler::take(int tick) {
  SustainedSample s;
  const auto st = client_.stats();
  s.completed = st.completed - completed0_;
  s.in_flight = static_cast<std::int64_t>(st.prefetched) + st.running;
  const auto d = conn_.query(depth_sql_, std::string(kQueue), std::string(kAppPrefix) + "%");
  s.depth = d.get<std::int64_t>(0, 0);
  s.other_active = d.get<std::int64_t>(0, 1);
  if (tick % kDeadEvery == 0) {
    const auto res = conn_.query(kDeadTuples, schema_);
    std::int64_t sum = 0;
    for (int i = 0; i < res.rows(); ++i) {
      const auto n = res.get<std::int64_t>(i, 1);
      sum += n;
      if (n > s.most_dead) {
        s.most_dead = n;
        s.most_dead_table = res.get<std::string>(i, 0);
      }
    }
    s.dead = sum;
  }
  s.t_s = duration<double>(Clock::now() - t0_).count();
  samples_.push_back(std::move(s));
}

void Sampler::loop(const std::stop_token& stop) {
  try {
    auto next = t0_;
    for (int tick = 0; !stop.stop_requested(); ++tick) {
      take(tick);
      next += kSampleInterval;
      while (next < Clock::now()) {
        next += kSampleInterval;
        ++tick;
      }
      while (!stop.stop_requested() && Clock::now() < next) {
        std::this_thread::sleep_for(std::min<nanoseconds>(next - Clock::now(), milliseconds(20)));
      }
    }
  } catch (...) {
    error_ = std::current_exception();
  }
}

}  // namespace awa::bench::sustained
