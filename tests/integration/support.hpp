// Shared fixtures for the database tests.
//
// Every test gets its own schema on the server DATABASE_URL names, so tests can run in
// parallel (ctest -j) and leave nothing behind. A missing DATABASE_URL fails the test:
// database tests are never silently skipped.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "pg/connection.hpp"

namespace awa::testing {

// Polls `pred` until it holds or `timeout` passes; true when it held. The pause between
// polls only paces them: the result never depends on it.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10),
                std::chrono::milliseconds step = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(step);
  }
}

// $DATABASE_URL; throws std::runtime_error when it is not set.
std::string database_url();

// "t_<prefix>_<pid>_<counter>_<random>", lower case, at most 63 bytes, unique per call.
std::string unique_schema_name(std::string_view prefix);

// Connect options for DATABASE_URL.
pg::ConnectOptions test_connect_options();

// Gives each test its own schema, search_path set on conn().
// Derived fixtures add set-up through SetUpSchema() (runs after the schema exists and
// search_path is set) instead of overriding SetUp().
class PgTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Hook for derived fixtures (migrations, seed data). Default: nothing.
  virtual void SetUpSchema() {}

  pg::Connection& conn();
  // Another connection with the same search_path.
  pg::Connection connect_new();
  // The quoted schema name, for fully qualified names in SQL.
  std::string quoted_schema() const;

  std::string schema_;
  std::optional<pg::Connection> conn_;

 private:
  bool schema_created_ = false;
};

}  // namespace awa::testing
