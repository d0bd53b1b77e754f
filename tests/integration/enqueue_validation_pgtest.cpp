// Regression tests for issue 10, defect 8: producer input that PostgreSQL cannot store
// (metadata with \u0000, invalid UTF-8, NUL bytes), unvalidated tags, far-future run_at,
// `awa enqueue --delay` overflow and a partial `awa enqueue --count` above one batch.
//
// Every rejected input must fail before anything is sent: the caller's transaction stays
// usable (a server-side error would abort it) and no table of the schema changes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "cli_runner.hpp"
#include "pg/native.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Json = nlohmann::json;

enum class Mode { kInsert, kCopy };

class EnqueueValidationTest : public StorageTest, public ::testing::WithParamInterface<Mode> {
 protected:
  std::vector<JobId> enqueue(pg::Connection& c, const std::vector<NewJob>& jobs) {
    return GetParam() == Mode::kCopy ? storage::insert_many_copy(*store_, c, jobs)
                                     : storage::insert_many(*store_, c, jobs);
  }

  std::int64_t rows_written() {
    return count(
        "SELECT (SELECT count(*) FROM ready_entries) + (SELECT count(*) FROM deferred_jobs)"
        " + (SELECT count(*) FROM queue_enqueue_heads) + (SELECT count(*) FROM queue_claim_heads)");
  }

  // Sends a good job followed by `bad` in one batch, inside a caller transaction, and
  // expects InvalidArgument naming every string of `expected`; the transaction must still
  // be usable afterwards (nothing reached the server) and nothing may be stored.
  void expect_rejected(const NewJob& bad, const std::vector<std::string>& expected) {
    Connection app = Connection::connect(database_url());
    app.execute("SET search_path TO " + quoted_schema());
    Transaction tx(app);
    const std::vector<NewJob> batch{NewJob("fine", Json::object(), InsertOpts{}), bad};
    try {
      enqueue(pg::native(app), batch);
      ADD_FAILURE() << "the batch was accepted";
    } catch (const InvalidArgument& e) {
      for (const auto& s : expected) EXPECT_THAT(e.what(), HasSubstr(s));
      EXPECT_THAT(e.what(), HasSubstr("job 1"));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
    EXPECT_NO_THROW(app.execute("SELECT 1")) << "the caller's transaction was aborted";
    tx.commit();
    EXPECT_EQ(rows_written(), 0);
  }

  static NewJob job_with(const std::function<void(NewJob&)>& edit) {
    NewJob j("kind", Json::object(), InsertOpts{});
    edit(j);
    return j;
  }
};

INSTANTIATE_TEST_SUITE_P(EnqueueBy, EnqueueValidationTest,
                         ::testing::Values(Mode::kInsert, Mode::kCopy),
                         [](const ::testing::TestParamInfo<Mode>& param_info) {
                           return param_info.param == Mode::kCopy ? "Copy" : "Insert";
                         });

TEST_P(EnqueueValidationTest, MetadataWithNulEscapeIsRejectedBeforeSending) {
  // Defect 8: jsonb cannot hold U+0000 (22P05). The value reached the server mid-batch
  // and aborted the caller's transaction; it must fail on the client, naming metadata.
  expect_rejected(job_with([](NewJob& j) {
                    j.opts.metadata = {{"note", std::string("a\0b", 3)}};
                  }),
                  {"metadata", "\\u0000"});
  expect_rejected(job_with([](NewJob& j) {
                    j.opts.metadata = {{std::string("k\0", 2), 1}};
                  }),
                  {"metadata", "\\u0000"});
}

TEST_P(EnqueueValidationTest, MetadataWithInvalidUtf8IsRejectedAsInvalidArgument) {
  // Defect 8: metadata strings are dumped at insert; invalid UTF-8 escaped as a raw
  // nlohmann::json::type_error instead of an awa::InvalidArgument naming the field.
  expect_rejected(job_with([](NewJob& j) {
                    j.opts.metadata = {{"bad", "\xff\xfe"}};
                  }),
                  {"metadata", "UTF-8"});
}

TEST_P(EnqueueValidationTest, TagsOutsideTheLimitsAreRejected) {
  // Defect 8: tags were not validated at all.
  expect_rejected(job_with([](NewJob& j) { j.opts.tags.assign(kMaxTags + 1, "t"); }),
                  {"tags", std::to_string(kMaxTags)});
  expect_rejected(job_with([](NewJob& j) { j.opts.tags = {std::string(kMaxTagBytes + 1, 'x')}; }),
                  {"tag 0", std::to_string(kMaxTagBytes)});
  expect_rejected(job_with([](NewJob& j) {
                    j.opts.tags = {"ok", "\xc3\x28"};
                  }),
                  {"tag 1", "UTF-8"});
  expect_rejected(job_with([](NewJob& j) { j.opts.tags = {std::string("a\0b", 3)}; }),
                  {"tag 0", "NUL"});
}

TEST_P(EnqueueValidationTest, KindWithInvalidUtf8OrNulIsRejected) {
  // Defect 8: strings PostgreSQL's text type refuses (SQLSTATE 22021) or that libpq would
  // truncate at a NUL must fail early with the field named.
  expect_rejected(job_with([](NewJob& j) { j.kind = "bad\xff"; }), {"kind", "UTF-8"});
  expect_rejected(job_with([](NewJob& j) { j.kind = std::string("a\0b", 3); }), {"kind", "NUL"});
  // Overlong encoding and a UTF-16 surrogate are not valid UTF-8 either.
  expect_rejected(job_with([](NewJob& j) { j.kind = "\xc0\xaf"; }), {"kind", "UTF-8"});
  expect_rejected(job_with([](NewJob& j) { j.kind = "\xed\xa0\x80"; }), {"kind", "UTF-8"});
}

TEST_P(EnqueueValidationTest, RunAtBeyondTheSchedulingHorizonIsRejected) {
  // Defect 8: a far-future run_at was accepted as is (and the CLI's --delay overflowed
  // the clock computing it).
  expect_rejected(job_with([](NewJob& j) {
                    j.opts.run_at = std::chrono::system_clock::now() + 24h * 365 * 101;
                  }),
                  {"run_at", "100 years"});
  expect_rejected(
      job_with([](NewJob& j) { j.opts.run_at = std::chrono::system_clock::time_point::max(); }),
      {"run_at"});
}

TEST_P(EnqueueValidationTest, ArgsAndMetadataOverTheSizeLimitAreRejected) {
  expect_rejected(NewJob::from_text("big", "\"" + std::string(kMaxArgsBytes, 'a') + "\""),
                  {"args", "bytes"});
  expect_rejected(job_with([](NewJob& j) {
                    j.opts.metadata = {{"m", std::string(kMaxMetadataBytes, 'a')}};
                  }),
                  {"metadata", "bytes"});
}

TEST_P(EnqueueValidationTest, ValuesAtTheLimitsAreStored) {
  NewJob j("k\xc3\xbc", Json::object(), InsertOpts{});
  j.opts.tags.assign(kMaxTags, std::string(kMaxTagBytes, 't'));
  j.opts.tags[0] = "tab\tand \xf0\x9f\x98\x80";
  j.opts.tags[1] = "";
  j.opts.metadata = {{"u", "\xc3\xbc\\u0000 is text here"}};
  j.opts.run_at = std::chrono::system_clock::now() + 24h * 365 * 99;
  const auto ids = enqueue(conn(), {j});
  ASSERT_EQ(ids.size(), 1u);
  const auto r = conn().query(
      "SELECT kind, array_to_json(tags)::text, metadata::text FROM deferred_jobs WHERE job_id = "
      "$1",
      ids[0]);
  ASSERT_EQ(r.rows(), 1);
  EXPECT_EQ(r.get<std::string>(0, 0), j.kind);
  EXPECT_EQ(Json::parse(r.get<std::string>(0, 1)).get<std::vector<std::string>>(), j.opts.tags);
  EXPECT_EQ(Json::parse(r.get<std::string>(0, 2)), j.opts.metadata);
}

// --- the CLI ---------------------------------------------------------------------------

class EnqueueValidationCliTest : public StorageTest {
 protected:
  std::string base() const { return "--database-url '" + database_url() + "' --schema " + schema_; }
  std::int64_t ready_and_deferred() {
    return count(
        "SELECT (SELECT count(*) FROM ready_entries) + (SELECT count(*) FROM deferred_jobs)");
  }
};

TEST_F(EnqueueValidationCliTest, HugeDelayIsRejectedWithAClearMessage) {
  // Defect 8: --delay 1e300 overflowed the clock arithmetic (undefined behaviour; in
  // practice a run_at in the past or garbage); inf and nan likewise.
  for (const char* bad : {"1e300", "inf", "nan", "1e12", "-1", "3155760001"}) {
    SCOPED_TRACE(bad);
    const auto res = run_cli(base() + " enqueue k --delay " + bad);
    EXPECT_EQ(res.exit_code, 1) << res.output;
    EXPECT_THAT(res.output, HasSubstr("--delay"));
  }
  EXPECT_EQ(ready_and_deferred(), 0);
  const auto ok = run_cli(base() + " enqueue k --delay 3155760000");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 1);
}

TEST_F(EnqueueValidationCliTest, CountAboveOneBatchIsAllOrNothing) {
  // Defect 8: --count above 1,000 committed each 1,000-row batch on its own, so a failure
  // in a later batch left the earlier ones enqueued. A trigger makes row 1,501 fail.
  conn().exec("CREATE SEQUENCE boom_seq");
  conn().exec(
      "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "IF nextval('" +
      schema_ +
      ".boom_seq') > 1500 THEN RAISE EXCEPTION 'boom at row 1501'; END IF; "
      "RETURN NEW; END $$");
  conn().exec(
      "CREATE TRIGGER boom BEFORE INSERT ON ready_entries FOR EACH ROW EXECUTE FUNCTION boom()");
  const auto res = run_cli(base() + " enqueue k --count 2500");
  EXPECT_EQ(res.exit_code, 1) << res.output;
  EXPECT_THAT(res.output, HasSubstr("boom at row 1501"));
  EXPECT_EQ(ready_and_deferred(), 0);

  conn().exec("DROP TRIGGER boom ON ready_entries");
  const auto ok = run_cli(base() + " enqueue k --count 2500");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ready_and_deferred(), 2500);
}

TEST_F(EnqueueValidationCliTest, CountOutsideItsRangeIsRejected) {
  for (const char* bad : {"0", "-5", "100001"}) {  // the limit is 100,000
    SCOPED_TRACE(bad);
    const auto res = run_cli(base() + " enqueue k --count " + bad);
    EXPECT_NE(res.exit_code, 0) << res.output;
    EXPECT_THAT(res.output, HasSubstr("--count"));
  }
  EXPECT_EQ(ready_and_deferred(), 0);
}

}  // namespace
}  // namespace awa::testing
