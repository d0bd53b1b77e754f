#include "storage/enqueue_unique.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "pg/params.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/job_columns.hpp"
#include "storage/pg_array.hpp"
#include "storage/validate.hpp"

namespace awa::storage {

std::string unique_json(const UniqueOpts& unique) {
  nlohmann::json j = {
      {"by_args", unique.by_args}, {"by_queue", unique.by_queue}, {"states", unique.states}};
  if (unique.period) j["period"] = unique.period->count();
  return j.dump();
}

UniqueInserter::UniqueInserter(const std::string& quoted_schema, metrics::EngineMetrics& metrics)
    : metrics_(metrics),
      sql_(sql::render(sql::file("queries/enqueue/insert_unique.sql"), quoted_schema)),
      claim_keys_sql_(
          sql::render(sql::file("queries/enqueue/claim_unique_keys.sql"), quoted_schema)),
      set_holders_sql_(
          sql::render(sql::file("queries/enqueue/set_unique_key_holders.sql"), quoted_schema)) {}

InsertResult UniqueInserter::insert(pg::Connection& conn, const NewJob& job) const {
  const auto& o = job.opts;
  pg::Params p;
  p.add(job.kind).add(o.queue).add(job.args_json).add(o.priority).add(o.max_attempts);
  p.add(o.run_at);
  add_metadata(p, job);
  add_tags(p, job);
  add_ordering_key(p, job);
  p.add(unique_json(*o.unique));
  const auto res = conn.exec_cached(sql_, p);
  InsertResult r{res.get<std::int64_t>(0, 0), res.get<bool>(0, 1)};
  // awa_job_enqueued_total counts jobs written; a duplicate wrote nothing.
  if (!r.duplicate) metrics_.job_enqueued.with({o.queue}).inc(1);
  return r;
}

UniquePurge purge_unique_keys(pg::Connection& conn, const std::string& quoted_schema,
                              const std::optional<std::string>& after, int limit) {
  pg::Params p;
  if (after) {
    p.add_bytea(std::string_view(*after));
  } else {
    p.null();
  }
  p.add(limit);
  const auto res =
      conn.exec(sql::render(sql::file("queries/runtime/purge_unique_keys.sql"), quoted_schema), p);
  UniquePurge out;
  out.purged = res.get<int>(0, 0);
  if (const auto key = res.get_opt<pg::Bytea>(0, 1)) out.next = key->bytes;
  return out;
}

bool any_unique(std::span<const NewJob> jobs) {
  return std::any_of(jobs.begin(), jobs.end(),
                     [](const NewJob& j) { return j.opts.unique.has_value(); });
}

std::vector<InsertResult> insert_with_unique(
    pg::Connection& conn, std::span<const NewJob> jobs, const UniqueInserter& unique,
    const std::function<std::vector<JobId>(std::span<const NewJob>)>& bulk) {
  for (std::size_t i = 0; i < jobs.size(); ++i) validate_job(jobs[i], i);
  // One unique job alone: one statement (insert_job_compat), key then lane, as for a SQL
  // producer; nothing else in the call to order against.
  if (jobs.size() == 1) return {unique.insert(conn, jobs.front())};

  std::optional<pg::Transaction> tx;
  if (!conn.in_transaction()) tx.emplace(conn);

  // 1. Every key of the call, in key order, before any job is written.
  std::vector<std::size_t> uniq;  // the unique jobs' positions in `jobs`
  ArrayLiteral kinds, queues, args, run_at, specs;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    if (!j.opts.unique) continue;
    uniq.push_back(i);
    kinds.add(j.kind);
    queues.add(j.opts.queue);
    args.add(j.args_json);
    if (j.opts.run_at) {
      run_at.add(timestamp_literal(*j.opts.run_at));
    } else {
      run_at.add_null();
    }
    specs.add(unique_json(*j.opts.unique));
  }
  const auto claimed =
      conn.exec_cached(unique.claim_keys_sql(),
                       pg::make_params(std::move(kinds).finish(), std::move(queues).finish(),
                                       std::move(args).finish(), std::move(run_at).finish(),
                                       std::move(specs).finish()));

  std::vector<InsertResult> out(jobs.size());
  std::vector<std::optional<std::string>> key_of(jobs.size());  // keys this call claimed
  std::vector<std::pair<std::size_t, std::string>> repeats;     // equal to a job of the call
  std::map<std::string, JobId> holder_of;  // each key's job: an outside holder, or written here
  for (int r = 0; r < claimed.rows(); ++r) {
    const auto i = uniq.at(static_cast<std::size_t>(claimed.get<int>(r, 0) - 1));
    auto key = claimed.get<pg::Bytea>(r, 1).bytes;
    if (!claimed.get<bool>(r, 3)) {
      key_of[i] = std::move(key);
      continue;
    }
    out[i].duplicate = true;
    if (const auto holder = claimed.get_opt<std::int64_t>(r, 2)) {
      out[i].id = *holder;
      holder_of.emplace(std::move(key), *holder);
    } else {
      repeats.emplace_back(i, std::move(key));
    }
  }

  // 2. The jobs to write, unique or not, through the bulk path: lanes in their global order.
  std::vector<NewJob> batch;
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (out[i].duplicate) continue;
    batch.push_back(jobs[i]);
    rows.push_back(i);
  }
  const auto ids = batch.empty() ? std::vector<JobId>{} : bulk(batch);
  for (std::size_t k = 0; k < ids.size(); ++k) out[rows[k]].id = ids[k];

  // 3. The claimed keys name their jobs.
  ArrayLiteral keys, holders;
  std::size_t named = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!key_of[i]) continue;
    keys.add_bytea(*key_of[i]);
    holders.add(static_cast<std::int64_t>(out[i].id));
    holder_of.emplace(*key_of[i], out[i].id);
    ++named;
  }
  if (named > 0) {
    const auto res =
        conn.exec_cached(unique.set_holders_sql(),
                         pg::make_params(std::move(keys).finish(), std::move(holders).finish()));
    if (static_cast<std::size_t>(res.get<int>(0, 0)) != named) {
      throw Error(fmt::format("unique jobs: {} of {} claimed keys could be given their job",
                              res.get<int>(0, 0), named));
    }
  }
  // A repeat of an earlier job of the call: a duplicate of whatever that one became.
  for (const auto& [i, key] : repeats) out[i].id = holder_of.at(key);
  if (tx) tx->commit();
  return out;
}

}  // namespace awa::storage
