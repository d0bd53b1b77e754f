// Bad input over the CLI and the public API (issue 10): every case must fail with a
// clear message (a meaningful substring is asserted), a non-zero exit status (CLI) or the
// right exception type (API), and leave the test schema exactly as it was — row counts of
// every table, sequence positions and queue_meta compared before and after.
//
// Valid-but-odd values (SQL fragments, quotes and unicode in kinds and tags) are stored
// byte for byte.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "cli_runner.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// For the shell: 'text' with embedded single quotes escaped.
std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

class BadInputTest : public StorageTest {
 protected:
  void SetUpSchema() override {
    StorageTest::SetUpSchema();
    // Some state to compare against: a sharded queue with ready and scheduled rows.
    set_shards("hot", 4);
    std::vector<NewJob> jobs;
    for (int i = 0; i < 3; ++i) jobs.push_back(NewJob("seed", {{"i", i}}, on_queue("hot")));
    NewJob later("seed", Json::object(), on_queue("hot"));
    later.opts.run_at = std::chrono::system_clock::now() + 1h;
    jobs.push_back(later);
    storage::insert_many(*store_, conn(), jobs);
  }

  std::string base() const { return "--database-url '" + database_url() + "' --schema " + schema_; }

  // Every relation of the schema with its row count (tables) or position (sequences),
  // the relation list itself (a lane creates objects) and queue_meta verbatim.
  std::string snapshot() {
    const auto rels = conn().query(
        "SELECT coalesce(string_agg(c.relname || '=' || (xpath('/row/n/text()', query_to_xml("
        "  CASE c.relkind WHEN 'S' THEN format('SELECT last_value || '':'' || is_called AS n"
        "    FROM %I.%I', n.nspname, c.relname)"
        "  ELSE format('SELECT count(*) AS n FROM %I.%I', n.nspname, c.relname) END,"
        "  false, true, '')))[1]::text, ',' ORDER BY c.relname), '')"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = $1 AND c.relkind IN ('r', 'S')",
        schema_);
    const auto meta = conn().exec(
        "SELECT coalesce(string_agg(q::text, ';' ORDER BY q.queue), '') FROM queue_meta q");
    return rels.get<std::string>(0, 0) + "\nqueue_meta: " + meta.get<std::string>(0, 0);
  }
};

// --- the CLI ------------------------------------------------------------------------------

struct CliCase {
  const char* name;
  std::string args;      // after --database-url and --schema
  std::string expected;  // a substring of the output
};

TEST_F(BadInputTest, CliRejectsBadInputClearlyAndChangesNothing) {
  const std::string long_key(kMaxOrderingKeyBytes + 1, 'k');
  const std::vector<CliCase> cases = {
      {"shards 0", "queue set-shards hot 0", "between 1 and 64"},
      {"shards 65", "queue set-shards hot 65", "between 1 and 64"},
      {"shards -1", "queue set-shards hot -1", "between 1 and 64"},
      {"shards abc", "queue set-shards hot abc", "shards"},
      {"shards, bad queue", "queue set-shards 'a b' 2", "invalid queue name \"a b\""},
      {"priority 0", "enqueue k --priority 0", "priority 0 is outside 1..4"},
      {"priority 5", "enqueue k --priority 5", "priority 5 is outside 1..4"},
      {"priority abc", "enqueue k --priority abc", "priority"},
      {"max_attempts 0", "enqueue k --max-attempts 0", "max_attempts 0 is outside 1..1000"},
      {"max_attempts 1001", "enqueue k --max-attempts 1001",
       "max_attempts 1001 is outside 1..1000"},
      {"invalid JSON", "enqueue k --args '{\"a\":'", "args are not valid JSON"},
      {"JSON with \\u0000", "enqueue k --args '{\"a\":\"\\u0000\"}'", "\\u0000"},
      {"queue with a quote", "enqueue k --queue \"it's\"", "invalid queue name"},
      {"queue with a space", "enqueue k --queue 'a b'", "invalid queue name"},
      {"queue in unicode", "enqueue k --queue 'caf\xc3\xa9'", "invalid queue name"},
      {"queue with SQL", "enqueue k --queue \"x'; DROP TABLE queue_meta; --\"",
       "invalid queue name"},
      {"empty queue", "enqueue k --queue ''", "invalid queue name"},
      {"kind too long", "enqueue " + std::string(kMaxNameBytes + 1, 'k'), "kind must be 1..200"},
      // printf: run_cli's shell is sh, which has no $'...'.
      {"kind invalid UTF-8", "enqueue \"$(printf 'k\\377')\"", "kind is not valid UTF-8"},
      {"ordering key over the limit", "enqueue k --ordering-key " + long_key,
       "ordering_key is 257 bytes; the limit is 256"},
      {"delay 1e300", "enqueue k --delay 1e300", "--delay must be"},
      {"delay inf", "enqueue k --delay inf", "--delay must be"},
      {"delay nan", "enqueue k --delay nan", "--delay must be"},
      {"delay 1e12", "enqueue k --delay 1e12", "--delay must be"},
      {"delay -5", "enqueue k --delay=-5", "--delay must be"},
      {"count 0", "enqueue k --count 0", "--count must be 1..100000"},
      {"count 100001", "enqueue k --count 100001", "--count must be 1..100000"},
      {"args file missing", "enqueue k --args-file /nonexistent/args.json", "cannot open"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto before = snapshot();
    const auto start = SteadyClock::now();
    const auto res = run_cli(base() + " " + c.args);
    EXPECT_NE(res.exit_code, 0) << res.output;
    EXPECT_THAT(res.output, HasSubstr(c.expected));
    EXPECT_LT(SteadyClock::now() - start, 10s);
    EXPECT_EQ(snapshot(), before);
  }
}

TEST_F(BadInputTest, CliRejectsArgsOverOneMebibyte) {
  // 10 MB of JSON cannot be a command-line word (Linux caps one at 128 KiB), so the CLI
  // reads large args from --args-file; both paths stop at 1 MiB.
  const std::string path = "/tmp/" + schema_ + ".json";
  for (const std::size_t size : {std::size_t{10} << 20, kMaxArgsBytes + 1}) {
    SCOPED_TRACE(size);
    {
      std::FILE* f = std::fopen(path.c_str(), "wb");
      ASSERT_NE(f, nullptr);
      const std::string body = "\"" + std::string(size - 2, 'a') + "\"";
      std::fwrite(body.data(), 1, body.size(), f);
      std::fclose(f);
    }
    const auto before = snapshot();
    const auto res = run_cli(base() + " enqueue k --args-file " + path);
    EXPECT_EQ(res.exit_code, 1) << res.output.substr(0, 500);
    EXPECT_THAT(res.output, HasSubstr("limited to 1 MiB"));
    EXPECT_EQ(snapshot(), before);
  }
  // At the limit it is accepted, from a file and from standard input.
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::string body = "\"" + std::string(kMaxArgsBytes - 2, 'a') + "\"";
    std::fwrite(body.data(), 1, body.size(), f);
    std::fclose(f);
  }
  const auto ok = run_cli(base() + " enqueue big --args-file " + path);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  const auto piped = run_cli(base() + " enqueue big --args-file - < " + path);
  EXPECT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE kind = 'big'"), 2);
  std::remove(path.c_str());
}

TEST_F(BadInputTest, CliSchemaWithSqlIsRejectedBeforeAnyStatement) {
  for (const std::string cmd :
       {"enqueue k", "queue set-shards hot 2", "queue shards hot", "migrate", "storage status"}) {
    SCOPED_TRACE(cmd);
    const auto before = snapshot();
    const auto res =
        run_cli("--database-url '" + database_url() + "' --schema 'awa; drop table x' " + cmd);
    EXPECT_EQ(res.exit_code, 1) << res.output;
    EXPECT_THAT(res.output, HasSubstr("invalid schema name 'awa; drop table x'"));
    EXPECT_EQ(snapshot(), before);
  }
  EXPECT_EQ(count("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'awa;%'"), 0);
}

TEST_F(BadInputTest, CliSchemaThatWasNeverMigratedSaysToMigrate) {
  // Found by this suite: the message was the statement's first comment line plus
  // `relation "s.queue_meta" does not exist`, with nothing on what to do.
  const std::string missing = unique_schema_name("never_migrated");
  for (const std::string cmd :
       {"enqueue k", "enqueue k --count 1500", "queue set-shards hot 2", "queue shards hot"}) {
    SCOPED_TRACE(cmd);
    const auto res =
        run_cli("--database-url '" + database_url() + "' --schema " + missing + " " + cmd);
    EXPECT_EQ(res.exit_code, 1) << res.output;
    EXPECT_THAT(res.output, HasSubstr("schema " + missing + " holds no awa tables"));
    EXPECT_THAT(res.output, HasSubstr("hint: run: awa migrate --schema " + missing));
  }
  EXPECT_EQ(count("SELECT count(*) FROM pg_namespace WHERE nspname = '" + missing + "'"), 0);
}

TEST_F(BadInputTest, CliDatabaseThatDoesNotAnswerFailsFast) {
  // A refused port, and a port that accepts TCP but never speaks (the listen backlog
  // completes the handshake): both must end with a clear message, not hang; the second
  // is bounded by connect_timeout (5 s).
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string silent = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  for (const std::string& hostport : {std::string("127.0.0.1:1"), silent}) {
    for (const std::string cmd : {"enqueue k", "queue set-shards hot 2"}) {
      SCOPED_TRACE(hostport + " " + cmd);
      const auto before = snapshot();
      const auto start = SteadyClock::now();
      const auto res = run_cli("--database-url 'postgresql://awa@" + hostport + "/awa' --schema " +
                               schema_ + " " + cmd);
      EXPECT_LT(SteadyClock::now() - start, 15s);
      EXPECT_EQ(res.exit_code, 1) << res.output;
      EXPECT_THAT(res.output, HasSubstr("cannot connect to PostgreSQL at " + hostport));
      EXPECT_EQ(snapshot(), before);
    }
  }
  ::close(fd);
}

TEST_F(BadInputTest, CliStoresOddButValidKindsAndTagsExactly) {
  // Kinds are free text (UTF-8 without NUL): quotes, spaces, unicode and SQL fragments are
  // data, never SQL.
  const std::vector<std::string> kinds = {"it's \"quoted\"", "with space",
                                          "caf\xc3\xa9 \xf0\x9f\x98\x80",
                                          "x'); DROP TABLE queue_meta; --", "$1 %s {a,b} \\N NULL"};
  for (const auto& kind : kinds) {
    SCOPED_TRACE(kind);
    const auto res = run_cli(base() + " enqueue " + shell_quote(kind) + " --queue a:b.c-d_E");
    ASSERT_EQ(res.exit_code, 0) << res.output;
    const JobId id = std::stoll(res.output);
    const auto r = conn().query(
        "SELECT kind, queue FROM ready_entries JOIN queue_ids USING (queue_id) WHERE job_id = $1",
        id);
    ASSERT_EQ(r.rows(), 1);
    EXPECT_EQ(r.get<std::string>(0, 0), kind);
    EXPECT_EQ(r.get<std::string>(0, 1), "a:b.c-d_E");
  }
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta"), 1);  // still there
}

// --- the API ------------------------------------------------------------------------------

struct ApiCase {
  const char* name;
  std::function<void(NewJob&)> edit;
  std::string expected;
};

TEST_F(BadInputTest, ApiRejectsBadJobsWithInvalidArgumentAndChangesNothing) {
  const std::vector<ApiCase> cases = {
      {"priority 0", [](NewJob& j) { j.opts.priority = 0; }, "priority 0 is outside 1..4"},
      {"priority 5", [](NewJob& j) { j.opts.priority = 5; }, "priority 5 is outside 1..4"},
      {"max_attempts 0", [](NewJob& j) { j.opts.max_attempts = 0; },
       "max_attempts 0 is outside 1..1000"},
      {"max_attempts 1001", [](NewJob& j) { j.opts.max_attempts = 1001; },
       "max_attempts 1001 is outside 1..1000"},
      {"invalid JSON", [](NewJob& j) { j.args_json = "{\"a\":"; }, "args are not valid JSON"},
      {"JSON with invalid UTF-8", [](NewJob& j) { j.args_json = "\"\xff\""; },
       "args are not valid JSON"},
      {"10 MB args", [](NewJob& j) { j.args_json = "\"" + std::string(10u << 20, 'a') + "\""; },
       "the limit is 1048576 (1 MiB)"},
      {"queue with a quote", [](NewJob& j) { j.opts.queue = "it's"; }, "invalid queue name"},
      {"queue with a space", [](NewJob& j) { j.opts.queue = "a b"; }, "invalid queue name"},
      {"queue in unicode", [](NewJob& j) { j.opts.queue = "caf\xc3\xa9"; },
       "invalid queue name \"caf\xc3\xa9\""},
      {"queue with SQL", [](NewJob& j) { j.opts.queue = "x'; DROP TABLE queue_meta; --"; },
       "invalid queue name"},
      {"queue with a newline", [](NewJob& j) { j.opts.queue = "a\nb"; },
       "invalid queue name \"a\\x0ab\""},
      {"empty kind", [](NewJob& j) { j.kind.clear(); }, "kind must be 1..200 bytes"},
      {"kind with NUL", [](NewJob& j) { j.kind = std::string("a\0b", 3); },
       "kind contains a NUL byte at offset 1"},
      {"ordering key over the limit",
       [](NewJob& j) { j.opts.ordering_key = std::string(kMaxOrderingKeyBytes + 1, '\0'); },
       "ordering_key is 257 bytes; the limit is 256"},
      {"run_at in 1000 years",
       [](NewJob& j) { j.opts.run_at = std::chrono::system_clock::now() + 24h * 365 * 200; },
       "run_at is more than 100 years from now"},
      {"metadata not an object", [](NewJob& j) { j.opts.metadata = Json::array({1}); },
       "metadata must be a JSON object"},
      {"metadata with \\u0000",
       [](NewJob& j) {
         j.opts.metadata = {{"a", std::string(1, '\0')}};
       },
       "\\u0000"},
      {"33 tags", [](NewJob& j) { j.opts.tags.assign(33, "t"); }, "33 tags; the limit is 32"},
      {"tag of 256 bytes", [](NewJob& j) { j.opts.tags = {std::string(256, 't')}; },
       "tag 0 is 256 bytes; the limit is 255"},
  };
  for (const auto& c : cases) {
    for (const bool copy : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (copy ? " (COPY)" : " (INSERT)"));
      NewJob bad("k", Json::object(), on_queue("hot"));
      c.edit(bad);
      const std::vector<NewJob> batch{NewJob("good", Json::object(), on_queue("hot")), bad};
      const auto before = snapshot();
      try {
        if (copy) {
          storage::insert_many_copy(*store_, conn(), batch);
        } else {
          storage::insert_many(*store_, conn(), batch);
        }
        ADD_FAILURE() << "accepted";
      } catch (const InvalidArgument& e) {
        EXPECT_THAT(e.what(), HasSubstr(c.expected));
        EXPECT_THAT(e.what(), HasSubstr("job 1"));
        EXPECT_EQ(e.sqlstate(), "22023");
        EXPECT_EQ(e.retry(), Retry::kDoNotRetry);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "not an InvalidArgument: " << e.what();
      }
      EXPECT_EQ(snapshot(), before);
    }
  }
}

TEST_F(BadInputTest, ApiRejectsBadShardCountsQueuesAndSchemas) {
  Connection app = Connection::connect(database_url());
  const Admin admin(schema_);
  for (const int shards : {0, 65, -1}) {
    SCOPED_TRACE(shards);
    const auto before = snapshot();
    try {
      admin.set_enqueue_shards(app, "hot", shards);
      ADD_FAILURE() << "accepted";
    } catch (const ConstraintViolation& e) {
      EXPECT_EQ(e.sqlstate(), "23514") << e.what();
      EXPECT_EQ(e.retry(), Retry::kDoNotRetry);
    }
    EXPECT_EQ(snapshot(), before);
  }
  const auto before = snapshot();
  try {
    admin.set_enqueue_shards(app, "x'; DROP TABLE queue_meta; --", 2);
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("invalid queue name"));
  }
  EXPECT_EQ(snapshot(), before);

  for (const std::string schema : {"awa; drop table x", "awa\"", ""}) {
    SCOPED_TRACE(schema);
    EXPECT_THROW(QueueStorage(StorageOptions{schema}), InvalidArgument);
    EXPECT_THROW(Admin{schema}, InvalidArgument);
  }
}

TEST_F(BadInputTest, ApiConnectToADatabaseThatDoesNotAnswerThrowsConnectionError) {
  const auto start = SteadyClock::now();
  try {
    Connection::connect("postgresql://awa@127.0.0.1:1/awa", 2s);
    ADD_FAILURE() << "connected";
  } catch (const ConnectionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot connect to PostgreSQL at 127.0.0.1:1"));
    EXPECT_EQ(e.retry(), Retry::kRetryCall);
  }
  EXPECT_LT(SteadyClock::now() - start, 10s);
}

}  // namespace
}  // namespace awa::testing
