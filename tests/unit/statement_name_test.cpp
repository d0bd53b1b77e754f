// The prepared-statement names of exec_cached: one name per statement text, and a
// different name whenever any byte differs, the tail bytes included.
#include <gtest/gtest.h>

#include <cstddef>
#include <set>
#include <string>

#include "pg/connection.hpp"

namespace awa::pg {
namespace {

TEST(StatementNameTest, HasTheDocumentedFormAndIsDeterministic) {
  const std::string sql = "SELECT 1";
  const std::string name = Connection::cached_statement_name(sql);
  ASSERT_EQ(name.size(), 20u) << name;
  EXPECT_EQ(name.rfind("awa_", 0), 0u) << name;
  EXPECT_EQ(name.find_first_not_of("0123456789abcdef", 4), std::string::npos) << name;
  EXPECT_EQ(Connection::cached_statement_name(std::string(sql)), name);
}

// A statement of sql/queries/ carries its file's name in a first comment line (the build
// adds it): the prepared statement is named after it, within PostgreSQL's 63 bytes.
TEST(StatementNameTest, AQueryFileStatementIsNamedAfterItsFile) {
  const std::string sql = "-- awa:enqueue/insert_lane\nSELECT 1";
  const std::string name = Connection::cached_statement_name(sql);
  ASSERT_EQ(name.rfind("awa_enqueue_insert_lane_", 0), 0u) << name;
  EXPECT_EQ(name.size(), std::string("awa_enqueue_insert_lane_").size() + 16) << name;
  EXPECT_NE(Connection::cached_statement_name("-- awa:enqueue/insert_lane\nSELECT 2"), name);
  const std::string long_tag = "-- awa:" + std::string(100, 'x') + "\nSELECT 1";
  EXPECT_LE(Connection::cached_statement_name(long_tag).size(), 63u);
  EXPECT_EQ(Connection::cached_statement_name("-- awa:Odd Name!\nSELECT 1").substr(0, 14),
            "awa__dd__ame__");
}

TEST(StatementNameTest, EveryOneByteChangeAndEveryLengthGetsItsOwnName) {
  // Guards the word-at-a-time hash: a byte in the last, partial word must count, and so
  // must the length (texts that differ only by trailing NULs).
  const std::string base =
      "SELECT job_id, kind FROM ready_entries WHERE queue = $1 "
      "ORDER BY lane_seq";  // 73 bytes: nine words and a partial one
  std::set<std::string> names;
  std::size_t texts = 0;
  for (std::size_t len = 0; len <= base.size(); ++len) {
    names.insert(Connection::cached_statement_name(base.substr(0, len)));
    ++texts;
  }
  for (std::size_t pos = 0; pos < base.size(); ++pos) {
    std::string changed = base;
    changed[pos] = static_cast<char>(changed[pos] ^ 1);
    names.insert(Connection::cached_statement_name(changed));
    ++texts;
  }
  for (std::size_t zeros = 1; zeros <= 8; ++zeros) {
    names.insert(Connection::cached_statement_name(base + std::string(zeros, '\0')));
    ++texts;
  }
  EXPECT_EQ(names.size(), texts);
}

}  // namespace
}  // namespace awa::pg
