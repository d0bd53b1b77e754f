#include "producers.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <span>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "awa/workflows.hpp"

namespace chaos {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kKeysPerProducer = 4;

// A producer's open batch (see producers.hpp).
struct OpenBatch {
  std::string name;
  bool open = false;       // open_batch returned, or the batch was found after a fault
  bool uncertain = false;  // an open_batch whose outcome a fault made unknown
  int transactions = 0;    // member transactions still to commit before the seal
};

bool has_sqlstate(const std::exception& e, std::string_view state) {
  const auto* err = dynamic_cast<const awa::Error*>(&e);
  return err != nullptr && err->sqlstate() == state;
}

}  // namespace

bool caused_by_fault(const std::exception& e) {
  if (dynamic_cast<const awa::ConnectionError*>(&e) != nullptr) return true;
  const auto* err = dynamic_cast<const awa::Error*>(&e);
  if (err == nullptr) return false;
  const std::string& state = err->sqlstate();
  return state.empty() || state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0;
}

void nap(const std::atomic<bool>& stop, std::chrono::milliseconds d) {
  const auto until = Clock::now() + d;
  while (!stop.load() && Clock::now() < until)
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(10), until - Clock::now()));
}

Producers::Producers(ProducerOptions options)
    : options_(std::move(options)),
      jobs_(static_cast<std::size_t>(options_.producers)),
      sealed_(static_cast<std::size_t>(options_.producers)),
      stats_(static_cast<std::size_t>(options_.producers)) {}

Producers::~Producers() { stop(); }

void Producers::start() {
  for (int i = 0; i < options_.producers; ++i) threads_.emplace_back([this, i] { run(i); });
}

void Producers::stop() {
  stop_.store(true);
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

std::vector<ProducedJob> Producers::results() const {
  std::vector<ProducedJob> all;
  for (const auto& v : jobs_) all.insert(all.end(), v.begin(), v.end());
  return all;
}

std::vector<SealedBatch> Producers::sealed_batches() const {
  std::vector<SealedBatch> all;
  for (const auto& v : sealed_) all.insert(all.end(), v.begin(), v.end());
  return all;
}

ProducerStats Producers::stats() const {
  ProducerStats total;
  for (const auto& s : stats_) {
    total.committed += s.committed;
    total.unknown += s.unknown;
    total.rolled_back += s.rolled_back;
    total.reconnects += s.reconnects;
    total.errors += s.errors;
    total.batches_opened += s.batches_opened;
    total.batches_sealed += s.batches_sealed;
    total.batch_members += s.batch_members;
    for (const auto& m : s.messages)
      if (total.messages.size() < 10) total.messages.push_back(m);
  }
  return total;
}

void Producers::run(int index) {
  const auto idx = static_cast<std::size_t>(index);
  auto& out = jobs_[idx];
  auto& st = stats_[idx];
  std::mt19937_64 rng(options_.seed * 1000003U + static_cast<std::uint64_t>(index));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  awa::QueueStorage store;
  std::optional<awa::Connection> conn;
  auto backoff = std::chrono::milliseconds(50);
  std::int64_t seq = 0;
  const auto period = std::chrono::microseconds(static_cast<long>(1e6 / options_.rate));
  auto next = Clock::now();
  const awa::WorkflowAdmin workflows;
  std::optional<OpenBatch> batch;
  std::int64_t batch_seq = 0;
  const auto producer_error = [&](const std::exception& e) {
    ++st.errors;
    if (st.messages.size() < 10)
      st.messages.push_back(fmt::format("producer {}: {}", index, e.what()));
  };
  const auto seal = [&]() {
    workflows.seal_batch(*conn, batch->name);
    sealed_[idx].push_back({batch->name, index});
    ++st.batches_sealed;
    batch.reset();
  };

  while (!stop_.load()) {
    if (!conn) {
      try {
        conn.emplace(awa::Connection::connect(options_.url, std::chrono::seconds(2)));
        backoff = std::chrono::milliseconds(50);
        ++st.reconnects;
      } catch (const std::exception&) {
        nap(stop_, backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
        continue;
      }
    }

    // The batch's turn first (producers.hpp): seal it once its transactions are done, open
    // a new one one time in eight. Each its own autocommit statement; a fault retries it
    // on a new connection.
    try {
      if (batch && batch->open && batch->transactions == 0) seal();
      if (!batch && unit(rng) < 1.0 / 8) {
        batch = OpenBatch{fmt::format("c-p{}-{}", index, ++batch_seq), false, false,
                          1 + static_cast<int>(unit(rng) * 3)};
      }
      if (batch && !batch->open) {
        if (batch->uncertain && workflows.batch(*conn, batch->name)) {
          batch->open = true;
        } else {
          awa::BatchOptions bo;
          bo.on_complete = kBatchCallbackKind;
          bo.queue = options_.queue;
          bo.on_complete_args = {{"p", index}};
          try {
            workflows.open_batch(*conn, batch->name, bo);
          } catch (const std::exception& e) {
            // The open a fault interrupted had been applied.
            if (!batch->uncertain || !has_sqlstate(e, "23505")) throw;
          }
          batch->open = true;
        }
        ++st.batches_opened;
      }
    } catch (const std::exception& e) {
      if (caused_by_fault(e)) {
        if (batch && !batch->open) batch->uncertain = true;
      } else {
        producer_error(e);
        batch.reset();  // given up: judged by nobody, since never sealed
      }
      conn.reset();
      nap(stop_, backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
      continue;
    }

    // The mix, per job: keyed and unkeyed noop, jobs that retry then succeed (flaky), jobs
    // that exhaust their attempts (fail), slow jobs (sleep, long enough to be caught running
    // by a fault; a few for seconds, past the stale timeout). Per transaction: one to four calls of
    // one to three jobs each.
    const auto make = [&]() {
      ProducedJob pj;
      pj.producer = index;
      pj.seq = ++seq;
      pj.marker = fmt::format("p{}-{}", index, pj.seq);
      nlohmann::json args = {{"m", pj.marker}, {"p", index}, {"n", pj.seq}};
      awa::InsertOpts opts;
      opts.queue = options_.queue;
      opts.max_attempts = 5;
      bool keyed = false;
      const double pick = unit(rng);
      if (!options_.credit_queue.empty() && pick < 0.06) {
        // Exactly-once: the credit worker credits it and completes it in one transaction.
        pj.kind = "credit";
        opts.queue = options_.credit_queue;
      } else if (pick < 0.55) {
        pj.kind = "noop";
        keyed = pick < 0.35;
      } else if (pick < 0.72) {
        pj.kind = "noop";
      } else if (pick < 0.82) {
        pj.kind = "flaky";
        args["fail_attempts"] = 1;
        args["retry_ms"] = 100;
        keyed = unit(rng) < 0.5;
      } else if (pick < 0.87) {
        pj.kind = "fail";
        args["mode"] = "retryable";
        opts.max_attempts = 2;
      } else {
        pj.kind = "sleep";
        // One in ten a long handler: longer than the stale timeout, alive by heartbeats.
        args["ms"] = unit(rng) < 0.1 ? 2500 + static_cast<int>(unit(rng) * 2500)
                                     : 100 + static_cast<int>(unit(rng) * 300);
        keyed = unit(rng) < 0.5;
      }
      if (keyed) {
        pj.ordering_key =
            fmt::format("p{}-k{}", index, static_cast<int>(unit(rng) * kKeysPerProducer));
        opts.ordering_key = pj.ordering_key;
      }
      return std::make_pair(awa::NewJob(pj.kind, args, opts), std::move(pj));
    };
    // One transaction in six also enqueues a workflow tree (docs/workflows.md): a root, two
    // children after it (fan-out), one after both (fan-in), one after that, in one call
    // (after_in_call), then a sixth job after the fifth in a second call of the same
    // transaction (after). Depth 5; unkeyed, so the key-order check is not involved. The
    // root fails for good one time in eight, and each child has a random policy.
    const auto tree = [&]() {
      std::vector<std::pair<awa::NewJob, ProducedJob>> t;
      for (int j = 0; j < 6; ++j) {
        auto [job, pj] = make();
        job.opts.ordering_key.reset();
        pj.ordering_key.reset();
        if (j == 0 && unit(rng) < 0.125) {
          job.kind = pj.kind = "fail";
          job.opts.queue = options_.queue;  // make() may have picked the credit queue
          auto args = nlohmann::json::parse(job.args_json);
          args["mode"] = "retryable";
          job.args_json = args.dump();
          job.opts.max_attempts = 2;
        }
        const double policy = unit(rng);
        job.opts.on_parent_failure = policy < 0.5    ? awa::OnParentFailure::kCancel
                                     : policy < 0.75 ? awa::OnParentFailure::kRun
                                                     : awa::OnParentFailure::kFail;
        if (j == 1 || j == 2) job.opts.after_in_call = {0};
        if (j == 3) job.opts.after_in_call = {1, 2};
        if (j == 4) job.opts.after_in_call = {3};
        t.emplace_back(std::move(job), std::move(pj));
      }
      return t;
    };
    // While a batch is open, about half the jobs of its transactions join it, tree jobs
    // too (a member with parents waits for them, and ends cancelled or failed by a policy).
    const bool in_batch = batch && batch->open && batch->transactions > 0;
    const auto join = [&](awa::NewJob& job, ProducedJob& pj) {
      if (!in_batch || unit(rng) >= 0.5) return;
      job.opts.batch = batch->name;
      pj.batch = batch->name;
    };
    const bool with_tree = unit(rng) < 1.0 / 6;
    std::vector<std::vector<awa::NewJob>> calls(1 + static_cast<std::size_t>(unit(rng) * 4));
    std::vector<ProducedJob> meta;
    for (auto& call : calls) {
      const int n = unit(rng) < 0.6 ? 1 : 1 + static_cast<int>(unit(rng) * 3);
      for (int j = 0; j < n; ++j) {
        auto [job, pj] = make();
        join(job, pj);
        call.push_back(std::move(job));
        meta.push_back(std::move(pj));
      }
    }

    std::vector<awa::NewJob> tree_call;
    std::optional<awa::NewJob> tail;
    if (with_tree) {
      for (auto& [job, pj] : tree()) {
        join(job, pj);
        if (tree_call.size() < 5) {
          tree_call.push_back(std::move(job));
        } else {
          tail = std::move(job);
        }
        meta.push_back(std::move(pj));
      }
    }

    bool committing = false;
    try {
      awa::Transaction tx(*conn);
      std::size_t k = 0;
      for (const auto& call : calls) {
        if (call.size() == 1) {
          meta[k++].job_id = store.insert(*conn, call.front());
        } else {
          for (const auto id : store.insert_many(*conn, std::span<const awa::NewJob>(call)))
            meta[k++].job_id = id;
        }
      }
      if (with_tree) {  // its jobs come last in meta
        const auto ids = store.insert_many(*conn, std::span<const awa::NewJob>(tree_call));
        for (const auto id : ids) meta[k++].job_id = id;
        tail->opts.after = {ids.back()};
        meta[k++].job_id = store.insert(*conn, *tail);
      }
      committing = true;
      tx.commit();
      st.committed += static_cast<std::int64_t>(meta.size());
      if (in_batch) --batch->transactions;
      for (auto& m : meta) {
        if (m.batch) ++st.batch_members;
        out.push_back(std::move(m));
      }
    } catch (const std::exception& e) {
      if (committing) {
        if (in_batch) --batch->transactions;  // its memberships follow its jobs
        // Whatever the error, the COMMIT may have been applied: resolve by marker later.
        st.unknown += static_cast<std::int64_t>(meta.size());
        for (auto& m : meta) {
          if (m.batch) ++st.batch_members;
          m.commit = CommitState::kUnknown;
          out.push_back(std::move(m));
        }
      } else {
        ++st.rolled_back;
      }
      if (!caused_by_fault(e)) producer_error(e);
      // A broken or confused session is replaced; a fresh one costs little here.
      conn.reset();
      nap(stop_, backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
      continue;
    }

    next += period;
    const auto now = Clock::now();
    if (next < now - std::chrono::seconds(1)) next = now;  // do not burst after an outage
    if (next > now) nap(stop_, std::chrono::duration_cast<std::chrono::milliseconds>(next - now));
  }

  // The open batch is sealed at the end (the faults are over by then), bounded: a batch
  // left open is never judged. One never opened had no member transaction.
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (batch && batch->open && Clock::now() < until) {
    try {
      if (!conn) conn.emplace(awa::Connection::connect(options_.url, std::chrono::seconds(2)));
      seal();
    } catch (const std::exception& e) {
      if (!caused_by_fault(e)) {
        producer_error(e);
        break;
      }
      conn.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

}  // namespace chaos
