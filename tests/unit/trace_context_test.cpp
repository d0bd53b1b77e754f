// W3C trace context (include/awa/trace.hpp): what a valid traceparent is, the thread's
// current context, and which context an insert stores (storage/job_metadata.hpp,
// storage/validate.cpp) — without a database.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/trace.hpp"
#include "storage/job_metadata.hpp"
#include "storage/validate.hpp"

namespace awa::trace {
namespace {

using ::testing::HasSubstr;

// The W3C recommendation's own example.
constexpr const char* kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
constexpr const char* kOther = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";

TEST(TraceContextTest, ParsesAValidContextAndItsParts) {
  const auto c = parse(kParent, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  EXPECT_EQ(c.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(c.parent_id(), "00f067aa0ba902b7");
  EXPECT_TRUE(c.sampled());
  EXPECT_FALSE(parse(kOther).sampled());
  EXPECT_TRUE(parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03").sampled());
  EXPECT_FALSE(parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-fe").sampled());
  EXPECT_EQ(c.tracestate, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
}

TEST(TraceContextTest, RejectsWhatW3CDoesNotAllow) {
  const std::string ok = kParent;
  EXPECT_EQ(invalid_reason(ok), "");
  EXPECT_THAT(invalid_reason(""), HasSubstr("is not 00-"));
  EXPECT_THAT(invalid_reason(ok + "0"), HasSubstr("is not 00-"));
  EXPECT_THAT(invalid_reason(ok.substr(0, 54)), HasSubstr("is not 00-"));
  EXPECT_THAT(invalid_reason("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
              HasSubstr("is not 00-"));
  EXPECT_THAT(invalid_reason("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
              HasSubstr("lower-case hex"));
  EXPECT_THAT(invalid_reason("00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01"),
              HasSubstr("lower-case hex"));
  EXPECT_THAT(invalid_reason("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
              HasSubstr("version ff"));
  EXPECT_THAT(invalid_reason("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
              HasSubstr("only version 00"));
  EXPECT_THAT(invalid_reason("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
              HasSubstr("all-zero trace id"));
  EXPECT_THAT(invalid_reason("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),
              HasSubstr("all-zero parent id"));
  EXPECT_THAT(invalid_reason(ok, std::string(kMaxTracestateBytes + 1, 'a')),
              HasSubstr("tracestate is 513 bytes"));
  EXPECT_EQ(invalid_reason(ok, std::string(kMaxTracestateBytes, 'a')), "");
  EXPECT_THAT(invalid_reason(ok, "a=b\nc=d"), HasSubstr("control character"));
  EXPECT_THROW(parse("nope"), InvalidArgument);
}

TEST(TraceContextTest, FromMetadataTakesOnlyAValidTraceparent) {
  EXPECT_EQ(from_metadata(nullptr), std::nullopt);
  EXPECT_EQ(from_metadata(nlohmann::json::object()), std::nullopt);
  EXPECT_EQ(from_metadata({{"traceparent", 42}}), std::nullopt);
  EXPECT_EQ(from_metadata({{"traceparent", "00-garbage"}}), std::nullopt);
  EXPECT_EQ(from_metadata({{"traceparent", kParent}, {"tracestate", "k=v"}}),
            (Context{kParent, "k=v"}));
  // A bad tracestate alone is dropped; the traceparent still counts.
  EXPECT_EQ(from_metadata({{"traceparent", kParent}, {"tracestate", "a\tb"}}),
            (Context{kParent, ""}));
  EXPECT_EQ(from_metadata({{"traceparent", kParent}, {"tracestate", 7}}), (Context{kParent, ""}));
}

TEST(TraceContextTest, ScopesNestAndRestoreTheThreadsContext) {
  EXPECT_EQ(current(), nullptr);
  {
    Scope outer(parse(kParent));
    ASSERT_NE(current(), nullptr);
    EXPECT_EQ(current()->traceparent, kParent);
    {
      Scope inner(parse(kOther, "k=v"));
      EXPECT_EQ(*current(), (Context{kOther, "k=v"}));
      {
        Scope none;
        EXPECT_EQ(current(), nullptr);
      }
      EXPECT_EQ(current()->traceparent, kOther);
    }
    EXPECT_EQ(current()->traceparent, kParent);
    // A context built by hand is checked; a refused scope leaves the current one.
    EXPECT_THROW(Scope(Context{"00-zz", ""}), InvalidArgument);
    EXPECT_EQ(current()->traceparent, kParent);
  }
  EXPECT_EQ(current(), nullptr);
}

NewJob job_with(nlohmann::json metadata, std::optional<Context> t = std::nullopt) {
  InsertOpts o;
  o.metadata = std::move(metadata);
  o.trace = std::move(t);
  return NewJob("k", nlohmann::json::object(), o);
}

nlohmann::json stored(const NewJob& j) {
  const auto text = storage::metadata_text(j);
  return text ? nlohmann::json::parse(*text) : nlohmann::json(nullptr);
}

TEST(TraceContextTest, AnInsertStoresItsOwnContextElseTheMetadatasElseTheThreads) {
  // Nothing anywhere: the metadata as given.
  EXPECT_EQ(stored(job_with(nullptr)), nullptr);
  EXPECT_EQ(stored(job_with({{"a", 1}})), (nlohmann::json{{"a", 1}}));
  // InsertOpts::trace is merged in, replacing the metadata's own keys.
  EXPECT_EQ(stored(job_with(nullptr, parse(kParent, "k=v"))),
            (nlohmann::json{{"traceparent", kParent}, {"tracestate", "k=v"}}));
  EXPECT_EQ(stored(job_with({{"a", 1}, {"traceparent", kOther}, {"tracestate", "old=1"}},
                            parse(kParent))),
            (nlohmann::json{{"a", 1}, {"traceparent", kParent}}));

  Scope scope(parse(kOther, "s=1"));
  // The thread's context when the job names none...
  EXPECT_EQ(stored(job_with(nullptr)),
            (nlohmann::json{{"traceparent", kOther}, {"tracestate", "s=1"}}));
  EXPECT_EQ(stored(job_with({{"a", 1}})),
            (nlohmann::json{{"a", 1}, {"traceparent", kOther}, {"tracestate", "s=1"}}));
  // ... but not over the metadata's own, nor over InsertOpts::trace.
  EXPECT_EQ(stored(job_with({{"traceparent", kParent}})),
            (nlohmann::json{{"traceparent", kParent}}));
  EXPECT_EQ(stored(job_with(nullptr, parse(kParent))), (nlohmann::json{{"traceparent", kParent}}));
}

TEST(TraceContextTest, AnInsertWithAnInvalidContextIsRefused) {
  EXPECT_NO_THROW(awa::validate_job(job_with(nullptr, parse(kParent))));
  EXPECT_NO_THROW(awa::validate_job(job_with({{"traceparent", kParent}, {"tracestate", "k=v"}})));
  try {
    awa::validate_job(job_with(nullptr, Context{"00-nope", ""}));
    ADD_FAILURE() << "an invalid InsertOpts::trace was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("trace: traceparent"));
  }
  try {
    awa::validate_job(job_with({{"traceparent", "00-4bf92f35"}}));
    ADD_FAILURE() << "an invalid metadata.traceparent was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("metadata: traceparent"));
  }
  EXPECT_THROW(awa::validate_job(job_with({{"traceparent", 1}})), InvalidArgument);
  EXPECT_THROW(awa::validate_job(job_with({{"tracestate", "k=v"}})), InvalidArgument);
  EXPECT_THROW(awa::validate_job(job_with({{"traceparent", kParent}, {"tracestate", 3}})),
               InvalidArgument);
}

}  // namespace
}  // namespace awa::trace
