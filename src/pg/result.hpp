// A query result: owns a PGresult, move-only, with typed null-aware accessors.
//
// Values come in text format, or in binary format for the statements that ask for it
// (Format::kBinary: the claim, whose result is decoded per row on the hot path; binary
// saves the server's output functions and our parsing, timestamps above all). The
// accessors read either: a binary column is decoded by its type OID, for the types
// get<T> lists. Accessors throw awa::Error when a column is missing, a value is NULL where
// a non-optional type was asked for, or the value does not read as the requested type.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

struct pg_result;  // PGresult, from libpq-fe.h; kept out of every other header

namespace awa::pg {

// Owns a raw PGresult (PQclear on destruction): for the code that reads results before
// they become a Result (the connection's exec, the pipeline, COPY).
struct ResultDeleter {
  void operator()(pg_result* r) const noexcept;
};
using ResultPtr = std::unique_ptr<pg_result, ResultDeleter>;

// The format a statement's result columns come in (libpq's resultFormat).
enum class Format { kText = 0, kBinary = 1 };

// Raw bytes of a bytea value.
struct Bytea {
  std::string bytes;
  friend bool operator==(const Bytea&, const Bytea&) = default;
};

class Result {
 public:
  Result() = default;
  explicit Result(pg_result* res);  // takes ownership
  Result(Result&&) noexcept = default;
  Result& operator=(Result&&) noexcept = default;

  int rows() const;
  int columns() const;
  bool empty() const { return rows() == 0; }
  // Rows affected by INSERT/UPDATE/DELETE/COPY (PQcmdTuples), 0 when not applicable.
  std::int64_t affected_rows() const;
  std::string_view column_name(int col) const;
  // The command tag, e.g. "INSERT 0 1" or "ROLLBACK" (PQcmdStatus).
  std::string_view command_status() const;
  // For src/pg internals.
  pg_result* native() const noexcept { return res_.get(); }

  int column(std::string_view name) const;  // throws if there is no such column
  bool is_null(int row, int col) const;
  // The value's text, "" for NULL. A binary column has text only for a textual type
  // (text, varchar, char, name, json, jsonb); for any other type text() throws.
  std::string_view text(int row, int col) const;
  bool binary(int col) const;  // the column came in binary format

  // T is one of: std::string, std::string_view (valid while the Result lives), bool,
  // std::int16_t, std::int32_t, std::int64_t, double, std::chrono::system_clock::time_point
  // (from a timestamptz rendered with an ISO DateStyle and UTC TimeZone, or binary), or
  // Bytea (bytea decoded from hex, or binary). A binary integer column of any width reads
  // as any integer type it fits.
  template <class T>
  T get(int row, int col) const;
  template <class T>
  std::optional<T> get_opt(int row, int col) const {
    if (is_null(row, col)) return std::nullopt;
    return get<T>(row, col);
  }
  template <class T>
  T get(int row, std::string_view name) const {
    return get<T>(row, column(name));
  }
  template <class T>
  std::optional<T> get_opt(int row, std::string_view name) const {
    return get_opt<T>(row, column(name));
  }

 private:
  template <class T>
  T get_binary(int row, int col) const;
  ResultPtr res_;
};

// get<T> is defined in result.cpp for exactly these types.
extern template std::string Result::get<std::string>(int, int) const;
extern template std::string_view Result::get<std::string_view>(int, int) const;
extern template bool Result::get<bool>(int, int) const;
extern template std::int16_t Result::get<std::int16_t>(int, int) const;
extern template std::int32_t Result::get<std::int32_t>(int, int) const;
extern template std::int64_t Result::get<std::int64_t>(int, int) const;
extern template double Result::get<double>(int, int) const;
extern template std::chrono::system_clock::time_point
Result::get<std::chrono::system_clock::time_point>(int, int) const;
extern template Bytea Result::get<Bytea>(int, int) const;

}  // namespace awa::pg
