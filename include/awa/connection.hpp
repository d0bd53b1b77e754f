// A database connection as the public API sees it, for transactional enqueue:
//
//   awa::Connection conn = awa::Connection::connect(url);
//   awa::Transaction tx(conn);
//   conn.execute("UPDATE orders SET state = 'paid' WHERE id = 42");
//   storage.insert(conn, awa::NewJob("send_receipt", {{"order", 42}}));
//   tx.commit();  // the job becomes visible with the order update, or neither does
//
// Move-only; one thread at a time. libpq stays out of this header.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace awa {

namespace detail {
struct ConnectionAccess;
}  // namespace detail

struct ConnectionOptions {
  std::chrono::milliseconds timeout{5000};
  // The URL leads to a transaction-mode pooler (PgBouncer pool_mode = transaction), where
  // consecutive transactions may run on different server sessions shared with other
  // clients: nothing is prepared on the server and no session state is set. Producers
  // and Admin calls then work through the pooler; `awa migrate` and LISTEN still need a
  // direct URL (docs/deployment.md).
  bool pooled = false;
};

class Connection {
 public:
  // Throws ConnectionError when the database cannot be reached within the timeout.
  static Connection connect(const std::string& url,
                            std::chrono::milliseconds timeout = std::chrono::seconds(5));
  static Connection connect(const std::string& url, const ConnectionOptions& options);
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  ~Connection();

  // Runs SQL without parameters (the application's own statements).
  void execute(std::string_view sql);
  bool in_transaction() const;

  struct Impl;

 private:
  friend struct detail::ConnectionAccess;
  explicit Connection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// BEGIN on construction; rolls back on destruction unless commit() was called.
class Transaction {
 public:
  explicit Transaction(Connection& conn);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  // Throws when the server rolled the transaction back instead (an earlier statement
  // failed): a commit that stored nothing never looks like success.
  void commit();
  void rollback();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace awa
