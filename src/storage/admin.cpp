#include "awa/admin.hpp"

#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/validate.hpp"

namespace awa {

Admin::Admin(std::string schema)
    : schema_(std::move(schema)), quoted_(sql::quote_schema(schema_)) {}

void Admin::set_enqueue_shards(Connection& conn, const std::string& queue, int shards) const {
  storage::validate_queue_name(queue);
  pg::native(conn).exec(sql::render(sql::file("queries/admin/set_enqueue_shards.sql"), quoted_),
                        pg::make_params(queue, shards));
}

std::vector<ShardLag> Admin::queue_shards(Connection& conn, const std::string& queue) const {
  storage::validate_queue_name(queue);
  const auto res = pg::native(conn).exec(
      sql::render(sql::file("queries/admin/queue_shard_lag.sql"), quoted_), pg::make_params(queue));
  std::vector<ShardLag> out;
  out.reserve(static_cast<std::size_t>(res.rows()));
  for (int r = 0; r < res.rows(); ++r) {
    out.push_back(ShardLag{res.get<int>(r, 0), res.get<int>(r, 1), res.get<std::int64_t>(r, 2),
                           res.get<std::int64_t>(r, 3), res.get<std::int64_t>(r, 4),
                           res.get<std::int64_t>(r, 5)});
  }
  return out;
}

std::string Admin::cancel_job(Connection& conn, std::int64_t job_id) const {
  return pg::native(conn)
      .exec(sql::render(sql::file("queries/admin/cancel_job.sql"), quoted_),
            pg::make_params(job_id))
      .get<std::string>(0, 0);
}

int Admin::purge_dlq(Connection& conn, std::chrono::milliseconds keep) const {
  return pg::native(conn)
      .exec(sql::render(sql::file("queries/admin/purge_dlq.sql"), quoted_),
            pg::make_params(std::to_string(keep.count()) + " milliseconds"))
      .get<int>(0, 0);
}

}  // namespace awa
