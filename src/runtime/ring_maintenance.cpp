#include "runtime/ring_maintenance.hpp"

#include <string>

#include <spdlog/spdlog.h>

namespace awa::runtime {

RingTick maintain_ring(Connection& conn, const Admin& admin, std::string_view ring, bool rotate_due,
                       std::chrono::seconds failed_retention) {
  const std::string name(ring);
  RingTick tick;
  // Sealed slots whose work is all done go first; a ring has at most slot_count of them.
  for (int i = 0; i < 64; ++i) {
    const auto pruned = admin.prune(conn, name, false, failed_retention);
    if (!pruned.done) break;
    ++tick.prunes;
    tick.rows_removed += pruned.rows_removed;
    tick.rows_carried += pruned.rows_carried;  // failed jobs inside their retention
  }
  if (!rotate_due) return tick;
  auto rotated = admin.rotate(conn, name);
  if (!rotated.done && rotated.reason.starts_with(kRingFull)) {
    // The ring is full: carry the oldest slot's live work forward so it can advance.
    const auto carried = admin.prune(conn, name, true, failed_retention);
    if (carried.done) {
      ++tick.prunes;
      tick.rows_removed += carried.rows_removed;
      tick.rows_carried += carried.rows_carried;
      spdlog::info("maintenance: {} ring full; pruned generation {} carrying {} live rows", name,
                   carried.generation, carried.rows_carried);
      rotated = admin.rotate(conn, name);
    }
  }
  tick.rotated = rotated.done;
  // Once per rotation, not every round: the sweep reads the whole keep slot, retained
  // failures included, to find what is dead.
  if (tick.rotated && ring == "queue") tick.rows_swept = admin.sweep_kept(conn, failed_retention);
  return tick;
}

}  // namespace awa::runtime
