// Fixture of the dashboard's browser test (dashboard_browser_test.cpp): a migrated schema
// seeded with jobs in every state, the real `awa serve` binary on it, and one headless
// chromium (through chromedriver) shared by the whole suite.
//
// The seed, through the engine's own paths (admin_jobs_support.hpp):
//   "orders": enqueue_shards = 4, DLQ enabled (after its failed jobs were made, so they
//     stay failed). Claimed on shards 0, 1 and 3 only: completed, failed (two, with
//     different errors), retryable, dlq (two), running. Available: 3 / 2 / 40 / 3 on
//     shards 0..3, plus a cancelled job's tombstone on shard 3 (its lag counts it, its
//     available does not), a scheduled job. Shard 2 is starved: lag 40 against a median
//     of 3.5 and no claims.
//   "emails": one shard, paused; 2 available, 1 completed, 1 failed.
//
// Every expectation is read back from the database through awa::Admin, not from these
// numbers. Screenshots go to AWA_BROWSER_OUTPUT_DIR/<page>.png.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "admin_jobs_support.hpp"
#include "browser/child_process.hpp"
#include "browser/webdriver.hpp"

namespace awa::testing {

// An `awa serve` child process on 127.0.0.1 and a kernel-chosen port.
class ServeProcess {
 public:
  // `extra`: more `awa serve` options, e.g. {"--token-file", path}.
  ServeProcess(const std::string& schema, bool read_only, const std::string& log_path,
               const std::vector<std::string>& extra = {});
  const std::string& base_url() const { return base_url_; }
  std::string log() const { return process_->log(); }
  // SIGTERM, then SIGKILL after 250 ms. The browser holds idle keep-alive connections,
  // and awa serve (httplib) only returns from stop() when they time out (5 s): nothing a
  // test needs to wait for.
  void stop() { process_->stop(std::chrono::milliseconds(250)); }

 private:
  std::unique_ptr<browser::ChildProcess> process_;
  std::string base_url_;
};

struct Seed {
  JobId failed_declined = 0;  // orders, kind "charge", error "card declined ..."
  JobId failed_timeout = 0;   // orders, kind "charge", error "timeout ..."
  JobId retryable = 0;
  JobId running = 0;
  std::optional<std::string> running_callback;  // registered by its attempt
  JobId completed_with_result = 0;              // completed by a callback with a result
  nlohmann::json callback_result = {{"tracking", "DHL-42"}, {"parcels", 2}};
  JobId scheduled = 0;
  JobId cancelled = 0;
  JobId dlq_closed = 0;      // orders, kind "refund"
  JobId dlq_chargeback = 0;  // orders, kind "refund"
  JobId emails_failed = 0;
  std::map<int, int> claims_by_shard;  // orders: claims the seed made, per shard
  nlohmann::json failed_declined_args;
};

// One table row as the page shows it: the row's data-* attributes, its class, and the
// trimmed text of each cell with a data-col attribute.
struct Row {
  std::map<std::string, std::string> data;
  std::string cls;
  std::map<std::string, std::string> cells;
  bool has_class(const std::string& c) const;
};

class DashboardTest : public JobAdminTest {
 public:
  // AWA_BROWSER_OUTPUT_DIR, created: screenshots and the child processes' logs.
  static std::filesystem::path output_dir();

 protected:
  static constexpr const char* kOrders = "orders";
  static constexpr const char* kEmails = "emails";
  static constexpr int kShards = 4;
  static constexpr int kStarvedShard = 2;
  static constexpr int kWindowWidth = 1280;
  static constexpr int kWindowHeight = 900;
  static constexpr int kMaxScreenshotHeight = 4000;

  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUpSchema() override;
  void TearDown() override;

  browser::WebDriver& web() { return *driver_; }
  ServeProcess& serve() { return *serve_; }
  ServeProcess& read_only_serve();
  // A third server that requires `token` (written to a token file): bearer or login.
  ServeProcess& token_serve(const std::string& token);

  // Loads `path` of `server` (default: the read-write one) and waits until #page says
  // data-page = `page` with at least one completed render.
  void open(const std::string& path, const std::string& page, ServeProcess* server = nullptr);
  // #page's data-loaded now.
  int loaded();
  // Waits until the page has rendered again after `before` and `ready` holds.
  void wait_render_after(int before, const std::string& what, const std::function<bool()>& ready);
  // Waits (bounded) until `pred` holds, checking the database or the page.
  void wait_for(const std::string& what, const std::function<bool()>& pred);

  // The trimmed textContent of the first element matching `css`; nullopt when none.
  std::optional<std::string> text_of(const std::string& css);
  bool exists(const std::string& css);
  std::vector<Row> rows(const std::string& css);
  // Finds and clicks `css` (again, when a re-render made the element stale meanwhile).
  void click(const std::string& css);

  // Writes <output dir>/<name>.png: the whole page (up to kMaxScreenshotHeight).
  void screenshot(const std::string& name);
  // Fails the test for every SEVERE console entry since the last read, except those
  // containing one of `allowed` (each allowed entry is expected: a 404 the test caused).
  void expect_clean_console(const std::string& page, const std::vector<std::string>& allowed = {});
  // Screenshot plus console check: the end of every page's checks.
  void finish_page(const std::string& name, const std::vector<std::string>& allowed = {}) {
    screenshot(name);
    expect_clean_console(name, allowed);
  }

  std::string describe_page();

  Seed seed_;

 private:
  void seed();

  static inline browser::WebDriver* driver_ = nullptr;
  std::unique_ptr<ServeProcess> serve_;
  std::unique_ptr<ServeProcess> read_only_;
  std::unique_ptr<ServeProcess> token_;
};

// A CSS attribute selector: [name="value"].
std::string css_attr(const std::string& name, const std::string& value);

// "12" -> 12; the leading integer of a cell ("1 / 25" -> 1); nullopt when none.
std::optional<std::int64_t> leading_int(const std::string& text);

}  // namespace awa::testing
