// Fixture for storage tests: a private schema, migrated, with a QueueStorage on it.
#pragma once

#include <memory>
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
  }

  // UPSERTs queue_meta.enqueue_shards the way docs/operations.md's upsert does.
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
