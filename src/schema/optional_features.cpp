#include "schema/optional_features.hpp"

#include <fmt/format.h>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "schema/sql_catalog.hpp"

namespace awa::schema {
namespace {

constexpr std::string_view kOpen = "-- optional(";
constexpr std::string_view kClose = "-- optional }";
constexpr std::string_view kOff = "--off ";

std::string_view trim_left(std::string_view line) {
  const auto at = line.find_first_not_of(" \t");
  return at == std::string_view::npos ? std::string_view{} : line.substr(at);
}

bool opens(std::string_view trimmed) {
  return trimmed.starts_with(kOpen) && trimmed.ends_with("{");
}

}  // namespace

std::string strip_optional_features(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool inside = false;
  int line_no = 0;
  std::size_t open_line = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto end = text.find('\n', pos);
    const auto line = text.substr(pos, end == std::string_view::npos ? text.npos : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    ++line_no;
    const auto trimmed = trim_left(line);
    if (opens(trimmed)) {
      if (inside) {
        throw InvalidArgument(
            fmt::format("line {}: an optional block opens inside the one opened at line {}",
                        line_no, open_line));
      }
      inside = true;
      open_line = static_cast<std::size_t>(line_no);
      continue;
    }
    if (trimmed == kClose) {
      if (!inside) {
        throw InvalidArgument(
            fmt::format("line {}: '{}' closes no optional block", line_no, kClose));
      }
      inside = false;
      continue;
    }
    if (inside) {
      if (!trimmed.starts_with(kOff)) continue;
      out.append(line.substr(0, line.size() - trimmed.size()));  // the indentation
      out.append(trimmed.substr(kOff.size()));
    } else {
      out.append(line);
    }
    out.push_back('\n');
  }
  if (inside) {
    throw InvalidArgument(
        fmt::format("the optional block opened at line {} is never closed", open_line));
  }
  return out;
}

int install_without_optional_features(pg::Connection& conn, std::string_view schema) {
  const std::string quoted = sql::quote_schema(schema);
  int installed = 0;
  for (const auto& f : sql::all_files()) {
    if (!f.name.starts_with("functions/") || f.text.find(kOpen) == std::string_view::npos) {
      continue;
    }
    conn.exec(sql::render(strip_optional_features(f.text), quoted));
    ++installed;
  }
  // CREATE OR REPLACE resets a function's SET clauses and SECURITY DEFINER: put the
  // settings the Migrator gives every function back.
  conn.exec(sql::query("security/function_settings.sql", quoted));
  return installed;
}

}  // namespace awa::schema
