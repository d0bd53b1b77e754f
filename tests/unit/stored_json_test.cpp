// Decoding JSON as jsonb stores it (src/storage/stored_json.cpp), without a database: what
// nlohmann::json cannot hold is reported, never thrown (issue 31, defect 2); producers take
// every JSON document jsonb takes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/admin_json.hpp"
#include "awa/client.hpp"
#include "awa/error.hpp"
#include "awa/job.hpp"
#include "storage/stored_json.hpp"
#include "storage/validate.hpp"

namespace awa::storage {
namespace {

using ::testing::HasSubstr;

// How jsonb prints 1e400: a 1 and 400 zeros.
std::string huge() { return "1" + std::string(400, '0'); }

std::string nested(int depth, const std::string& inner = "") {
  return std::string(static_cast<std::size_t>(depth), '[') + inner +
         std::string(static_cast<std::size_t>(depth), ']');
}

TEST(StoredJsonTest, DecodesOrdinaryJsonAndNonBmpText) {
  nlohmann::json v;
  EXPECT_EQ(decode_stored_json(R"({"a": [1, 2.5, "x"], "b": null})", v), "");
  EXPECT_EQ(v, nlohmann::json::parse(R"({"a": [1, 2.5, "x"], "b": null})"));
  EXPECT_EQ(decode_stored_json(R"({"s": "\ud83d\ude00 \u00e9"})", v), "");
  EXPECT_EQ(v.at("s"), "\xF0\x9F\x98\x80 \xC3\xA9");
  EXPECT_EQ(decode_stored_json("{\"s\": \"\xF0\x9F\x98\x80\"}", v), "");
  EXPECT_EQ(v.at("s"), "\xF0\x9F\x98\x80");
  // Beyond a 64-bit integer, within a double: decoded as a double (rounded).
  EXPECT_EQ(decode_stored_json("[123456789012345678901234567890]", v), "");
  EXPECT_TRUE(v.at(0).is_number_float());
  // Below a double's smallest: decoded as a double too (0 or subnormal), as nlohmann does.
  EXPECT_EQ(decode_stored_json("[0." + std::string(400, '0') + "1]", v), "");
}

TEST(StoredJsonTest, NumberBeyondADoubleIsReportedWithItsEndsAndLength) {
  nlohmann::json v = 7;
  const auto why = decode_stored_json(R"({"x": )" + huge() + "}", v);
  EXPECT_TRUE(v.is_null());
  EXPECT_THAT(why, HasSubstr("out of the range of a double"));
  EXPECT_THAT(why, HasSubstr("number 100000000000000000000000...00000000 (401 characters)"));
  EXPECT_THAT(decode_stored_json("[-" + huge() + "]", v), HasSubstr("number -1000"));
  EXPECT_THAT(decode_stored_json("[1e400]", v), HasSubstr("number 1e400 is out of the range"));
}

TEST(StoredJsonTest, NestingIsRefusedPastTheLimitBeforeParsing) {
  nlohmann::json v;
  EXPECT_EQ(decode_stored_json(nested(kMaxDecodedJsonDepth), v), "");
  EXPECT_EQ(decode_stored_json(nested(kMaxDecodedJsonDepth + 1), v),
            fmt::format("nested deeper than {} levels", kMaxDecodedJsonDepth));
  EXPECT_TRUE(v.is_null());
  EXPECT_THAT(decode_stored_json(nested(100000), v), HasSubstr("nested deeper than"));
  // Objects count as arrays do; brackets inside strings (escaped quotes too) do not.
  std::string objects;
  for (int i = 0; i <= kMaxDecodedJsonDepth; ++i) objects += R"({"a":)";
  objects += "1" + std::string(static_cast<std::size_t>(kMaxDecodedJsonDepth + 1), '}');
  EXPECT_THAT(decode_stored_json(objects, v), HasSubstr("nested deeper than"));
  const std::string in_string =
      "[\"" + std::string(2000, '[') + "\\\"" + std::string(2000, '{') + "\"]";
  EXPECT_EQ(decode_stored_json(in_string, v), "");
  EXPECT_EQ(v.at(0).get<std::string>().size(), 4001U);
}

TEST(StoredJsonTest, TextThatIsNotJsonIsReported) {
  nlohmann::json v;
  EXPECT_THAT(decode_stored_json("{\"a\": ", v), HasSubstr("not JSON"));
  EXPECT_TRUE(v.is_null());
}

TEST(StoredJsonTest, DisplaysEmbedWhatDoesNotDecodeAsItsText) {
  EXPECT_EQ(awa::json::stored(R"({"a": 1})"), nlohmann::json({{"a", 1}}));
  const std::string big = R"({"x": )" + huge() + "}";
  EXPECT_EQ(awa::json::stored(big), nlohmann::json(big));
  const std::string deep = nested(5000);
  EXPECT_EQ(awa::json::stored(deep), nlohmann::json(deep));
  EXPECT_EQ(awa::json::stored("not json"), nlohmann::json("not json"));
}

TEST(StoredJsonTest, JsonTextIsWhatJsonbTakesNumbersBeyondADoubleIncluded) {
  EXPECT_TRUE(is_json_text(R"({"a": [1, -0.5e-3, true, null, "x"]})"));
  EXPECT_TRUE(is_json_text(R"({"x": 1e400})"));
  EXPECT_TRUE(is_json_text("[-" + huge() + ", " + huge() + ".5E+10]"));
  EXPECT_TRUE(is_json_text(R"(["1e400 \" [", 1e400])"));
  EXPECT_TRUE(is_json_text(nested(10000)));
  for (const char* bad :
       {"", "[1e400", "[1e400,]", "[01]", "[1.]", "[.5]", "[1e]", "[--1]", "[+1]", "[1e400 1]",
        R"(["\ud83d", 1e400])", "{\"a\" 1e400}", "[1e400, tru]", "[\"unterminated 1e400]"}) {
    EXPECT_FALSE(is_json_text(bad)) << bad;
  }
}

TEST(StoredJsonTest, ProducersAcceptArgsWithNumbersBeyondADouble) {
  // PostgreSQL's jsonb stores them, so the C++ producers take them as the SQL ones do.
  EXPECT_NO_THROW(validate_job(NewJob::from_text("k", R"({"x": 1e400})"), 0));
  EXPECT_NO_THROW(validate_json_text("the callback result", "[1e400]", 100));
  EXPECT_THROW(validate_job(NewJob::from_text("k", R"({"x": 1e400)"), 0), InvalidArgument);
  EXPECT_THROW(validate_job(NewJob::from_text("k", R"({"x": 01})"), 0), InvalidArgument);
}

// A JobContext over a claimed entry, as a handler sees it.
class FakeJob final : public JobContext {
 public:
  explicit FakeJob(ClaimedEntry e) : e_(std::move(e)) {}
  const ClaimedEntry& entry() const override { return e_; }
  const nlohmann::json& args() const override { return args_; }
  std::stop_token stop_token() const override { return {}; }
  void set_progress(double, const std::string&) override {}
  void heartbeat() override {}
  std::string register_callback(std::chrono::milliseconds) override { return {}; }
  std::map<JobId, nlohmann::json> parent_results() const override { return {}; }

 private:
  void finalize_in(Connection&, const std::optional<std::string>&) override {}
  ClaimedEntry e_;
  nlohmann::json args_;
};

TEST(StoredJsonTest, UndecodableMetadataThrowsOnUseAndKeepsItsText) {
  ClaimedEntry e;
  e.metadata_json = R"({"x": 1e400})";
  e.metadata_error = "metadata could not be decoded: number 1e400 is out of the range of a double";
  const FakeJob job(e);
  EXPECT_EQ(job.metadata_json(), R"({"x": 1e400})");
  try {
    (void)job.metadata();
    ADD_FAILURE() << "metadata() did not throw";
  } catch (const UndecodableJson& ex) {
    EXPECT_EQ(std::string(ex.what()), e.metadata_error);
    EXPECT_EQ(ex.retry(), Retry::kDoNotRetry);
  }
  ClaimedEntry fine;
  fine.metadata = {{"a", 1}};
  EXPECT_EQ(FakeJob(fine).metadata(), nlohmann::json({{"a", 1}}));
}

}  // namespace
}  // namespace awa::storage
