#include "dashboard_fixture.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <regex>
#include <thread>

namespace awa::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// <output dir>/logs/<what>.log, overwritten by the next run.
std::string log_path(const std::string& what) {
  const auto dir = DashboardTest::output_dir() / "logs";
  std::filesystem::create_directories(dir);
  return (dir / (what + ".log")).string();
}

std::string test_name() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info != nullptr ? info->name() : "test";
}

// One element's text in one script run: atomic against the page's 3 s re-render.
constexpr const char* kTextScript = R"(
  const e = document.querySelector(arguments[0]);
  return e ? e.textContent.trim() : null;)";

constexpr const char* kRowsScript = R"(
  return Array.from(document.querySelectorAll(arguments[0]), r => ({
    data: Object.assign({}, r.dataset),
    cls: r.getAttribute('class') || '',
    cells: Object.fromEntries(Array.from(r.querySelectorAll('td[data-col]'),
                                         c => [c.dataset.col, c.textContent.trim()]))
  }));)";

constexpr const char* kPageScript = R"(
  const m = document.getElementById('page');
  const err = document.getElementById('error');
  const notice = document.getElementById('notice');
  return {
    url: location.href,
    page: m ? (m.dataset.page || '') : null,
    loaded: m ? (parseInt(m.dataset.loaded, 10) || 0) : -1,
    error: err ? err.textContent.trim() : '',
    notice: notice ? notice.textContent.trim() : '',
    body: document.body ? document.body.innerText.slice(0, 600) : ''
  };)";

}  // namespace

std::optional<std::int64_t> leading_int(const std::string& text) {
  static const std::regex re(R"(^\s*(-?[0-9]+))");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return std::nullopt;
  return std::stoll(m[1].str());
}

std::string css_attr(const std::string& name, const std::string& value) {
  return "[" + name + "=\"" + value + "\"]";
}

bool Row::has_class(const std::string& c) const {
  std::stringstream ss(cls);
  std::string word;
  while (ss >> word) {
    if (word == c) return true;
  }
  return false;
}

ServeProcess::ServeProcess(const std::string& schema, bool read_only, const std::string& log,
                           const std::vector<std::string>& extra) {
  std::vector<std::string> argv{AWA_CLI_PATH, "--schema", schema, "serve", "--addr", "127.0.0.1:0"};
  if (read_only) argv.emplace_back("--read-only");
  argv.insert(argv.end(), extra.begin(), extra.end());
  // DATABASE_URL comes from the test's environment.
  process_ = std::make_unique<browser::ChildProcess>(argv, log);
  const std::string port = process_->wait_for_log(
      std::regex(R"(listening on http://127\.0\.0\.1:([0-9]+)/)"), seconds(20));
  base_url_ = "http://127.0.0.1:" + port;
}

std::filesystem::path DashboardTest::output_dir() {
  std::filesystem::path dir(AWA_BROWSER_OUTPUT_DIR);
  std::filesystem::create_directories(dir);
  return dir;
}

void DashboardTest::SetUpTestSuite() {
  browser::WebDriverOptions o;
  o.log_path = log_path("chromedriver");
  o.width = kWindowWidth;
  o.height = kWindowHeight;
  driver_ = new browser::WebDriver(o);
}

void DashboardTest::TearDownTestSuite() {
  delete driver_;
  driver_ = nullptr;
}

void DashboardTest::SetUpSchema() {
  JobAdminTest::SetUpSchema();
  ASSERT_NE(driver_, nullptr) << "the browser did not start (see SetUpTestSuite's error)";
  seed();
  serve_ = std::make_unique<ServeProcess>(schema_, false, log_path("serve-" + test_name()));
  // Whatever an earlier test left in the console was checked then; start clean.
  web().browser_log();
}

void DashboardTest::TearDown() {
  // Leave the page before its server goes: the 3 s refresh would otherwise fail against
  // a closed port, and console errors after this point belong to no check.
  if (driver_ != nullptr) {
    try {
      web().navigate("about:blank");
      expect_clean_console("(after the last page)");
    } catch (const std::exception& e) {
      ADD_FAILURE() << "leaving the page: " << e.what();
    }
  }
  for (auto* s : {serve_.get(), read_only_.get(), token_.get()}) {
    if (s == nullptr) continue;
    s->stop();
    if (HasFailure()) std::cerr << "--- awa serve output:\n" << s->log() << "\n";
  }
  serve_.reset();
  read_only_.reset();
  token_.reset();
  JobAdminTest::TearDown();
}

ServeProcess& DashboardTest::read_only_serve() {
  if (!read_only_)
    read_only_ =
        std::make_unique<ServeProcess>(schema_, true, log_path("serve-read-only-" + test_name()));
  return *read_only_;
}

ServeProcess& DashboardTest::token_serve(const std::string& token) {
  if (!token_) {
    const auto file = output_dir() / "logs" / ("token-" + test_name());
    std::ofstream(file) << token << "\n";
    token_ =
        std::make_unique<ServeProcess>(schema_, false, log_path("serve-token-" + test_name()),
                                       std::vector<std::string>{"--token-file", file.string()});
  }
  return *token_;
}

void DashboardTest::seed() {
  admin().set_enqueue_shards(ac(), kOrders, kShards);
  int key_counter = 0;
  // A distinct ordering key per job, on the shard asked for.
  auto on = [&](int shard, int max_attempts = 25) {
    return opts(kOrders, 2, key_on_shard(kShards, shard, "o" + std::to_string(key_counter++) + "-"),
                max_attempts);
  };
  // Only one job is available whenever a claim runs, so each claim takes the job just
  // enqueued (claim_one checks it).
  auto claimed = [&](const InsertOpts& o, const std::string& kind, const nlohmann::json& args) {
    const JobId id = enqueue(o, kind, args);
    const auto entry = claim_one(kOrders, id);
    ++seed_.claims_by_shard[entry.enqueue_shard];
    return entry;
  };

  EXPECT_EQ(finish(claimed(on(0), "ship", {{"order", 1}}), Outcome::kCompleted), "completed");
  {
    // Completed by another system's callback, with its answer: the job page shows it.
    const auto e = claimed(on(1), "ship", {{"order", 2}});
    seed_.completed_with_result = e.job_id;
    const auto cb = store_->wait_for_callback(ac(), e, std::chrono::hours(1));
    EXPECT_TRUE(cb);
    EXPECT_EQ(admin().complete_external(ac(), cb.value_or(""), seed_.callback_result.dump()).state,
              "completed");
  }

  seed_.failed_declined_args = {{"order", 1001}, {"amount_cents", 2550}, {"currency", "EUR"}};
  auto e = claimed(on(0, 1), "charge", seed_.failed_declined_args);
  seed_.failed_declined = e.job_id;
  EXPECT_EQ(finish(e, Outcome::kRetry, "card declined: insufficient funds"), "failed");
  e = claimed(on(3, 1), "charge", {{"order", 1002}});
  seed_.failed_timeout = e.job_id;
  EXPECT_EQ(finish(e, Outcome::kRetry, "timeout talking to the bank after 30 s"), "failed");

  e = claimed(on(1), "ship", {{"order", 3}});
  seed_.retryable = e.job_id;
  EXPECT_EQ(finish(e, Outcome::kRetry, "carrier busy", std::chrono::hours(1)), "retried");

  set_dlq(kOrders, true);
  e = claimed(on(3), "refund", {{"order", 1003}});
  seed_.dlq_closed = e.job_id;
  EXPECT_EQ(finish(e, Outcome::kFail, "fatal: account closed"), "dlq");
  e = claimed(on(0), "refund", {{"order", 1004}});
  seed_.dlq_chargeback = e.job_id;
  EXPECT_EQ(finish(e, Outcome::kFail, "fatal: chargeback"), "dlq");

  {
    const auto running = claimed(on(1), "ship", {{"order", 4}});
    seed_.running = running.job_id;
    // An attempt waiting on another system: the job page shows its callback id.
    seed_.running_callback = store_->register_callback(ac(), running, std::chrono::hours(1));
  }

  seed_.cancelled = enqueue(on(3), "ship", {{"order", 5}});
  EXPECT_EQ(admin().cancel_job(ac(), seed_.cancelled), "available");
  {
    InsertOpts o = opts(kOrders);
    o.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
    seed_.scheduled = enqueue(o, "ship", {{"order", 6}});
  }
  const std::map<int, int> available{{0, 3}, {1, 2}, {kStarvedShard, 40}, {3, 3}};
  for (const auto& [shard, n] : available) {
    std::vector<NewJob> jobs;
    for (int i = 0; i < n; ++i) jobs.emplace_back("ship", nlohmann::json{{"n", i}}, on(shard));
    storage::insert_many(*store_, conn(), jobs);
  }

  const JobId mail_done = enqueue(opts(kEmails), "send", {{"to", "a@example.com"}});
  EXPECT_EQ(finish(claim_one(kEmails, mail_done), Outcome::kCompleted), "completed");
  seed_.emails_failed = enqueue(opts(kEmails, 2, std::nullopt, 1), "send", {{"to", "b@example"}});
  EXPECT_EQ(finish(claim_one(kEmails, seed_.emails_failed), Outcome::kRetry,
                   "smtp 550: mailbox unavailable"),
            "failed");
  enqueue(opts(kEmails), "send", {{"to", "c@example.com"}});
  enqueue(opts(kEmails), "send", {{"to", "d@example.com"}});
  admin().pause_queue(ac(), kEmails);
}

std::string DashboardTest::describe_page() { return web().execute(kPageScript).dump(); }

void DashboardTest::open(const std::string& path, const std::string& page, ServeProcess* server) {
  web().navigate((server != nullptr ? *server : serve()).base_url() + path);
  browser::wait_until<bool>(
      "page " + path + " rendered as data-page=" + page,
      [&]() -> std::optional<bool> {
        const auto p = web().execute(kPageScript);
        if (p["page"] == page && p["loaded"].get<int>() >= 1) return true;
        return std::nullopt;
      },
      [this] { return describe_page(); });
}

int DashboardTest::loaded() { return web().execute(kPageScript)["loaded"].get<int>(); }

void DashboardTest::wait_render_after(int before, const std::string& what,
                                      const std::function<bool()>& ready) {
  browser::wait_until<bool>(
      what + " (after render " + std::to_string(before) + ")",
      [&]() -> std::optional<bool> {
        if (loaded() > before && ready()) return true;
        return std::nullopt;
      },
      [this] { return describe_page(); });
}

void DashboardTest::wait_for(const std::string& what, const std::function<bool()>& pred) {
  browser::wait_until<bool>(
      what,
      [&]() -> std::optional<bool> {
        if (pred()) return true;
        return std::nullopt;
      },
      [this] { return describe_page(); });
}

std::optional<std::string> DashboardTest::text_of(const std::string& css) {
  const auto v = web().execute(kTextScript, {css});
  if (v.is_null()) return std::nullopt;
  return v.get<std::string>();
}

bool DashboardTest::exists(const std::string& css) { return !web().find_all(css).empty(); }

std::vector<Row> DashboardTest::rows(const std::string& css) {
  std::vector<Row> out;
  for (const auto& r : web().execute(kRowsScript, {css})) {
    Row row;
    for (const auto& [k, v] : r["data"].items()) row.data[k] = v.get<std::string>();
    row.cls = r["cls"].get<std::string>();
    for (const auto& [k, v] : r["cells"].items()) row.cells[k] = v.get<std::string>();
    out.push_back(std::move(row));
  }
  return out;
}

void DashboardTest::click(const std::string& css) {
  browser::wait_until<bool>(
      "click " + css,
      [&]() -> std::optional<bool> {
        web().click(web().find(css));
        return true;
      },
      [this] { return describe_page(); });
}

void DashboardTest::screenshot(const std::string& name) {
  // The whole page, not only the first screen: the window grows to the page's height
  // (up to a bound) for the picture, then goes back to its size.
  const auto size = web().execute(
      "return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight]");
  const int height = std::min(size[0].get<int>() + size[1].get<int>(), kMaxScreenshotHeight);
  if (height > kWindowHeight) web().set_window_size(kWindowWidth, height);
  web().screenshot((output_dir() / (name + ".png")).string());
  if (height > kWindowHeight) web().set_window_size(kWindowWidth, kWindowHeight);
}

void DashboardTest::expect_clean_console(const std::string& page,
                                         const std::vector<std::string>& allowed) {
  for (const auto& e : web().browser_log()) {
    if (e.level != "SEVERE") continue;
    bool ok = false;
    for (const auto& a : allowed) ok = ok || e.message.find(a) != std::string::npos;
    EXPECT_TRUE(ok) << "console error on " << page << " (" << e.source << "): " << e.message;
  }
}

}  // namespace awa::testing
