// The function set without its optional features (schema/optional_features.hpp): the
// stripping grammar, and what it leaves of the real claim and insert_job_compat.
#include <gtest/gtest.h>

#include <string>

#include "awa/error.hpp"
#include "schema/optional_features.hpp"
#include "schema/sql_catalog.hpp"

namespace awa {
namespace {

using schema::strip_optional_features;

TEST(OptionalFeaturesTest, ABlockGoesAndItsOffLinesStayWithTheirIndentation) {
  const std::string text =
      "SELECT 1;\n"
      "    -- optional(limits) {\n"
      "    IF v_rate IS NOT NULL THEN\n"
      "        PERFORM 2;\n"
      "    END IF;\n"
      "    --off PERFORM 3;\n"
      "    -- optional }\n"
      "SELECT 4;";
  EXPECT_EQ(strip_optional_features(text), "SELECT 1;\n    PERFORM 3;\nSELECT 4;\n");
}

TEST(OptionalFeaturesTest, TextWithoutBlocksIsUnchanged) {
  const std::string text = "SELECT 1; -- a comment { with a brace }\n-- }\nSELECT 2;\n";
  EXPECT_EQ(strip_optional_features(text), text);
}

TEST(OptionalFeaturesTest, UnbalancedOrNestedMarksAreRefusedWithTheirLine) {
  try {
    strip_optional_features("-- optional(a) {\n-- optional(b) {\n-- optional }\n");
    FAIL() << "a nested block was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "line 2: an optional block opens inside the one opened at line 1");
  }
  EXPECT_THROW(strip_optional_features("SELECT 1;\n-- optional }\n"), InvalidArgument);
  try {
    strip_optional_features("SELECT 1;\n  -- optional(a) {\nSELECT 2;\n");
    FAIL() << "an unclosed block was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "the optional block opened at line 2 is never closed");
  }
}

// What a benchmark with the features off runs: the claim without limits, aging and the
// deadline setting; insert_job_compat without unique keys. Everything else stays.
TEST(OptionalFeaturesTest, TheClaimLosesItsLimitsAndAgingAndKeepsTheRest) {
  const std::string full(sql::file("functions/0040_claim_ready_runtime.sql"));
  const std::string off = strip_optional_features(full);
  for (const char* gone :
       {"v_global_max IS NOT NULL", "v_max_rate IS NOT NULL", "effective_priority(claims.priority",
        "effective_priority(l.priority", "v_meta_deadline_ms IS NOT NULL"}) {
    EXPECT_NE(full.find(gone), std::string::npos) << gone;
    EXPECT_EQ(off.find(gone), std::string::npos) << gone;
  }
  // No mark is left: every block was found and closed.
  for (const char* mark :
       {"\n    -- optional(", "\n    -- optional }", "--off ORDER BY", "--off l."}) {
    EXPECT_NE(full.find(mark), std::string::npos) << mark;
    EXPECT_EQ(off.find(mark), std::string::npos) << mark;
  }
  for (const char* kept :
       {"IF v_paused THEN", "FOR UPDATE OF claims SKIP LOCKED",
        "INSERT INTO {schema}.claim_batches", "shard_fence_cap(", "ORDER BY claims.priority,"}) {
    EXPECT_NE(off.find(kept), std::string::npos) << kept;
  }

  const std::string compat(sql::file("functions/0030_insert_job_compat.sql"));
  const std::string compat_off = strip_optional_features(compat);
  EXPECT_NE(compat.find("claim_unique_key("), std::string::npos);
  EXPECT_EQ(compat_off.find("claim_unique_key("), std::string::npos);
  EXPECT_NE(compat_off.find("INSERT INTO {schema}.enqueue_staging"), std::string::npos);
}

}  // namespace
}  // namespace awa
