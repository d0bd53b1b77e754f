// The runtime_instances registry (sql/migrations/0003_operations.sql): each running
// Client has one row, which `awa health` (Admin::health) reads to tell which workers are
// alive and whether the maintenance leader is running its rounds.
//
//   - start() registers the instance (a random uuid, hostname, os pid, its queues);
//   - the control thread calls beat() every kBeatInterval (last_seen_at);
//   - the maintenance leader calls leader_tick() after each round (is_leader,
//     leader_tick_at) and expire() now and then (rows of killed processes);
//   - a clean stop calls remove() after every other thread has stopped.
//
// Every call is one statement on the connection given; errors propagate (callers treat
// the registry as best effort: a failed beat must never stop a worker).
//
// Thread safety: immutable after construction; any number of threads may call it, each
// on its own connection.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "pg/connection.hpp"

namespace awa::runtime {

class InstanceRegistry {
 public:
  // How often the control thread marks the instance seen. Admin::health's default
  // `recent` window (30 s) spans several beats.
  static constexpr std::chrono::seconds kBeatInterval{5};

  // A new instance of this process: a random (version 4) uuid, gethostname(), getpid().
  // Throws InvalidArgument for a bad schema name.
  InstanceRegistry(const std::string& schema, const std::vector<std::string>& queues);

  const std::string& id() const noexcept { return id_; }
  const std::string& hostname() const noexcept { return hostname_; }
  int pid() const noexcept { return pid_; }

  // Upserts the row: registers it, or sets last_seen_at = now().
  void beat(pg::Connection& conn) const;
  // Marks this instance the leader as of now, and clears the flag on every other row.
  void leader_tick(pg::Connection& conn) const;
  // Deletes the row (clean stop).
  void remove(pg::Connection& conn) const;
  // Deletes the rows of instances not seen for `unseen`; returns how many.
  static int expire(pg::Connection& conn, const std::string& quoted_schema,
                    std::chrono::seconds unseen);

 private:
  pg::Params identity() const;

  std::string id_;
  std::string hostname_;
  int pid_ = 0;
  std::string queues_;  // text[] literal
  std::string beat_sql_;
  std::string tick_sql_;
  std::string remove_sql_;
};

}  // namespace awa::runtime
