#include "pg/copy.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <limits>
#include <memory>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/error_map.hpp"
#include "pg/result.hpp"

namespace awa::pg {
namespace {

constexpr std::size_t kChunk = 1 << 20;  // one PQputCopyData call per ~1 MiB

// 2000-01-01 00:00:00 UTC, the epoch of PostgreSQL's binary timestamps, in Unix micros.
constexpr std::int64_t kPgEpochMicros = 946'684'800'000'000;

constexpr char kBinaryHeader[] = "PGCOPY\n\377\r\n";  // + the implicit '\0' = 11 bytes

void put_u16(std::string& out, std::uint16_t v) {
  out += static_cast<char>(v >> 8);
  out += static_cast<char>(v & 0xff);
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
}

void put_i32(std::string& out, std::int32_t v) { put_u32(out, static_cast<std::uint32_t>(v)); }

void put_length(std::string& out, std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw InvalidArgument("COPY field of " + std::to_string(n) + " bytes exceeds 2 GiB");
  }
  put_i32(out, static_cast<std::int32_t>(n));
}

// COPY text format: the field delimiter, the row end and the escape character must be
// escaped, and so must other control characters so the data survives any reading.
void append_escaped(std::string& out, std::string_view field) {
  static constexpr char kOctal[] = "01234567";
  for (const char c : field) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\v':
        out += "\\v";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          // Always three octal digits, so a following digit is never read as part of it.
          out += '\\';
          out += kOctal[(u >> 6) & 7];
          out += kOctal[(u >> 3) & 7];
          out += kOctal[u & 7];
        } else {
          out += c;
        }
    }
  }
}

// The first error among the results still pending; PGRES_COMMAND_OK's row count.
struct Outcome {
  std::int64_t rows = 0;
  std::exception_ptr error;
};

Outcome collect(PGconn* conn, std::string_view context) {
  Outcome out;
  // A finished COPY yields one result, then NULL; the bound guards against a libpq that
  // keeps handing out results on a broken connection.
  for (int i = 0; i < 1000; ++i) {
    ResultPtr res(PQgetResult(conn));
    if (!res) return out;
    const auto status = PQresultStatus(res.get());
    if (status == PGRES_COMMAND_OK) {
      const std::string_view tuples = PQcmdTuples(res.get());
      std::int64_t n = 0;
      for (const char c : tuples) n = n * 10 + (c - '0');
      out.rows = n;
    } else if (status == PGRES_COPY_IN) {
      // Still in COPY state (the end did not get through): give up on this COPY.
      PQputCopyEnd(conn, "aborted");
    } else if (!out.error) {
      out.error = make_result_error(res.get(), conn, context);
    }
    if (PQstatus(conn) != CONNECTION_OK && !out.error) {
      try {
        throw_connection_error(conn, context);
      } catch (...) {
        out.error = std::current_exception();
      }
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> run_script(Connection& conn, std::string_view sql, std::size_t strict,
                                      const std::function<std::string(std::size_t)>& copy_data,
                                      const std::function<void(std::size_t, Result&&)>& on_result) {
  PGconn* c = conn.native();
  if (c == nullptr) throw Error("script on a closed (moved-from) connection");
  const std::string context = statement_context(sql);
  const std::string text(sql);
  if (PQsendQuery(c, text.c_str()) != 1) throw_connection_error(c, context);

  std::size_t index = 0;
  std::exception_ptr error;
  std::optional<std::string> late;
  bool failed = false;
  // Each statement yields one result (a COPY two: COPY_IN, then its end); the bound only
  // guards against a libpq that keeps handing out results on a broken connection.
  for (std::size_t guard = 0; guard < 2 * text.size() + 16; ++guard) {
    ResultPtr res(PQgetResult(c));
    if (!res) {
      if (PQstatus(c) != CONNECTION_OK) throw_connection_error(c, context);
      break;
    }
    const auto status = PQresultStatus(res.get());
    if (status == PGRES_COPY_IN) {
      std::string data;
      const char* abort_reason = nullptr;
      if (failed) {
        abort_reason = "aborted";
      } else {
        try {
          data = copy_data(index);
        } catch (...) {
          error = std::current_exception();
          failed = true;
          abort_reason = "aborted by the client";
        }
      }
      std::string_view rest = data;
      while (abort_reason == nullptr && !rest.empty()) {
        const std::size_t n = std::min(rest.size(), kChunk);
        if (PQputCopyData(c, rest.data(), static_cast<int>(n)) != 1) {
          if (PQstatus(c) != CONNECTION_OK) throw_connection_error(c, context);
          abort_reason = "aborted";  // the server's own error follows
          break;
        }
        rest.remove_prefix(n);
      }
      if (PQputCopyEnd(c, abort_reason) != 1) throw_connection_error(c, context);
      continue;  // the COPY's end (or its error) is the next result
    }
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) {
      if (!failed) on_result(index, Result(res.release()));
      ++index;
      continue;
    }
    if (PQstatus(c) != CONNECTION_OK) throw_connection_error(c, context);
    if (!failed) {
      failed = true;
      if (index < strict) {
        error = make_result_error(res.get(), c, context);
      } else {
        late = describe_result_error(res.get(), c, context).message;
      }
    }
  }
  if (error) std::rethrow_exception(error);
  return late;
}

CopyWriter::CopyWriter(Connection& conn, std::string_view copy_sql) : conn_(&conn) {
  PGconn* c = conn.native();
  if (c == nullptr) throw Error("COPY on a closed (moved-from) connection");
  const std::string sql(copy_sql);
  ResultPtr res(PQexec(c, sql.c_str()));
  if (!res) throw_connection_error(c, statement_context(copy_sql));
  const auto status = PQresultStatus(res.get());
  if (status != PGRES_COPY_IN) {
    active_ = false;
    if (status == PGRES_FATAL_ERROR || status == PGRES_BAD_RESPONSE ||
        status == PGRES_NONFATAL_ERROR) {
      throw_result_error(res.get(), c, statement_context(copy_sql));
    }
    // Some other statement: run it through to the end so the connection is idle again.
    res.reset();
    collect(c, {});
    throw Error(statement_context(copy_sql) + ": not a COPY ... FROM STDIN statement");
  }
  // For COPY, PQbinaryTuples reports the overall format the server expects: no need to
  // parse the statement's options.
  format_ = PQbinaryTuples(res.get()) != 0 ? Format::kBinary : Format::kText;
  buffer_.reserve(kChunk + kChunk / 8);
  if (format_ == Format::kBinary) {
    buffer_.append(kBinaryHeader, sizeof kBinaryHeader);  // signature incl. its '\0'
    put_u32(buffer_, 0);                                  // flags: no OIDs
    put_u32(buffer_, 0);                                  // header extension length
  }
}

CopyWriter::CopyWriter(CopyWriter&& other) noexcept
    : conn_(other.conn_),
      format_(other.format_),
      buffer_(std::move(other.buffer_)),
      active_(other.active_) {
  other.active_ = false;
}

CopyWriter::~CopyWriter() {
  if (!active_) return;
  PGconn* c = conn_->native();
  // The error message makes the server fail the COPY, so nothing of it is stored.
  if (c != nullptr && PQputCopyEnd(c, "aborted") == 1) collect(c, {});
}

void CopyWriter::row(std::span<const std::optional<std::string_view>> fields) {
  if (format_ != Format::kText) throw Error("CopyWriter::row() needs a text-format COPY");
  bool first = true;
  for (const auto& f : fields) {
    if (!first) buffer_ += '\t';
    first = false;
    if (f) {
      append_escaped(buffer_, *f);
    } else {
      buffer_ += "\\N";
    }
  }
  buffer_ += '\n';
  flush_if_large();
}

void CopyWriter::begin_row(std::int16_t fields) {
  if (format_ != Format::kBinary) throw Error("CopyWriter::begin_row() needs FORMAT binary");
  flush_if_large();
  put_u16(buffer_, static_cast<std::uint16_t>(fields));
}

void CopyWriter::binary_null() { put_i32(buffer_, -1); }

void CopyWriter::binary_int16(std::int16_t v) {
  put_i32(buffer_, 2);
  put_u16(buffer_, static_cast<std::uint16_t>(v));
}

void CopyWriter::binary_int32(std::int32_t v) {
  put_i32(buffer_, 4);
  put_u32(buffer_, static_cast<std::uint32_t>(v));
}

void CopyWriter::binary_int64(std::int64_t v) {
  put_i32(buffer_, 8);
  put_u64(buffer_, static_cast<std::uint64_t>(v));
}

void CopyWriter::binary_bool(bool v) {
  put_i32(buffer_, 1);
  buffer_ += v ? '\1' : '\0';
}

void CopyWriter::binary_text(std::string_view v) {
  put_length(buffer_, v.size());
  buffer_.append(v);
}

void CopyWriter::binary_bytea(std::string_view v) {
  put_length(buffer_, v.size());
  buffer_.append(v);
}

void CopyWriter::binary_jsonb(std::string_view json_text) {
  put_length(buffer_, json_text.size() + 1);
  buffer_ += '\1';  // jsonb binary format version
  buffer_.append(json_text);
}

void CopyWriter::binary_timestamptz(std::int64_t micros_since_unix_epoch) {
  put_i32(buffer_, 8);
  put_u64(buffer_, static_cast<std::uint64_t>(micros_since_unix_epoch - kPgEpochMicros));
}

void CopyWriter::flush_if_large() {
  if (buffer_.size() >= kChunk) send_buffer();
}

void CopyWriter::send_buffer() {
  if (!active_) throw Error("COPY is already finished");
  if (buffer_.empty()) return;
  PGconn* c = conn_->native();
  std::string_view data = buffer_;
  while (!data.empty()) {
    const std::size_t n = std::min(data.size(), kChunk);
    if (PQputCopyData(c, data.data(), static_cast<int>(n)) != 1) {
      // The server may have ended the COPY with an error (reported as "no COPY in
      // progress" by libpq): surface the server's error rather than libpq's.
      active_ = false;
      buffer_.clear();
      if (PQstatus(c) != CONNECTION_OK) throw_connection_error(c, "COPY");
      PQputCopyEnd(c, "aborted");
      Outcome out = collect(c, "COPY");
      if (out.error) std::rethrow_exception(out.error);
      throw_connection_error(c, "COPY");
    }
    data.remove_prefix(n);
  }
  buffer_.clear();
}

std::int64_t CopyWriter::finish() {
  if (!active_) throw Error("COPY is already finished");
  if (format_ == Format::kBinary) put_u16(buffer_, 0xffff);  // trailer: field count -1
  send_buffer();
  active_ = false;
  PGconn* c = conn_->native();
  if (PQputCopyEnd(c, nullptr) != 1) throw_connection_error(c, "ending COPY");
  Outcome out = collect(c, "COPY");
  if (out.error) std::rethrow_exception(out.error);
  return out.rows;
}

}  // namespace awa::pg
