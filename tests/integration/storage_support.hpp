// Fixture for storage tests: a private schema, migrated, with a QueueStorage on it.
#pragma once

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "schema/migrator.hpp"
#include "support.hpp"

namespace awa::testing {

inline InsertOpts on_queue(std::string queue) {
  InsertOpts o;
  o.queue = std::move(queue);
  return o;
}

class StorageTest : public PgTest {
 protected:
  void SetUpSchema() override {
    schema::Migrator(schema_).migrate(conn());
    store_ = std::make_unique<QueueStorage>(StorageOptions{schema_});
    const char* m = std::getenv("AWA_MUTANT");
    if (m == nullptr) return;
    const std::string mutant = m;
    auto mutate = [&](const char* fn, const std::string& from, const std::string& to) {
      auto def = conn()
                     .query("SELECT pg_get_functiondef($1::regprocedure)", std::string(fn))
                     .get<std::string>(0, 0);
      auto pos = def.find(from);
      if (pos == std::string::npos) throw std::runtime_error("mutant: not found");
      def.replace(pos, from.size(), to);
      conn().exec(def);
    };
    if (mutant == "order")
      mutate("insert_jobs_compat(jsonb)", "ORDER BY b.queue COLLATE \"C\", b.priority, b.shard",
             "ORDER BY min(b.ord)");
    if (mutant == "nolock")
      mutate("reserve_lane_range(text,integer,integer,integer)", "PERFORM pg_advisory_xact_lock(",
             "PERFORM pg_try_advisory_xact_lock(");
    if (mutant == "nosticky")
      mutate("insert_job_compat(text,jsonb,text,integer,integer,timestamptz,bytea,jsonb,text[])",
             "IF v_sticky IS NULL OR v_sticky = ''", "IF true");
  }

  // UPSERTs queue_meta.enqueue_shards the way ADR-025's operator procedure does.
  void set_shards(const std::string& queue, int shards) {
    conn().query(
        "INSERT INTO queue_meta (queue, enqueue_shards) VALUES ($1, $2) "
        "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards",
        queue, shards);
  }

  std::int64_t count(const std::string& sql) { return conn().exec(sql).get<std::int64_t>(0, 0); }

  std::unique_ptr<QueueStorage> store_;
};

}  // namespace awa::testing
