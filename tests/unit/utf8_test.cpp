#include "storage/utf8.hpp"

#include <gtest/gtest.h>

#include <string>

namespace awa::storage {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";
const std::string kEllipsis = "\xE2\x80\xA6";

TEST(StorableTextTest, WellFormedTextIsKeptWhole) {
  EXPECT_EQ(storable_text("", 10), "");
  EXPECT_EQ(storable_text("plain", 5), "plain");  // exactly max_bytes: no cut
  EXPECT_EQ(storable_text("\xc3\xbcnic\xc3\xb6"
                          "de \xf0\x9f\x98\x80",
                          100),
            "\xc3\xbcnic\xc3\xb6"
            "de \xf0\x9f\x98\x80");
}

TEST(StorableTextTest, InvalidBytesAndNulBecomeReplacementCharacters) {
  EXPECT_EQ(storable_text("a\xff"
                          "b",
                          100),
            "a" + kFffd + "b");
  EXPECT_EQ(storable_text(std::string("a\0b", 3), 100), "a" + kFffd + "b");
  EXPECT_EQ(storable_text("\xed\xa0\x80", 100), kFffd + kFffd + kFffd);  // a surrogate
  EXPECT_EQ(storable_text("x\xe2\x82", 100), "x" + kFffd + kFffd);       // truncated
}

TEST(StorableTextTest, LongTextIsCutAtACharacterBoundaryWithAnEllipsis) {
  const std::string out = storable_text(std::string(100, 'a'), 10);
  EXPECT_EQ(out, std::string(7, 'a') + kEllipsis);
  EXPECT_EQ(out.size(), 10u);
  // A 4-byte character that would cross the limit is left out whole.
  EXPECT_EQ(storable_text("abcde\xf0\x9f\x98\x80"
                          "fghij",
                          10),
            "abcde" + kEllipsis);
  EXPECT_FALSE(invalid_utf8_at(storable_text(std::string(50, '\xff'), 20)).has_value());
  EXPECT_LE(storable_text(std::string(50, '\xff'), 20).size(), 20u);
}

}  // namespace
}  // namespace awa::storage
