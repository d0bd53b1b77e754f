// A small libpq client for the harness's own statements (ledger, faults, marker look-ups):
// the public awa::Connection runs statements but returns no rows.
//
// Move-only; one thread at a time. Every value comes back as text (NULL as nullopt).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

struct pg_conn;

namespace chaos {

using Row = std::vector<std::optional<std::string>>;

class Db {
 public:
  // Throws awa::ConnectionError when the server cannot be reached.
  static Db connect(const std::string& url, const std::string& application_name);
  Db(Db&&) noexcept;
  Db& operator=(Db&&) noexcept;
  ~Db();

  // Runs one statement with text parameters; throws awa::ConnectionError when the
  // connection broke, awa::DatabaseError for any other failure.
  std::vector<Row> query(const std::string& sql, const std::vector<std::string>& params = {});
  // The first column of the first row, or nullopt when there is no row or it is NULL.
  std::optional<std::string> scalar(const std::string& sql,
                                    const std::vector<std::string>& params = {});
  // Runs several statements without parameters (PQexec); same errors as query().
  void script(const std::string& sql);
  bool ok() const;

 private:
  struct Deleter {
    void operator()(pg_conn* c) const noexcept;
  };
  explicit Db(pg_conn* c);
  std::unique_ptr<pg_conn, Deleter> conn_;
};

// Whole number from a text column (0 when NULL).
long long to_ll(const std::optional<std::string>& v);
double to_double(const std::optional<std::string>& v);

}  // namespace chaos
