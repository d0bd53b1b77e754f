#include "storage/enqueue_batch.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "pg/params.hpp"
#include "storage/pg_array.hpp"
#include "storage/validate.hpp"

namespace awa::storage {

bool any_batch(std::span<const NewJob> jobs) {
  return std::any_of(jobs.begin(), jobs.end(),
                     [](const NewJob& job) { return !job.opts.batch.empty(); });
}

std::vector<InsertResult> insert_with_batches(
    pg::Connection& conn, std::span<const NewJob> jobs, const std::string& add_members_sql,
    const std::function<std::vector<InsertResult>(std::span<const NewJob>)>& rest) {
  for (std::size_t i = 0; i < jobs.size(); ++i) validate_job(jobs[i], i);

  std::optional<pg::Transaction> tx;
  if (!conn.in_transaction()) tx.emplace(conn);

  std::vector<NewJob> plain(jobs.begin(), jobs.end());
  for (auto& job : plain) job.opts.batch.clear();
  auto out = rest(plain);

  // One statement per batch, in name order: each takes its batch row's lock, so two calls
  // naming the same batches take them in the same order.
  std::map<std::string, ArrayLiteral> members;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].opts.batch.empty()) continue;
    members[jobs[i].opts.batch].add(static_cast<std::int64_t>(out[i].id));
  }
  for (auto& [name, ids] : members) {
    pg::Params p;
    p.add(name).add(std::move(ids).finish());
    conn.exec_cached(add_members_sql, p);
  }
  if (tx) tx->commit();
  return out;
}

}  // namespace awa::storage
