// Shared fixture of the periodic-job tests: a migrated schema, PeriodicAdmin on a public
// connection, and helpers that read what the leader's fire call enqueued.
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "awa/connection.hpp"
#include "awa/periodic.hpp"
#include "runtime_support.hpp"

namespace awa::testing {

class PeriodicTest : public RuntimeTest {
 protected:
  void SetUpSchema() override {
    RuntimeTest::SetUpSchema();
    pub_ = std::make_unique<Connection>(Connection::connect(database_url()));
    admin_ = std::make_unique<PeriodicAdmin>(schema_);
  }

  PeriodicJob job(const std::string& name, const std::string& schedule,
                  const std::string& queue = "periodic") const {
    PeriodicJob j;
    j.name = name;
    j.schedule = schedule;
    j.kind = "noop";
    j.options.queue = queue;
    return j;
  }

  PeriodicUpsert add(const PeriodicJob& j) { return admin_->add(*pub_, j); }

  // Makes a schedule due: next_fire_at = `sql` (an expression, e.g. "now() - interval '1h'").
  void due_at(const std::string& name, const std::string& sql) {
    conn().query("UPDATE periodic_jobs SET next_fire_at = " + sql + " WHERE name = $1", name);
  }

  // One fire call on `c`; returns the rows it returned.
  std::int64_t fire(pg::Connection& c, int limit = 100, int catch_up = 100) {
    return c
        .query("SELECT count(*) FROM fire_due_periodic($1::integer, $2::integer)", limit, catch_up)
        .get<std::int64_t>(0, 0);
  }

  // Jobs enqueued for schedule `name` (ready or deferred), triggered ones included.
  std::int64_t jobs_of(const std::string& name) {
    return conn()
        .query(
            "SELECT (SELECT count(*) FROM ready_entries WHERE metadata->>'periodic' = $1) + "
            "(SELECT count(*) FROM deferred_jobs WHERE metadata->>'periodic' = $1)",
            name)
        .get<std::int64_t>(0, 0);
  }

  // Occurrences enqueued more than once, over every schedule: must be 0.
  std::int64_t duplicate_occurrences() {
    return count(
        "SELECT count(*) FROM (SELECT metadata->>'periodic', metadata->>'occurrence' "
        "FROM ready_entries WHERE metadata ? 'occurrence' GROUP BY 1, 2 "
        "HAVING count(*) > 1) d");
  }

  std::unique_ptr<Connection> pub_;
  std::unique_ptr<PeriodicAdmin> admin_;
};

}  // namespace awa::testing
