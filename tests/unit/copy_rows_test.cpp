// The COPY path's helpers (storage/copy_rows.hpp): literal binding of the COPY script and
// the binary row encoding's placeholders.
#include "storage/copy_rows.hpp"

#include <gtest/gtest.h>

#include "awa/error.hpp"

namespace awa::storage {
namespace {

TEST(BindLiteralsTest, ReplacesPlaceholdersAndKeepsComments) {
  const std::vector<std::string> lits{"'q'", "2", "'it''s'"};
  EXPECT_EQ(bind_literals("SELECT f($1, $2) -- $3 stays\nWHERE x = $3", lits),
            "SELECT f('q', 2) -- $3 stays\nWHERE x = 'it''s'");
  EXPECT_EQ(bind_literals("SELECT $10", std::vector<std::string>(10, "1")), "SELECT 1");
}

TEST(BindLiteralsTest, APlaceholderWithoutAValueIsAnError) {
  const std::vector<std::string> lits{"1", "2"};
  EXPECT_THROW(bind_literals("SELECT $3", lits), Error);
  EXPECT_THROW(bind_literals("SELECT $0", lits), Error);
}

TEST(EncodeCopyRowsTest, PlaceholdersArePatchedInPlace) {
  std::vector<NewJob> jobs{NewJob("k", nlohmann::json::object(), InsertOpts{})};
  const std::vector<std::size_t> rows{0};
  auto p = encode_copy_rows(2, 3, rows, jobs);
  ASSERT_EQ(p.rows.size(), 1U);
  const auto size = p.data.size();
  EXPECT_EQ(p.data.compare(0, 11, std::string("PGCOPY\n\377\r\n\0", 11)), 0);
  // lane_seq 0x0102030405060708 lands big-endian at its offset; the size never changes.
  p.patch(0, 1, 0x0a0b0c0d, 0x0102030405060708, 42, 946'684'800'000'000 + 5);
  EXPECT_EQ(p.data.size(), size);
  EXPECT_EQ(p.data.substr(p.rows[0].queue_id, 4), std::string("\x0a\x0b\x0c\x0d", 4));
  EXPECT_EQ(p.data.substr(p.rows[0].seq, 8), std::string("\1\2\3\4\5\6\7\10", 8));
  EXPECT_EQ(p.data.substr(p.rows[0].id, 8), std::string("\0\0\0\0\0\0\0\x2a", 8));
  // created_at: 5 micros past PostgreSQL's epoch (2000-01-01).
  EXPECT_EQ(p.data.substr(p.rows[0].created, 8), std::string("\0\0\0\0\0\0\0\5", 8));
}

}  // namespace
}  // namespace awa::storage
