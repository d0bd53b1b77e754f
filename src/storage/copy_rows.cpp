#include "storage/copy_rows.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "awa/error.hpp"
#include "storage/job_metadata.hpp"

namespace awa::storage {
namespace {

// 2000-01-01 00:00:00 UTC, the epoch of PostgreSQL's binary timestamps, in Unix micros.
constexpr std::int64_t kPgEpochMicros = 946'684'800'000'000;
constexpr std::uint32_t kTextOid = 25;

void put_be(std::string& out, std::uint64_t v, int bytes) {
  for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) {
    out += static_cast<char>((v >> shift) & 0xff);
  }
}
void put16(std::string& out, std::int64_t v) { put_be(out, static_cast<std::uint64_t>(v), 2); }
void put32(std::string& out, std::int64_t v) { put_be(out, static_cast<std::uint64_t>(v), 4); }
void put64(std::string& out, std::int64_t v) { put_be(out, static_cast<std::uint64_t>(v), 8); }

void patch_be(std::string& data, std::size_t at, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) {
    data[at + static_cast<std::size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

// Field lengths are int32; validate.cpp caps args at 1 MiB and the rest lower.
void put_bytes(std::string& out, std::string_view v) {
  put32(out, static_cast<std::int64_t>(v.size()));
  out.append(v);
}
void put_jsonb(std::string& out, std::string_view json_text) {
  put32(out, static_cast<std::int64_t>(json_text.size() + 1));
  out += '\1';  // jsonb binary format version
  out.append(json_text);
}
// text[] in array_send's format: one dimension, no NULL elements.
void put_text_array(std::string& out, const std::vector<std::string>& items) {
  std::size_t size = 20;
  for (const auto& s : items) size += 4 + s.size();
  put32(out, static_cast<std::int64_t>(size));
  put32(out, 1);  // dimensions
  put32(out, 0);  // flags: no NULLs
  put32(out, kTextOid);
  put32(out, static_cast<std::int64_t>(items.size()));
  put32(out, 1);  // lower bound
  for (const auto& s : items) put_bytes(out, s);
}

std::int64_t pg_micros(std::chrono::system_clock::time_point tp) {
  return std::chrono::duration_cast<std::chrono::microseconds>(tp.time_since_epoch()).count() -
         kPgEpochMicros;
}

}  // namespace

void CopyPayload::patch(std::size_t r, int slot, std::int32_t queue_id, std::int64_t seq,
                        std::int64_t id, std::int64_t tx_micros) {
  const Row& row = rows[r];
  const auto pg_tx = static_cast<std::uint64_t>(tx_micros - kPgEpochMicros);
  patch_be(data, row.slot, static_cast<std::uint64_t>(slot), 2);
  patch_be(data, row.queue_id, static_cast<std::uint32_t>(queue_id), 4);
  patch_be(data, row.seq, static_cast<std::uint64_t>(seq), 8);
  patch_be(data, row.id, static_cast<std::uint64_t>(id), 8);
  if (row.run_at != kNoPatch) patch_be(data, row.run_at, pg_tx, 8);
  patch_be(data, row.created, pg_tx, 8);
}

CopyPayload encode_copy_rows(int priority, int shard, std::span<const std::size_t> rows,
                             std::span<const NewJob> jobs) {
  CopyPayload p;
  auto& d = p.data;
  p.rows.reserve(rows.size());
  d.reserve(32 + rows.size() * 160);
  d.append("PGCOPY\n\377\r\n", 11);  // signature, its '\0' included
  put32(d, 0);                       // flags
  put32(d, 0);                       // header extension
  for (const auto i : rows) {
    const auto& j = jobs[i];
    CopyPayload::Row row{};
    put16(d, 14);
    put32(d, 2);
    row.slot = d.size();
    put16(d, 0);
    put32(d, 4);
    row.queue_id = d.size();
    put32(d, 0);
    put32(d, 2);
    put16(d, priority);
    put32(d, 2);
    put16(d, shard);
    put32(d, 8);
    row.seq = d.size();
    put64(d, 0);
    put32(d, 8);
    row.id = d.size();
    put64(d, 0);
    put_bytes(d, j.kind);
    put_jsonb(d, j.args_json);
    put32(d, 2);
    put16(d, j.opts.max_attempts);
    put32(d, 8);
    if (j.opts.run_at) {
      row.run_at = kNoPatch;
      put64(d, pg_micros(*j.opts.run_at));
    } else {
      row.run_at = d.size();
      put64(d, 0);
    }
    put32(d, 8);
    row.created = d.size();
    put64(d, 0);
    if (j.opts.ordering_key) {
      put_bytes(d, *j.opts.ordering_key);
    } else {
      put32(d, -1);
    }
    if (const auto meta = metadata_text(j)) {
      put_jsonb(d, *meta);
    } else {
      put32(d, -1);
    }
    if (j.opts.tags.empty()) {
      put32(d, -1);
    } else {
      put_text_array(d, j.opts.tags);
    }
    p.rows.push_back(row);
  }
  put16(d, -1);  // trailer
  return p;
}

std::string bind_literals(std::string_view sql, std::span<const std::string> literals) {
  std::string out;
  out.reserve(sql.size() + 64);
  for (std::size_t i = 0; i < sql.size(); ++i) {
    if (sql.compare(i, 2, "--") == 0) {
      const auto end = std::min(sql.find('\n', i), sql.size());
      out.append(sql.substr(i, end - i));
      i = end - 1;
      continue;
    }
    if (sql[i] == '$' && i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9') {
      std::size_t n = 0;
      std::size_t k = i + 1;
      while (k < sql.size() && sql[k] >= '0' && sql[k] <= '9')
        n = n * 10 + static_cast<std::size_t>(sql[k++] - '0');
      if (n == 0 || n > literals.size()) {
        throw Error(
            fmt::format("bind_literals: ${} in a statement given {} values", n, literals.size()));
      }
      out += literals[n - 1];
      i = k - 1;
      continue;
    }
    out += sql[i];
  }
  return out;
}

}  // namespace awa::storage
