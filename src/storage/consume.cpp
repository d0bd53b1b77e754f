#include "storage/consume.hpp"

#include <algorithm>
#include <map>
#include <random>

#include <fmt/format.h>

#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/attempt_values.hpp"
#include "storage/follow_ups.hpp"
#include "storage/pg_array.hpp"
#include "storage/stored_json.hpp"
#include "storage/utf8.hpp"
#include "storage/validate.hpp"

namespace awa {

const char* to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::kCompleted:
      return "completed";
    case Outcome::kRetry:
      return "retry";
    case Outcome::kFail:
      return "fail";
    case Outcome::kSnooze:
      return "snooze";
    case Outcome::kCancel:
      return "cancel";
    case Outcome::kWaitForCallback:
      return "wait_for_callback";
  }
  return "unknown";
}

Completion Completion::of(const ClaimedEntry& e, Outcome outcome, std::string error,
                          std::chrono::milliseconds delay) {
  Completion c;
  c.job_id = e.job_id;
  c.run_lease = e.run_lease;
  c.claim_slot = e.claim_slot;
  c.claim_batch = e.claim_batch;
  c.ready_slot = e.ready_slot;
  c.queue = e.queue;
  c.priority = e.priority;
  c.enqueue_shard = e.enqueue_shard;
  c.lane_seq = e.lane_seq;
  c.attempt = e.attempt;
  c.max_attempts = e.max_attempts;
  c.outcome = outcome;
  c.error = std::move(error);
  c.delay = delay;
  return c;
}

namespace storage {
namespace {

constexpr auto kMaxBackoff = std::chrono::hours(24);
constexpr auto kDefaultSnooze = std::chrono::seconds(1);
std::vector<std::string> parse_text_array(std::string_view text) {
  // Tags come back as a text[] literal; elements are quoted when they need it.
  std::vector<std::string> out;
  if (text.size() < 2) return out;
  std::size_t i = 1;
  while (i < text.size() - 1) {
    std::string item;
    if (text[i] == '"') {
      ++i;
      while (i < text.size() && text[i] != '"') {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        item.push_back(text[i++]);
      }
      ++i;  // closing quote
    } else {
      while (i < text.size() - 1 && text[i] != ',') item.push_back(text[i++]);
    }
    out.push_back(std::move(item));
    if (i < text.size() - 1 && text[i] == ',') ++i;
  }
  return out;
}

}  // namespace

std::chrono::milliseconds retry_backoff(int attempt, std::uint64_t random) {
  const int exp = std::clamp(attempt - 1, 0, 20);  // 2^20 s > 24 h already
  const auto base =
      std::min<std::chrono::milliseconds>(std::chrono::milliseconds(1000LL << exp), kMaxBackoff);
  const double factor = 0.5 + 0.5 * static_cast<double>(random % 1000001) / 1000000.0;
  return std::chrono::milliseconds(
      static_cast<std::int64_t>(static_cast<double>(base.count()) * factor));
}

Consumer::Consumer(const std::string& quoted_schema, metrics::EngineMetrics& metrics)
    : metrics_(metrics),
      claim_sql_(sql::render(sql::file("queries/consume/claim.sql"), quoted_schema)),
      complete_sql_(sql::render(sql::file("queries/consume/complete.sql"), quoted_schema)),
      complete_results_sql_(
          sql::render(sql::file("queries/consume/complete_results.sql"), quoted_schema)),
      complete_follow_ups_sql_(
          sql::render(sql::file("queries/consume/complete_follow_ups.sql"), quoted_schema)),
      finalize_sql_(sql::render(sql::file("queries/consume/finalize.sql"), quoted_schema)),
      promote_sql_(sql::render(sql::file("queries/consume/promote.sql"), quoted_schema)),
      release_sql_(sql::render(sql::file("queries/consume/release.sql"), quoted_schema)),
      heartbeat_sql_(sql::render(sql::file("queries/consume/heartbeat.sql"), quoted_schema)),
      rescue_sql_(sql::render(sql::file("queries/consume/rescue.sql"), quoted_schema)),
      callback_sql_(sql::render(sql::file("queries/consume/callback.sql"), quoted_schema)) {}

std::vector<ClaimedEntry> Consumer::claim(pg::Connection& conn, const std::string& queue,
                                          const QueueStorage::ClaimOptions& options) const {
  validate_queue_name(queue);
  if (options.max_batch < 1) throw InvalidArgument("claim: max_batch must be at least 1");
  pg::Params params;
  params.add(queue).add(static_cast<std::int64_t>(options.max_batch));
  if (options.deadline) {
    params.add(interval(*options.deadline));
  } else {
    params.null();
  }
  if (options.aging) {
    params.add(interval(*options.aging));
  } else {
    params.null();
  }
  const auto started = std::chrono::steady_clock::now();
  const auto res = conn.exec_cached(claim_sql_, params, pg::Format::kBinary);
  std::vector<ClaimedEntry> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    ClaimedEntry e;
    e.job_id = res.get<std::int64_t>(r, 0);
    e.run_lease = res.get<std::int64_t>(r, 1);
    e.attempt = res.get<int>(r, 2);
    e.enqueue_shard = res.get<int>(r, 3);
    e.ready_slot = res.get<int>(r, 4);
    e.lane_seq = res.get<std::int64_t>(r, 5);
    e.claim_slot = res.get<int>(r, 6);
    e.claim_batch = res.get<std::int64_t>(r, 7);
    e.queue = queue;
    e.priority = res.get<int>(r, 8);
    e.effective_priority = res.get<int>(r, 9);
    e.kind = res.get<std::string>(r, 10);
    // The claim has committed: nothing below may throw for one row's values, or every
    // row of the batch would be left running until rescue (issue 31). JSON that does not
    // decode is kept as text, with the reason (ClaimedEntry::metadata_error).
    e.args_json = res.get<std::string>(r, 11);
    if (!res.is_null(r, 12)) {
      e.metadata_json = res.text(r, 12);
      if (auto why = decode_stored_json(e.metadata_json, e.metadata); !why.empty()) {
        e.metadata_error = "metadata could not be decoded: " + why +
                           "; JobContext::metadata_json() has the stored text";
      }
    }
    if (!res.is_null(r, 13)) e.tags = parse_text_array(res.text(r, 13));
    e.max_attempts = res.get<int>(r, 14);
    if (!res.is_null(r, 15)) e.ordering_key = res.get<pg::Bytea>(r, 15).bytes;
    // Built by the server from stored error texts; should it ever not decode, it is only
    // history: null.
    if (!res.is_null(r, 16)) decode_stored_json(res.text(r, 16), e.errors);
    e.run_at = res.get<std::chrono::system_clock::time_point>(r, 17);
    e.created_at = res.get<std::chrono::system_clock::time_point>(r, 18);
    e.claimed_at = res.get<std::chrono::system_clock::time_point>(r, 19);
    e.deadline_at = res.get_opt<std::chrono::system_clock::time_point>(r, 20);
    out.push_back(std::move(e));
  }
  // awa_job_claimed_total{queue, awa_enqueue_shard}: AWA's ADR-025 awa.job.claimed with its
  // shard attribute. A claim reads one lane, so this is one series lookup per call, not per row.
  auto& m = metrics_;
  m.claim_duration_seconds.with({queue}).observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  std::vector<std::pair<int, std::uint64_t>> per_shard;
  for (const auto& e : out) {
    if (per_shard.empty() || per_shard.back().first != e.enqueue_shard) {
      per_shard.emplace_back(e.enqueue_shard, 0);
    }
    ++per_shard.back().second;
  }
  for (const auto& [shard, n] : per_shard) {
    m.job_claimed.with({queue, std::to_string(shard)}).inc(n);
  }
  return out;
}

void Consumer::finalize_in(pg::Connection& conn, const ClaimedEntry& entry,
                           const std::optional<std::string>& result_json) const {
  if (!conn.in_transaction()) {
    throw InvalidArgument(
        fmt::format("job {}: finalize_in needs the caller's open transaction (BEGIN, the writes, "
                    "finalize_in, COMMIT); outside one it would be a plain completion",
                    entry.job_id));
  }
  if (result_json) {
    validate_json_text(fmt::format("job {}'s result", entry.job_id), *result_json, kMaxArgsBytes);
  }
  pg::Params params;
  params.add(entry.claim_batch).add(entry.lane_seq).add(result_json);
  // Not counted in awa_job_completed_total here: whether it completes is the caller's
  // commit (the runtime counts a handler that returns completed() after it).
  conn.exec_cached(finalize_sql_, params);
}

std::vector<CompletionResult> Consumer::complete(pg::Connection& conn,
                                                 std::span<const Completion> completions) const {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::vector<CompletionResult> results;
  results.reserve(completions.size());
  if (completions.empty()) return results;
  const auto started = std::chrono::steady_clock::now();
  ArrayLiteral batch, lane_seq, outcome, error, delay, result, follow_ups;
  // The results and follow-ups arrays are built only for a batch that has one (plain
  // batches pay nothing).
  const bool any_result =
      std::any_of(completions.begin(), completions.end(),
                  [](const Completion& c) { return c.result_json.has_value(); });
  const bool any_follow_up = std::any_of(completions.begin(), completions.end(),
                                         [](const Completion& c) { return !c.follow_ups.empty(); });
  for (const auto& c : completions) {
    if (c.outcome == Outcome::kWaitForCallback)
      throw InvalidArgument(fmt::format(
          "job {}: waiting for a callback is not a completion (QueueStorage::wait_for_callback)",
          c.job_id));
    if (c.result_json) {
      if (c.outcome != Outcome::kCompleted) {
        throw InvalidArgument(fmt::format("job {}: only a completed job has a result (outcome {})",
                                          c.job_id, to_string(c.outcome)));
      }
      validate_json_text(fmt::format("job {}'s result", c.job_id), *c.result_json, kMaxArgsBytes);
      result.add(*c.result_json);
    } else if (any_result) {
      result.add_null();
    }
    if (!c.follow_ups.empty()) {
      // Checked here too: one bad follow-up would fail every completion of the flush.
      for (const auto& f : c.follow_ups) validate_follow_up(f);
      follow_ups.add(follow_ups_json(c.follow_ups));
    } else if (any_follow_up) {
      follow_ups.add_null();
    }
    batch.add(c.claim_batch);
    lane_seq.add(c.lane_seq);
    outcome.add(to_string(c.outcome));
    if (c.error.empty()) {
      error.add_null();
    } else {
      error.add(storable_text(c.error, kMaxErrorBytes));
    }
    if (c.outcome == Outcome::kRetry || c.outcome == Outcome::kSnooze) {
      auto d = c.delay;
      if (d.count() < 0) {
        d = c.outcome == Outcome::kRetry ? retry_backoff(c.attempt, rng())
                                         : std::chrono::milliseconds(kDefaultSnooze);
      }
      delay.add(fmt::format("{:.3f}", static_cast<double>(d.count()) / 1000.0));
    } else {
      delay.add_null();
    }
  }
  // Results go by a statement of their own, so that the common batch (no results) keeps
  // close_attempts' fast path for bare successes.
  auto params = pg::make_params(std::move(batch).finish(), std::move(lane_seq).finish(),
                                std::move(outcome).finish(), std::move(error).finish(),
                                std::move(delay).finish());
  const std::string* sql = &complete_sql_;
  if (any_follow_up) {
    if (any_result) {
      params.add(std::move(result).finish());
    } else {
      params.null();
    }
    params.add(std::move(follow_ups).finish());
    sql = &complete_follow_ups_sql_;
  } else if (any_result) {
    params.add(std::move(result).finish());
    sql = &complete_results_sql_;
  }
  const auto res = conn.exec_cached(*sql, params);
  // close_attempts answers (input position, state) for the attempts it closed; the
  // others (already closed, or a repeat within this call) are stale.
  for (const auto& c : completions) results.push_back({c.job_id, c.run_lease, std::nullopt});
  for (int r = 0; r < res.rows(); ++r) {
    const auto ord = res.get<std::int64_t>(r, 0);
    if (ord < 1 || ord > static_cast<std::int64_t>(results.size())) {
      throw Error(fmt::format("close_attempts returned position {} for {} completions", ord,
                              results.size()));
    }
    results[static_cast<std::size_t>(ord - 1)].state = res.get<std::string>(r, 1);
  }
  // One series lookup per (queue, state) present in the batch, not per row.
  auto& m = metrics_;
  m.completion_flush_seconds.with({}).observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  std::map<std::pair<std::string_view, std::string_view>, std::uint64_t> per_state;
  for (std::size_t i = 0; i < completions.size(); ++i) {
    const auto& state = results[i].state;
    ++per_state[{completions[i].queue, state ? std::string_view(*state) : "stale"}];
  }
  for (const auto& [key, n] : per_state) m.job_completed.with({key.first, key.second}).inc(n);
  return results;
}

int Consumer::promote_due(pg::Connection& conn, int limit) const {
  if (limit < 1) throw InvalidArgument("promote_due: limit must be at least 1");
  return conn.exec_cached(promote_sql_, pg::make_params(static_cast<std::int64_t>(limit)))
      .get<int>(0, 0);
}

int Consumer::release(pg::Connection& conn, std::span<const ClaimedEntry> entries,
                      std::string_view reason) const {
  if (entries.empty()) return 0;
  ArrayLiteral batch, lane_seq, job_id;
  for (const auto& e : entries) {
    batch.add(e.claim_batch);
    lane_seq.add(e.lane_seq);
    job_id.add(e.job_id);
  }
  return conn
      .exec_cached(
          release_sql_,
          pg::make_params(std::move(batch).finish(), std::move(lane_seq).finish(),
                          std::move(job_id).finish(), storable_text(reason, kMaxErrorBytes)))
      .get<int>(0, 0);
}

std::vector<std::pair<JobId, std::int64_t>> Consumer::heartbeat(
    pg::Connection& conn, std::span<const QueueStorage::Heartbeat> beats) const {
  std::vector<std::pair<JobId, std::int64_t>> open;
  if (beats.empty()) return open;
  ArrayLiteral batches, lane_seqs, ids, leases, slots, attempts, progress;
  for (const auto& b : beats) {
    batches.add(b.claim_batch);
    lane_seqs.add(b.lane_seq);
    ids.add(b.job_id);
    leases.add(b.run_lease);
    slots.add(static_cast<std::int64_t>(b.ready_slot));
    attempts.add(static_cast<std::int64_t>(b.attempt));
    if (b.progress_json) {
      progress.add(*b.progress_json);
    } else {
      progress.add_null();
    }
  }
  const auto res = conn.exec_cached(
      heartbeat_sql_, pg::make_params(std::move(batches).finish(), std::move(lane_seqs).finish(),
                                      std::move(ids).finish(), std::move(leases).finish(),
                                      std::move(slots).finish(), std::move(attempts).finish(),
                                      std::move(progress).finish()));
  open.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    open.emplace_back(res.get<std::int64_t>(r, 0), res.get<std::int64_t>(r, 1));
  }
  return open;
}

std::vector<QueueStorage::Rescued> Consumer::rescue(pg::Connection& conn,
                                                    std::chrono::milliseconds stale,
                                                    int limit) const {
  if (limit < 1) throw InvalidArgument("rescue: limit must be at least 1");
  const auto res = conn.exec_cached(
      rescue_sql_, pg::make_params(interval(stale), static_cast<std::int64_t>(limit)));
  std::vector<QueueStorage::Rescued> out;
  for (int r = 0; r < res.rows(); ++r) {
    out.push_back(
        {res.get<std::int64_t>(r, 0), res.get<std::string>(r, 1), res.get<std::string>(r, 2)});
  }
  return out;
}

}  // namespace storage
}  // namespace awa
