// Admin::setup_roles: the three least-privilege roles (sql/roles/).
#include <optional>

#include "awa/admin.hpp"
#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/pg_array.hpp"

namespace awa {
namespace {

// 63 (NAMEDATALEN - 1) minus the longest suffix, "_producer".
constexpr std::size_t kMaxPrefix = 54;

void validate_prefix(std::string_view prefix) {
  const auto lower_or_underscore = [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; };
  bool ok = !prefix.empty() && prefix.size() <= kMaxPrefix && lower_or_underscore(prefix.front());
  for (const char c : prefix) ok = ok && (lower_or_underscore(c) || (c >= '0' && c <= '9'));
  if (!ok) {
    throw InvalidArgument("invalid role prefix '" + std::string(prefix) + "': use 1-" +
                          std::to_string(kMaxPrefix) +
                          " lower-case letters, digits or underscores, starting with a letter "
                          "or underscore (the roles are <prefix>_producer, _worker, _admin)");
  }
}

void replace_all(std::string& text, std::string_view token, std::string_view value) {
  for (auto pos = text.find(token); pos != std::string::npos;
       pos = text.find(token, pos + value.size())) {
    text.replace(pos, token.size(), value);
  }
}

}  // namespace

RolesReport Admin::setup_roles(Connection& conn, std::string_view prefix) const {
  validate_prefix(prefix);
  const std::string p(prefix);
  const std::string names[] = {p + "_producer", p + "_worker", p + "_admin"};
  // Validated above: plain lower-case identifiers, and never keywords given the suffixes.
  const auto render = [&](std::string_view file) {
    std::string text = sql::render(sql::file_named(file), quoted_);
    replace_all(text, "{producer}", names[0]);
    replace_all(text, "{worker}", names[1]);
    replace_all(text, "{admin}", names[2]);
    return text;
  };
  storage::ArrayLiteral array;
  for (const auto& n : names) array.add(n);
  const std::string role_array = std::move(array).finish();

  auto& pg = pg::native(conn);
  std::optional<Transaction> tx;
  if (!conn.in_transaction()) tx.emplace(conn);
  pg.exec(sql::file("roles/lock.sql"));
  const auto existing = pg.exec(sql::file("roles/existing.sql"), pg::make_params(role_array));
  pg.exec(render("roles/create.sql"));
  pg.exec(render("roles/grants.sql"));
  const auto grants = pg.exec(render("roles/summary.sql"), pg::make_params(role_array));

  RolesReport report;
  report.schema = schema_;
  for (const auto& n : names) {
    RoleSetup role;
    role.role = n;
    role.created = true;
    for (int r = 0; r < existing.rows(); ++r) {
      if (existing.get<std::string>(r, 0) == n) role.created = false;
    }
    for (int r = 0; r < grants.rows(); ++r) {
      if (grants.get<std::string>(r, 0) != n) continue;
      role.grants.push_back(RoleGrant{grants.get<std::string>(r, 1), grants.get<std::string>(r, 2),
                                      grants.get<std::string>(r, 3)});
    }
    report.roles.push_back(std::move(role));
  }
  if (tx) tx->commit();
  return report;
}

}  // namespace awa
