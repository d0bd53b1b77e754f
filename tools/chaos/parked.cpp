#include "parked.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "pg/native.hpp"
#include "sql_files.hpp"

namespace chaos {
namespace {

using Clock = std::chrono::steady_clock;
// Far beyond any run: a parked attempt must end by its callback, never by its timeout.
constexpr std::int64_t kParkTimeoutMs = 3'600'000;

}  // namespace

ParkedCallbacks::ParkedCallbacks(ParkedOptions options) : options_(std::move(options)) {}

ParkedCallbacks::~ParkedCallbacks() { stop(); }

void ParkedCallbacks::note_error(const std::exception& e) {
  if (caused_by_fault(e)) return;
  ++stats_.errors;
  if (stats_.messages.size() < 10) stats_.messages.push_back(fmt::format("parked: {}", e.what()));
}

void ParkedCallbacks::enqueue(awa::Connection& conn, int n) {
  std::vector<awa::NewJob> jobs;
  std::vector<ProducedJob> meta;
  for (int i = 0; i < n; ++i) {
    ProducedJob pj;
    pj.producer = options_.producer_index;
    pj.seq = ++seq_;
    pj.marker = fmt::format("park-{}", pj.seq);
    pj.kind = "park";
    awa::InsertOpts opts;
    opts.queue = options_.queue;
    opts.max_attempts = 5;
    jobs.emplace_back("park", nlohmann::json{{"m", pj.marker}, {"timeout_ms", kParkTimeoutMs}},
                      opts);
    meta.push_back(std::move(pj));
  }
  awa::QueueStorage store;
  bool committing = false;
  try {
    awa::Transaction tx(conn);
    const auto ids = store.insert_many(conn, std::span<const awa::NewJob>(jobs));
    for (std::size_t i = 0; i < ids.size(); ++i) meta[i].job_id = ids[i];
    committing = true;
    tx.commit();
    stats_.enqueued += n;
  } catch (const std::exception&) {
    if (!committing) throw;
    // The COMMIT may have been applied: the ledger resolves these by marker.
    for (auto& m : meta) m.commit = CommitState::kUnknown;
    for (auto& m : meta) jobs_.push_back(std::move(m));
    throw;
  }
  for (auto& m : meta) jobs_.push_back(std::move(m));
}

int ParkedCallbacks::resolve(awa::Connection& conn, int n) {
  const auto ids = awa::pg::native(conn).query(sql::file("parked/waiting_callbacks.sql"),
                                               options_.queue, static_cast<std::int64_t>(n));
  const awa::Admin admin;
  for (int r = 0; r < ids.rows(); ++r) {
    const auto res = admin.complete_external(conn, ids.get<std::string>(r, 0),
                                             std::string(R"({"resolved_by":"chaos"})"));
    if (res.stale())
      ++stats_.stale;
    else
      ++stats_.resolved;
  }
  return ids.rows();
}

std::int64_t ParkedCallbacks::waiting(awa::Connection& conn) const {
  return awa::pg::native(conn)
      .query(sql::file("parked/count_waiting.sql"), options_.queue)
      .get<std::int64_t>(0, 0);
}

void ParkedCallbacks::start() {
  if (options_.count <= 0) return;
  auto conn = awa::Connection::connect(options_.url, std::chrono::seconds(5));
  // In chunks: one transaction of 1,000 rows is fine, but keep each call modest.
  for (int left = options_.count; left > 0; left -= 250) enqueue(conn, std::min(left, 250));
  thread_ = std::thread([this] { run(); });
}

bool ParkedCallbacks::wait_parked(std::chrono::seconds timeout) {
  if (options_.count <= 0) return true;
  const auto until = Clock::now() + timeout;
  auto conn = awa::Connection::connect(options_.url, std::chrono::seconds(5));
  while (Clock::now() < until) {
    if (waiting(conn) >= options_.count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

void ParkedCallbacks::run() {
  std::optional<awa::Connection> conn;
  auto backoff = std::chrono::milliseconds(50);
  const int per_turn = std::max(1, options_.turnover_per_s / 4);
  while (!stop_.load()) {
    try {
      if (!conn) conn.emplace(awa::Connection::connect(options_.url, std::chrono::seconds(2)));
      stats_.max_waiting = std::max(stats_.max_waiting, waiting(*conn));
      const int done = resolve(*conn, per_turn);
      if (done > 0) enqueue(*conn, done);
      backoff = std::chrono::milliseconds(50);
      nap(stop_, std::chrono::milliseconds(250));
    } catch (const std::exception& e) {
      note_error(e);
      conn.reset();
      nap(stop_, backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
  }
}

void ParkedCallbacks::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void ParkedCallbacks::answer_waiting() {
  if (options_.count <= 0) return;
  try {
    if (!drain_conn_)
      drain_conn_.emplace(awa::Connection::connect(options_.url, std::chrono::seconds(2)));
    // Jobs not parked yet (queued, or retried after a rescue) park later: the drain loop
    // calls this until the queue is empty.
    while (resolve(*drain_conn_, 500) == 500) {
    }
  } catch (const std::exception& e) {
    note_error(e);
    drain_conn_.reset();
  }
}

}  // namespace chaos
