// COPY ... FROM STDIN writer.
//
// Text format: row() escapes each field (backslash, tab, newline, carriage return and
// the other control characters) and writes NULL as \N, so any string round-trips.
// Binary format: begin with "COPY t (...) FROM STDIN (FORMAT binary)" and use the
// binary_* field writers between begin_row()/end_row(); values must match the column types.
// Data is buffered and sent in large chunks. finish() ends the COPY and returns the row
// count; destroying an unfinished writer aborts the COPY (nothing is written).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace awa::pg {

class Connection;
class Result;

// Runs `sql`: several statements sent at once (simple query protocol, one round trip to
// start them), some of which may be COPY ... FROM STDIN. Statements are numbered from 0.
// When the server starts statement i as a COPY, copy_data(i) supplies all of its data, in
// the COPY's format (a throw aborts the COPY, so the server fails it and skips the rest);
// every statement's successful result goes to on_result(i, result), which must not throw.
// The server stops at the first failing statement: if its index is below `strict`, the
// error is thrown once the connection is idle again; otherwise its message is returned.
// Without an explicit BEGIN the statements form one implicit transaction; with one, a
// failure leaves the transaction block aborted for the caller to roll back.
std::optional<std::string> run_script(Connection& conn, std::string_view sql, std::size_t strict,
                                      const std::function<std::string(std::size_t)>& copy_data,
                                      const std::function<void(std::size_t, Result&&)>& on_result);

class CopyWriter {
 public:
  enum class Format { kText, kBinary };

  CopyWriter(Connection& conn, std::string_view copy_sql);
  CopyWriter(CopyWriter&&) noexcept;
  CopyWriter(const CopyWriter&) = delete;
  ~CopyWriter();

  Format format() const noexcept { return format_; }

  // Text format: one row, one optional per column (nullopt = NULL).
  void row(std::span<const std::optional<std::string_view>> fields);

  // Binary format.
  void begin_row(std::int16_t fields);
  void binary_null();
  void binary_int16(std::int16_t v);
  void binary_int32(std::int32_t v);
  void binary_int64(std::int64_t v);
  void binary_bool(bool v);
  void binary_text(std::string_view v);   // text, varchar
  void binary_bytea(std::string_view v);  // bytea
  void binary_jsonb(std::string_view json_text);
  void binary_timestamptz(std::int64_t micros_since_unix_epoch);

  // Ends the COPY; returns the number of rows the server stored. Throws the server's
  // error (e.g. a constraint violation) if the COPY failed; then nothing was stored.
  std::int64_t finish();

 private:
  void flush_if_large();
  void send_buffer();
  Connection* conn_;
  Format format_;
  std::string buffer_;
  bool active_ = true;
};

}  // namespace awa::pg
