// One ring's share of a maintenance round, as the leader runs it: prune the sealed slots
// whose work is all done, then, when a rotation is due, rotate; a ring too full to rotate
// is pruned with carry first (its oldest slot still holds live work). After a rotation of
// the queue ring, the dead rows of its keep slot are swept. A free function so
// that the carry benchmark drives exactly what the leader does, tick by tick.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "awa/admin.hpp"
#include "awa/connection.hpp"

namespace awa::runtime {

struct RingTick {
  int prunes = 0;                 // slots truncated, carrying prunes included
  bool rotated = false;           // the ring advanced a generation
  std::int64_t rows_removed = 0;  // rows the prunes removed for good
  std::int64_t rows_carried = 0;  // rows the prunes copied forward (live work, retained failures)
  std::int64_t rows_swept = 0;    // queue ring: dead rows deleted from its keep slot
};

// Throws what Admin::prune / Admin::rotate throw; the leader logs it as the step's failure.
RingTick maintain_ring(Connection& conn, const Admin& admin, std::string_view ring, bool rotate_due,
                       std::chrono::seconds failed_retention);

}  // namespace awa::runtime
