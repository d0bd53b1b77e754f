#include "schema/sql_catalog.hpp"

#include <algorithm>
#include <cctype>

#include "awa/error.hpp"

namespace awa::sql {

std::string_view file(SqlName name) { return file_named(name.view()); }

std::string_view file_named(std::string_view name) {
  const auto files = all_files();
  const auto it = std::lower_bound(files.begin(), files.end(), name,
                                   [](const SqlFile& f, std::string_view n) { return f.name < n; });
  if (it == files.end() || it->name != name) {
    throw Error("embedded SQL file not found: " + std::string(name));
  }
  return it->text;
}

std::string render(std::string_view text, std::string_view quoted_schema) {
  static constexpr std::string_view kToken = "{schema}";
  std::string out;
  out.reserve(text.size() + 64);
  std::size_t pos = 0;
  while (true) {
    const auto hit = text.find(kToken, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(quoted_schema);
    pos = hit + kToken.size();
  }
  out.append(text.substr(pos));
  return out;
}

std::string quote_schema(std::string_view schema) {
  const bool ok = !schema.empty() && schema.size() <= 63 &&
                  !std::isdigit(static_cast<unsigned char>(schema.front())) &&
                  std::all_of(schema.begin(), schema.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                  });
  if (!ok) {
    throw InvalidArgument("invalid schema name '" + std::string(schema) +
                          "': use 1-63 letters, digits or underscores, not starting with a digit");
  }
  // Built by appending: GCC 12 warns (-Wrestrict, a false positive) on "\"" + s + "\"".
  std::string quoted;
  quoted.reserve(schema.size() + 2);
  quoted.push_back('"');
  quoted.append(schema);
  quoted.push_back('"');
  return quoted;
}

std::string query(SqlName name, std::string_view quoted_schema) {
  return render(file(name), quoted_schema);
}

}  // namespace awa::sql
