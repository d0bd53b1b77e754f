// Producer input validation without a database (src/storage/validate.cpp): the UTF-8
// checker against the Unicode standard's table 3-7 and the limits of include/awa/job.hpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "awa/error.hpp"
#include "awa/job.hpp"
#include "storage/utf8.hpp"
#include "storage/validate.hpp"

namespace awa::storage {
namespace {

using ::testing::HasSubstr;

TEST(ValidateTest, Utf8AcceptsEveryWellFormedSequenceLength) {
  EXPECT_EQ(invalid_utf8_at(""), std::nullopt);
  EXPECT_EQ(invalid_utf8_at("plain ascii \t\n"), std::nullopt);
  EXPECT_EQ(invalid_utf8_at("\xc3\xbc"), std::nullopt);          // U+00FC
  EXPECT_EQ(invalid_utf8_at("\xe2\x82\xac"), std::nullopt);      // U+20AC
  EXPECT_EQ(invalid_utf8_at("\xed\x9f\xbf"), std::nullopt);      // U+D7FF, below surrogates
  EXPECT_EQ(invalid_utf8_at("\xef\xbf\xbf"), std::nullopt);      // U+FFFF
  EXPECT_EQ(invalid_utf8_at("\xf0\x9f\x98\x80"), std::nullopt);  // U+1F600
  EXPECT_EQ(invalid_utf8_at("\xf4\x8f\xbf\xbf"), std::nullopt);  // U+10FFFF
}

TEST(ValidateTest, Utf8RejectsMalformedSequencesAtTheirOffset) {
  EXPECT_EQ(invalid_utf8_at("ab\xff"), 2u);
  EXPECT_EQ(invalid_utf8_at("\x80"), 0u);                // lone continuation byte
  EXPECT_EQ(invalid_utf8_at("\xc0\xaf"), 0u);            // overlong '/'
  EXPECT_EQ(invalid_utf8_at("\xc1\xbf"), 0u);            // overlong
  EXPECT_EQ(invalid_utf8_at("\xe0\x9f\xbf"), 0u);        // overlong 3-byte
  EXPECT_EQ(invalid_utf8_at("\xed\xa0\x80"), 0u);        // U+D800, a surrogate
  EXPECT_EQ(invalid_utf8_at("\xf0\x8f\xbf\xbf"), 0u);    // overlong 4-byte
  EXPECT_EQ(invalid_utf8_at("\xf4\x90\x80\x80"), 0u);    // above U+10FFFF
  EXPECT_EQ(invalid_utf8_at("\xf5\x80\x80\x80"), 0u);    // no such lead byte
  EXPECT_EQ(invalid_utf8_at("x\xe2\x82"), 1u);           // truncated at the end
  EXPECT_EQ(invalid_utf8_at("\xc3\x28"), 0u);            // bad continuation
  EXPECT_EQ(invalid_utf8_at("ok\xf0\x9f\x98(end"), 2u);  // bad 4th byte
}

TEST(ValidateTest, PrintableEscapesControlAndInvalidBytesAndCuts) {
  EXPECT_EQ(printable("a\nb\xff\xc3\xbc"), "a\\x0ab\\xff\xc3\xbc");
  EXPECT_EQ(printable(std::string("\0", 1)), "\\x00");
  EXPECT_EQ(printable(std::string(100, 'x'), 10), std::string(10, 'x') + "...");
}

NewJob good_job() { return NewJob("kind", nlohmann::json::object()); }

std::string rejection(const NewJob& job) {
  try {
    validate_job(job, 3);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ValidateTest, JobMessagesNameTheIndexAndTheField) {
  NewJob j = good_job();
  j.opts.tags = {"a", std::string("b\0", 2)};
  EXPECT_EQ(rejection(j), "job 3 (kind \"kind\"): tag 1 contains a NUL byte at offset 1");

  j = good_job();
  j.kind = "k\xff";
  EXPECT_EQ(rejection(j),
            "job 3 (kind \"k\\xff\"): kind is not valid UTF-8 (byte 0xff at offset 1)");

  j = good_job();
  j.opts.metadata = {{"m", std::string(1, '\0')}};
  EXPECT_THAT(rejection(j), HasSubstr("metadata contains \\u0000"));

  j = good_job();
  j.args_json = std::string(kMaxArgsBytes + 1, ' ');
  EXPECT_THAT(rejection(j), HasSubstr("args are 1048577 bytes of JSON; the limit is 1048576"));
}

TEST(ValidateTest, LimitsAreInclusive) {
  NewJob j = good_job();
  j.kind = std::string(kMaxNameBytes, 'k');
  j.opts.tags.assign(kMaxTags, std::string(kMaxTagBytes, 't'));
  j.opts.ordering_key = std::string(kMaxOrderingKeyBytes, '\0');
  j.args_json = "\"" + std::string(kMaxArgsBytes - 2, 'a') + "\"";
  j.opts.metadata = {{"m", std::string(kMaxMetadataBytes - 8, 'a')}};  // {"m":"..."}
  j.opts.run_at = std::chrono::system_clock::now() + kMaxScheduleAhead - std::chrono::hours(1);
  EXPECT_EQ(rejection(j), "(accepted)");

  j.opts.metadata = {{"m", std::string(kMaxMetadataBytes - 7, 'a')}};
  EXPECT_THAT(rejection(j), HasSubstr("metadata is 65537 bytes serialized"));
}

TEST(ValidateTest, RunAtAtTheClockLimitsDoesNotOverflow) {
  NewJob j = good_job();
  j.opts.run_at = std::chrono::system_clock::time_point::max();
  EXPECT_THAT(rejection(j), HasSubstr("run_at is more than 100 years from now"));
  j.opts.run_at = std::chrono::system_clock::time_point::min();  // the past: runnable now
  EXPECT_EQ(rejection(j), "(accepted)");
}

}  // namespace
}  // namespace awa::storage
