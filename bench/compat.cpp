// scripts/bench compat: the SQL enqueue that services in other languages use,
// insert_job_compat, called once per transaction, against a plain single-row INSERT of the
// same row on the same server in the same run (what pgbench -M prepared would measure).
//
// Cells, per run and per client count: "plain" (one INSERT of the row's columns into a
// table with only a bigserial primary key, one statement and transaction per row) and
// "compat" (SELECT id FROM insert_job_compat(kind, queue, args) per transaction: the row
// is staged and placed in its lane at commit, routed by the rotor over the queue's
// enqueue_shards). Each client has its own connection and sends --jobs-per-client rows
// back to back, durable (synchronous_commit = on). Measured: rows/s over the wall time
// from the release of the clients to the last commit, and WAL bytes per row over the same
// window. Each cell gets a fresh schema; a CHECKPOINT precedes it; after it, the rows are
// counted (compat: in ready_entries, on how many shards) and a mismatch ends the run.
// Cells are interleaved across runs; medians and min-max are reported, ratios within runs.
#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "pg/connection.hpp"

namespace awa::bench {
namespace {

constexpr auto kStatementTimeout = std::chrono::seconds(120);
constexpr std::string_view kQueue = "compat";

struct Options {
  std::vector<int> clients{4, 16};
  int shards = 4;
  int jobs_per_client = 500;
  int runs = 5;
  int args_bytes = 100;
  std::string json_path;
};

enum class Mode { kPlain, kCompat };
const char* mode_name(Mode m) { return m == Mode::kPlain ? "plain" : "compat"; }

struct Sample {
  double rows_per_s = 0;
  double wal_bytes_per_row = 0;
};

// {"seq":N,"pad":"x…"} of about `bytes` characters.
std::string args_of(int seq, int bytes) {
  std::string out = fmt::format("{{\"seq\":{},\"pad\":\"", seq);
  const int pad = std::max(0, bytes - static_cast<int>(out.size()) - 2);
  out.append(static_cast<std::size_t>(pad), 'x');
  out += "\"}";
  return out;
}

Sample run_cell(pg::Connection& admin, const Options& o, Mode mode, int clients) {
  ScopedSchema schema(admin, unique_schema_name("compat"));
  std::string sql;
  if (mode == Mode::kPlain) {
    admin.exec(fmt::format(
        "CREATE TABLE {}.plain_jobs (id bigserial PRIMARY KEY, queue text NOT NULL, priority "
        "smallint NOT NULL, kind text NOT NULL, args jsonb NOT NULL, max_attempts smallint NOT "
        "NULL, run_at timestamptz NOT NULL, created_at timestamptz NOT NULL)",
        schema.quoted()));
    sql = fmt::format(
        "INSERT INTO {}.plain_jobs (queue, priority, kind, args, max_attempts, run_at, "
        "created_at) VALUES ($2, 2, $1, $3::jsonb, 25, now(), now())",
        schema.quoted());
  } else {
    migrate_schema(admin, schema.name());
    admin.exec(fmt::format("INSERT INTO {}.queue_meta (queue, enqueue_shards) VALUES ('{}', {})",
                           schema.quoted(), kQueue, o.shards));
    sql = fmt::format("SELECT id FROM {}.insert_job_compat($1, $2, $3::jsonb)", schema.quoted());
  }

  std::vector<std::optional<pg::Connection>> conns(static_cast<std::size_t>(clients));
  const auto send = [&](pg::Connection& c, int seq) {
    c.exec_cached(sql, pg::make_params("bench", kQueue, args_of(seq, o.args_bytes)));
  };
  const auto prepare = [&](int i) {
    auto& c =
        conns[static_cast<std::size_t>(i)].emplace(connect("awa_bench_compat", kStatementTimeout));
    c.exec("SET synchronous_commit = on");
    send(c, -1 - i);  // prepares the statement (and, for compat, its plans): not timed
  };
  const auto work = [&](int i) {
    auto& c = *conns[static_cast<std::size_t>(i)];
    for (int n = 0; n < o.jobs_per_client; ++n) send(c, i * o.jobs_per_client + n);
  };
  std::int64_t wal0 = 0;
  FleetHooks hooks;
  hooks.on_ready = [&] { wal0 = wal_position(admin); };
  const auto elapsed = run_fleet(clients, prepare, work, hooks);
  const std::int64_t wal1 = wal_position(admin);
  conns.clear();

  const std::int64_t timed = static_cast<std::int64_t>(clients) * o.jobs_per_client;
  const std::int64_t expected = timed + clients;
  if (mode == Mode::kPlain) {
    const auto n = admin.exec(fmt::format("SELECT count(*) FROM {}.plain_jobs", schema.quoted()))
                       .get<std::int64_t>(0, 0);
    if (n != expected)
      throw std::runtime_error(fmt::format("plain: {} rows, expected {}", n, expected));
  } else {
    const auto res = admin.exec(
        fmt::format("SELECT count(*), count(DISTINCT enqueue_shard) FROM {0}.ready_entries "
                    "WHERE queue_id = {0}.queue_id_of('{1}')",
                    schema.quoted(), kQueue));
    const auto n = res.get<std::int64_t>(0, 0);
    const auto shards = res.get<std::int64_t>(0, 1);
    if (n != expected || shards != std::min<std::int64_t>(o.shards, expected)) {
      throw std::runtime_error(fmt::format("compat: {} rows on {} shards, expected {} on {}", n,
                                           shards, expected, o.shards));
    }
  }
  Sample s;
  const double seconds = std::chrono::duration<double>(elapsed).count();
  s.rows_per_s = static_cast<double>(timed) / seconds;
  s.wal_bytes_per_row = static_cast<double>(wal1 - wal0) / static_cast<double>(timed);
  return s;
}

int run(const Options& o) {
  auto admin = connect("awa_bench_admin", kStatementTimeout);
  const auto machine = machine_info(admin);
  fmt::print(
      "compat: insert_job_compat once per transaction vs a plain single-row INSERT; "
      "clients {}, S={}, {} rows per client, {} runs\n{}\n",
      fmt::join(o.clients, ","), o.shards, o.jobs_per_client, o.runs, machine.describe());

  // [clients][mode] -> per run
  std::map<int, std::map<Mode, std::vector<Sample>>> samples;
  for (int r = 0; r < o.runs; ++r) {
    for (const int c : o.clients) {
      for (const Mode m : {Mode::kPlain, Mode::kCompat}) {
        admin.exec("CHECKPOINT");
        const Sample s = run_cell(admin, o, m, c);
        samples[c][m].push_back(s);
        fmt::print("run {}: {} clients {}: {} rows/s, {:.0f} B WAL/row\n", r + 1, c, mode_name(m),
                   thousands(s.rows_per_s), s.wal_bytes_per_row);
      }
    }
  }

  TablePrinter table({{"clients", TablePrinter::Align::kRight},
                      {"plain rows/s", TablePrinter::Align::kRight},
                      {"compat rows/s", TablePrinter::Align::kRight},
                      {"compat / plain", TablePrinter::Align::kRight},
                      {"plain WAL B/row", TablePrinter::Align::kRight},
                      {"compat WAL B/row", TablePrinter::Align::kRight}});
  nlohmann::json results = nlohmann::json::array();
  for (const int c : o.clients) {
    const auto& plain = samples[c][Mode::kPlain];
    const auto& compat = samples[c][Mode::kCompat];
    std::vector<double> pr, cr, ratio, pw, cw;
    for (std::size_t r = 0; r < plain.size(); ++r) {
      pr.push_back(plain[r].rows_per_s);
      cr.push_back(compat[r].rows_per_s);
      ratio.push_back(compat[r].rows_per_s / plain[r].rows_per_s);
      pw.push_back(plain[r].wal_bytes_per_row);
      cw.push_back(compat[r].wal_bytes_per_row);
    }
    table.add_row({std::to_string(c), median_range(pr, "{:.0f}"), median_range(cr, "{:.0f}"),
                   median_range(ratio, "{:.2f}"), fmt::format("{:.0f}", median(pw)),
                   fmt::format("{:.0f}", median(cw))});
    results.push_back({{"clients", c},
                       {"plain_rows_per_s", pr},
                       {"compat_rows_per_s", cr},
                       {"compat_vs_plain", ratio},
                       {"compat_vs_plain_median", median(ratio)},
                       {"plain_wal_bytes_per_row", pw},
                       {"compat_wal_bytes_per_row", cw}});
  }
  fmt::print("\nmedian (min–max) of {} runs; ratios within each run\n\n{}", o.runs, table.render());
  for (const auto& r : results) {
    const double m = r["compat_vs_plain_median"].get<double>();
    fmt::print("target compat >= 0.60 x plain at {} clients: {:.2f} ({})\n",
               r["clients"].get<int>(), m, m >= 0.6 ? "met" : "NOT met");
  }
  if (!o.json_path.empty()) {
    write_json(o.json_path, {{"benchmark", "compat"},
                             {"machine", machine.to_json()},
                             {"shards", o.shards},
                             {"jobs_per_client", o.jobs_per_client},
                             {"args_bytes", o.args_bytes},
                             {"runs", o.runs},
                             {"results", results}});
  }
  return 0;
}

}  // namespace
}  // namespace awa::bench

int main(int argc, char** argv) {
  awa::bench::Options o;
  std::string clients = "4,16";
  CLI::App app{"compat: insert_job_compat once per transaction vs a plain single-row INSERT"};
  app.add_option("--clients", clients, "client counts, comma-separated")->capture_default_str();
  app.add_option("--shards", o.shards, "the queue's enqueue_shards")->capture_default_str();
  app.add_option("--jobs-per-client", o.jobs_per_client, "rows each client sends per cell")
      ->capture_default_str();
  app.add_option("--runs", o.runs, "runs (cells interleaved)")->capture_default_str();
  app.add_option("--args-bytes", o.args_bytes, "size of each row's args JSON")
      ->capture_default_str();
  app.add_option("--json", o.json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  try {
    o.clients = awa::bench::parse_int_list(clients, "--clients");
    if (o.shards < 1 || o.jobs_per_client < 1 || o.runs < 1)
      throw std::invalid_argument("--shards, --jobs-per-client and --runs must be >= 1");
    return awa::bench::run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "compat: {}\n", e.what());
    return 1;
  }
}
