// Admin::health (`awa health`): schema version, maintenance leader, live workers and the
// age of each queue's oldest available job. SQL in sql/queries/admin/health_*.sql.
//
// Every read is guarded by a check that its table exists, so an unmigrated or older
// schema is reported as a problem instead of failing on a missing relation; only a
// connection or privilege error escapes as an exception.
#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/migrator.hpp"
#include "schema/sql_catalog.hpp"

namespace awa {
namespace {

// An age in seconds read from the server; a clock step can make it slightly negative.
std::optional<double> age(const pg::Result& rows, int row, int col) {
  const auto v = rows.get_opt<double>(row, col);
  if (!v) return std::nullopt;
  return std::max(0.0, *v);
}

}  // namespace

Health Admin::health(Connection& conn, std::chrono::seconds recent) const {
  if (recent.count() <= 0) throw InvalidArgument("health: the recent window must be positive");
  auto& c = pg::native(conn);
  Health h;
  const auto migrations = schema::embedded_migrations();
  h.expected_schema_version = migrations.empty() ? 0 : migrations.back().version;

  const auto tables =
      c.exec(sql::file("queries/admin/health_tables.sql"), pg::make_params(schema_));
  const bool has_ledger = tables.get<bool>(0, 0);
  const bool has_instances = tables.get<bool>(0, 1);
  const bool has_lanes = tables.get<bool>(0, 2);

  if (has_ledger) {
    h.schema_version =
        c.exec(sql::render(sql::file("queries/admin/health_version.sql"), quoted_)).get<int>(0, 0);
  }
  if (h.schema_version == 0) {
    h.problems.push_back(
        fmt::format("schema {} is not migrated (run: awa migrate --schema {})", schema_, schema_));
  } else if (h.schema_version < h.expected_schema_version) {
    h.problems.push_back(fmt::format(
        "schema {} is at version {}, this build expects {} (run: awa migrate --schema {})", schema_,
        h.schema_version, h.expected_schema_version, schema_));
  } else if (h.schema_version > h.expected_schema_version) {
    h.problems.push_back(
        fmt::format("schema {} is at version {}, newer than this build's {} (upgrade awa)", schema_,
                    h.schema_version, h.expected_schema_version));
  }

  std::optional<WorkerInstance> leader;
  if (has_instances) {
    const auto rows = c.exec(sql::render(sql::file("queries/admin/health_instances.sql"), quoted_),
                             pg::make_params(static_cast<std::int64_t>(recent.count())));
    for (int r = 0; r < rows.rows(); ++r) {
      WorkerInstance w;
      w.instance_id = rows.get<std::string>(r, 0);
      w.hostname = rows.get<std::string>(r, 1);
      w.pid = rows.get<int>(r, 2);
      for (const auto& q : nlohmann::json::parse(rows.get<std::string>(r, 3)))
        w.queues.push_back(q.get<std::string>());
      w.started_at = rows.get<std::string>(r, 4);
      w.last_seen_at = rows.get<std::string>(r, 5);
      w.is_leader = rows.get<bool>(r, 6);
      const auto tick_age = age(rows, r, 7);
      const bool seen = rows.get<bool>(r, 8);
      // The tick updates keep at most one row flagged; the freshest wins should a race
      // between two leaders' ticks ever leave two.
      if (w.is_leader && (!h.leader_tick_age_s || (tick_age && *tick_age < *h.leader_tick_age_s))) {
        h.leader_present = true;
        h.leader_tick_age_s = tick_age;
        leader = w;
      }
      if (seen) h.workers.push_back(std::move(w));
    }
  }
  if (!leader) {
    if (h.schema_version > 0) {
      h.problems.push_back(
          "no maintenance leader: no running worker has recorded a maintenance round (is an "
          "`awa work` or a Client with maintenance enabled running against this schema?)");
    }
  } else if (!h.leader_tick_age_s || *h.leader_tick_age_s > static_cast<double>(recent.count())) {
    h.problems.push_back(fmt::format(
        "the maintenance leader ({} pid {}, instance {}) {}, longer than the {} s window",
        leader->hostname, leader->pid, leader->instance_id,
        h.leader_tick_age_s
            ? fmt::format("last finished a round {:.1f} s ago", *h.leader_tick_age_s)
            : std::string("never finished a round"),
        recent.count()));
  }

  if (has_lanes) {
    const auto rows =
        c.exec(sql::render(sql::file("queries/admin/health_queue_ages.sql"), quoted_));
    for (int r = 0; r < rows.rows(); ++r)
      h.queues.push_back(Health::QueueAge{rows.get<std::string>(r, 0), age(rows, r, 1)});
  }

  h.healthy = h.problems.empty();
  return h;
}

}  // namespace awa
