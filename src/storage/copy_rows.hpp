// ready_entries rows in PostgreSQL's binary COPY format (sql/queries/enqueue/copy_ready.sql),
// encoded before the lane is reserved, and the literal binding of the COPY script
// (QueueStorage's COPY path, src/storage/enqueue_copy.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "awa/job.hpp"

namespace awa::storage {

// A run_at offset of a row that carries its own run_at (nothing to patch).
inline constexpr std::size_t kNoPatch = static_cast<std::size_t>(-1);

// One lane's rows, encoded before the lane is reserved. The values only the reservation
// knows are zero placeholders, patched in place by patch().
struct CopyPayload {
  struct Row {
    std::size_t slot, queue_id, seq, id, run_at, created;  // offsets; run_at may be kNoPatch
  };
  std::string data;
  std::vector<Row> rows;

  // Writes the reservation's values into row r: ready slot, the queue's id, lane_seq, job
  // id, and the transaction time (micros since the Unix epoch) as created_at and, for rows
  // without their own, run_at.
  void patch(std::size_t r, int slot, std::int32_t queue_id, std::int64_t seq, std::int64_t id,
             std::int64_t tx_micros);
};

// The rows `rows` (indexes into `jobs`) of one lane, in that order; reservation values
// (the queue's id among them: a queue's first lane gives it one) are zero placeholders
// until patch().
CopyPayload encode_copy_rows(int priority, int shard, std::span<const std::size_t> rows,
                             std::span<const NewJob> jobs);

// `sql` with the quoted literals `literals` for $1..$n, for statements sent without
// parameters (the COPY script). Comments are copied as they are: a literal must never
// land in one, where a newline inside it would end the comment. Throws awa::Error for a
// $n with no value.
std::string bind_literals(std::string_view sql, std::span<const std::string> literals);

}  // namespace awa::storage
