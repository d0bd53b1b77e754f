#include "storage/enqueue_unique.hpp"

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "awa/metrics.hpp"
#include "pg/params.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/pg_array.hpp"
#include "storage/validate.hpp"

namespace awa::storage {

std::string unique_json(const UniqueOpts& unique) {
  nlohmann::json j = {
      {"by_args", unique.by_args}, {"by_queue", unique.by_queue}, {"states", unique.states}};
  if (unique.period) j["period"] = unique.period->count();
  return j.dump();
}

UniqueInserter::UniqueInserter(const std::string& quoted_schema)
    : sql_(sql::render(sql::file("queries/enqueue/insert_unique.sql"), quoted_schema)) {}

InsertResult UniqueInserter::insert(pg::Connection& conn, const NewJob& job) const {
  const auto& o = job.opts;
  pg::Params p;
  p.add(job.kind).add(o.queue).add(job.args_json).add(o.priority).add(o.max_attempts);
  p.add(o.run_at);
  if (o.metadata.is_null()) {
    p.null();
  } else {
    p.add(o.metadata.dump());
  }
  if (o.tags.empty()) {
    p.null();
  } else {
    ArrayLiteral tags;
    for (const auto& t : o.tags) tags.add(t);
    p.add(std::move(tags).finish());
  }
  if (o.ordering_key) {
    p.add_bytea(std::string_view(*o.ordering_key));
  } else {
    p.null();
  }
  p.add(unique_json(*o.unique));
  const auto res = conn.exec_cached(sql_, p);
  InsertResult r{res.get<std::int64_t>(0, 0), res.get<bool>(0, 1)};
  // awa_job_enqueued_total counts jobs written; a duplicate wrote nothing.
  if (!r.duplicate) metrics::engine().job_enqueued.with({o.queue}).inc(1);
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
  std::vector<InsertResult> out(jobs.size());
  std::vector<NewJob> plain;
  std::vector<std::size_t> plain_rows;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    validate_job(jobs[i], i);
    if (!jobs[i].opts.unique) {
      plain.push_back(jobs[i]);
      plain_rows.push_back(i);
    }
  }
  std::optional<pg::Transaction> tx;
  if (!conn.in_transaction()) tx.emplace(conn);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].opts.unique) out[i] = unique.insert(conn, jobs[i]);
  }
  if (!plain.empty()) {
    const auto ids = bulk(plain);
    for (std::size_t k = 0; k < ids.size(); ++k) out[plain_rows[k]].id = ids[k];
  }
  if (tx) tx->commit();
  return out;
}

}  // namespace awa::storage
