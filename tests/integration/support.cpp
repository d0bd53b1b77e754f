#include "support.hpp"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <random>
#include <stdexcept>

namespace awa::testing {

std::string database_url() {
  const char* url = std::getenv("DATABASE_URL");
  if (url == nullptr || *url == '\0') {
    throw std::runtime_error(
        "DATABASE_URL is not set: run the tests with `make test` (scripts/pg start)");
  }
  return url;
}

std::string unique_schema_name(std::string_view prefix) {
  static std::atomic<unsigned> counter{0};
  static const unsigned salt = std::random_device{}();
  thread_local std::mt19937 rng(salt ^ static_cast<unsigned>(::getpid()));
  char tail[64];
  std::snprintf(tail, sizeof tail, "_%d_%u_%06x", static_cast<int>(::getpid()),
                counter.fetch_add(1), static_cast<unsigned>(rng() & 0xffffff));
  std::string clean;
  for (const char c : prefix) {
    const auto u = static_cast<unsigned char>(c);
    clean += std::isalnum(u) != 0 ? static_cast<char>(std::tolower(u)) : '_';
  }
  const std::size_t room = 63 - 2 - std::char_traits<char>::length(tail);
  if (clean.size() > room) clean.resize(room);
  return "t_" + clean + tail;
}

pg::ConnectOptions test_connect_options() {
  pg::ConnectOptions options;
  options.url = database_url();
  options.application_name = "awa_tests";
  return options;
}

void PgTest::SetUp() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  schema_ = unique_schema_name(info != nullptr ? info->name() : "test");
  conn_.emplace(pg::Connection::connect(test_connect_options()));
  conn_->exec("CREATE SCHEMA " + quoted_schema());
  schema_created_ = true;
  conn_->exec("SET search_path TO " + quoted_schema());
  SetUpSchema();
}

void PgTest::TearDown() {
  conn_.reset();  // release whatever locks the test's session holds
  if (!schema_created_) return;
  try {
    pg::Connection c = pg::Connection::connect(test_connect_options());
    c.exec("DROP SCHEMA IF EXISTS " + quoted_schema() + " CASCADE");
  } catch (const std::exception& e) {
    ADD_FAILURE() << "dropping test schema " << schema_ << ": " << e.what();
  }
}

pg::Connection& PgTest::conn() {
  if (!conn_) throw std::logic_error("PgTest::conn() outside a test");
  return *conn_;
}

pg::Connection PgTest::connect_new() {
  pg::Connection c = pg::Connection::connect(test_connect_options());
  c.exec("SET search_path TO " + quoted_schema());
  return c;
}

std::string PgTest::quoted_schema() const { return "\"" + schema_ + "\""; }

}  // namespace awa::testing
