#include "storage/enqueue_after.hpp"

#include <algorithm>
#include <optional>

#include "pg/params.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/job_columns.hpp"
#include "storage/pg_array.hpp"
#include "storage/validate.hpp"

namespace awa::storage {

namespace {

bool has_parents(const NewJob& job) {
  return !job.opts.after.empty() || !job.opts.after_in_call.empty();
}

}  // namespace

AfterInserter::AfterInserter(const std::string& quoted_schema, metrics::EngineMetrics& metrics)
    : metrics_(metrics),
      sql_(sql::render(sql::file("queries/enqueue/insert_after.sql"), quoted_schema)) {}

JobId AfterInserter::insert(pg::Connection& conn, const NewJob& job,
                            const std::vector<JobId>& parents) const {
  const auto& o = job.opts;
  ArrayLiteral ids;
  for (const auto id : parents) ids.add(static_cast<std::int64_t>(id));
  pg::Params p;
  p.add(std::move(ids).finish()).add(std::string(on_parent_failure_name(o.on_parent_failure)));
  p.add(job.kind).add(o.queue).add(job.args_json).add(o.priority).add(o.max_attempts);
  p.add(o.run_at);
  add_metadata(p, job);
  add_tags(p, job);
  add_ordering_key(p, job);
  const auto res = conn.exec_cached(sql_, p);
  metrics_.job_enqueued.with({o.queue}).inc(1);
  return res.get<std::int64_t>(0, 0);
}

bool any_parents(std::span<const NewJob> jobs) {
  return std::any_of(jobs.begin(), jobs.end(), has_parents);
}

std::vector<InsertResult> insert_with_parents(
    pg::Connection& conn, std::span<const NewJob> jobs, const AfterInserter& after,
    const std::function<std::vector<InsertResult>(std::span<const NewJob>)>& rest) {
  for (std::size_t i = 0; i < jobs.size(); ++i) validate_job(jobs[i], i);

  std::optional<pg::Transaction> tx;
  if (!conn.in_transaction()) tx.emplace(conn);

  std::vector<InsertResult> out(jobs.size());
  std::vector<NewJob> plain;
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (has_parents(jobs[i])) continue;
    plain.push_back(jobs[i]);
    rows.push_back(i);
  }
  if (!plain.empty()) {
    const auto written = rest(plain);
    for (std::size_t k = 0; k < written.size(); ++k) out[rows[k]] = written[k];
  }
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& job = jobs[i];
    if (!has_parents(job)) continue;
    std::vector<JobId> parents = job.opts.after;
    for (const auto position : job.opts.after_in_call) parents.push_back(out[position].id);
    out[i] = InsertResult{after.insert(conn, job, parents), false};
  }
  if (tx) tx->commit();
  return out;
}

}  // namespace awa::storage
