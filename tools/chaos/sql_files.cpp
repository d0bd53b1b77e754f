#include "sql_files.hpp"

#include <algorithm>
#include <string>

#include "awa/error.hpp"

namespace chaos::sql {

std::string_view file(std::string_view name) {
  const auto files = all_files();
  const auto it = std::lower_bound(files.begin(), files.end(), name,
                                   [](const SqlFile& f, std::string_view n) { return f.name < n; });
  if (it == files.end() || it->name != name) {
    throw awa::Error("embedded chaos SQL file not found: " + std::string(name));
  }
  return it->text;
}

}  // namespace chaos::sql
