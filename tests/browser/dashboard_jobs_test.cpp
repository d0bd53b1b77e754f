// The dashboard's job pages in a real browser: the job list with its URL filters and bulk
// retry, one job's errors and retry, the dead letters, the rings, and a read-only server
// (dashboard_fixture.hpp has the seed).
#include <fmt/format.h>

#include <algorithm>

#include "dashboard_fixture.hpp"

namespace awa::testing {
namespace {

using nlohmann::json;

std::string job_row(JobId id, const std::string& table) {
  return fmt::format("table#{} tr[data-job-id=\"{}\"]", table, id);
}

std::vector<std::string> ids_shown(const std::vector<Row>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.data.at("jobId"));
  return out;
}

// The rows of table#jobs against list_jobs with the same filter, in order.
void expect_jobs_table(const std::vector<Row>& shown, const std::vector<JobSummary>& want) {
  ASSERT_EQ(shown.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& j = want[i];
    const auto& c = shown[i].cells;
    const std::string where = fmt::format("jobs row {} (job {})", i, j.id);
    EXPECT_EQ(shown[i].data.at("jobId"), std::to_string(j.id)) << where;
    EXPECT_EQ(leading_int(c.at("id")), j.id) << where;
    EXPECT_EQ(c.at("queue"), j.queue) << where;
    EXPECT_EQ(c.at("kind"), j.kind) << where;
    EXPECT_EQ(c.at("state"), j.state) << where;
    EXPECT_EQ(leading_int(c.at("priority")), j.priority) << where;
    EXPECT_EQ(leading_int(c.at("attempt")), j.attempt) << where;
    EXPECT_EQ(leading_int(c.at("enqueue_shard")),
              j.enqueue_shard ? std::optional<std::int64_t>(*j.enqueue_shard) : std::nullopt)
        << where << ": " << c.at("enqueue_shard");
    EXPECT_FALSE(c.at("run_at").empty()) << where;
  }
}

// A form control's current value.
std::string form_value(browser::WebDriver& web, const std::string& css) {
  const auto v = web.execute(
      "const e = document.querySelector(arguments[0]); "
      "return e ? e.value : null;",
      {css});
  return v.is_null() ? "<missing " + css + ">" : v.get<std::string>();
}

TEST_F(DashboardTest, JobsPageFiltersFromTheUrlAndRetriesTheSelectedJob) {
  open(fmt::format("/jobs?queue={}&state=failed", kOrders), "jobs");
  JobFilter f;
  f.queue = kOrders;
  f.state = "failed";
  const auto failed = admin().list_jobs(ac(), f);
  ASSERT_EQ(failed.size(), 2U);
  expect_jobs_table(rows("table#jobs tbody tr[data-job-id]"), failed);
  for (const auto& j : failed) {
    EXPECT_TRUE(
        exists(job_row(j.id, "jobs") + " a" + css_attr("href", fmt::format("/jobs/{}", j.id))))
        << j.id;
  }
  // The URL's filters are the form's.
  EXPECT_EQ(form_value(web(), "form#filters select[name=queue]"), kOrders);
  EXPECT_EQ(form_value(web(), "form#filters select[name=state]"), "failed");
  EXPECT_EQ(form_value(web(), "form#filters input[name=kind]"), "");
  const auto states = web().execute(
      "return Array.from(document.querySelectorAll('form#filters select[name=state] option'), "
      "o => o.value)");
  std::vector<std::string> want_states{""};
  for (const char* s : kJobStates) want_states.emplace_back(s);
  EXPECT_EQ(states.get<std::vector<std::string>>(), want_states);
  // "" (any) and every queue the database knows; the contract sets no order.
  auto queues = web()
                    .execute(
                        "return Array.from(document.querySelectorAll('form#filters "
                        "select[name=queue] option'), o => o.value)")
                    .get<std::vector<std::string>>();
  std::sort(queues.begin(), queues.end());
  std::vector<std::string> want_queues{""};
  for (const auto& q : admin().list_queues(ac())) want_queues.push_back(q.settings.queue);
  std::sort(want_queues.begin(), want_queues.end());
  EXPECT_EQ(queues, want_queues);
  screenshot("jobs");
  expect_clean_console("jobs");

  // The form navigates to a shareable URL: another state, same queue.
  click("form#filters select[name=state] option[value=\"dlq\"]");
  click("form#filters button[type=submit]");
  wait_for("the URL filters dead-lettered orders", [&] {
    const auto url = web().current_url();
    return url.find("state=dlq") != std::string::npos &&
           url.find(std::string("queue=") + kOrders) != std::string::npos && loaded() >= 1 &&
           form_value(web(), "form#filters select[name=state]") == "dlq";
  });
  f.state = "dlq";
  expect_jobs_table(rows("table#jobs tbody tr[data-job-id]"), admin().list_jobs(ac(), f));
  expect_clean_console("jobs?state=dlq");

  // Bulk retry of one checked row.
  open(fmt::format("/jobs?queue={}&state=failed", kOrders), "jobs");
  const JobId pick = seed_.failed_declined;
  click(job_row(pick, "jobs") + " input.select[type=checkbox]");
  EXPECT_EQ(web().property(web().find(job_row(pick, "jobs") + " input.select"), "checked"), true);
  const int before = loaded();
  click("button#bulk-retry");
  wait_for("the checked job available again", [&] { return state_of(pick) == "available"; });
  EXPECT_EQ(state_of(seed_.failed_timeout), "failed") << "only the checked row is retried";
  f.state = "failed";
  const auto left = admin().list_jobs(ac(), f);
  wait_render_after(before, "the retried job gone from the failed list", [&] {
    return ids_shown(rows("table#jobs tbody tr[data-job-id]")).size() == left.size();
  });
  expect_jobs_table(rows("table#jobs tbody tr[data-job-id]"), left);
  const auto notice = text_of("#notice").value_or("");
  EXPECT_NE(notice.find("retried 1"), std::string::npos) << notice;
  finish_page("jobs-retried");
}

TEST_F(DashboardTest, JobPageShowsErrorsAndArgsAndRetriesAFailedJob) {
  const JobId id = seed_.failed_declined;
  open(fmt::format("/jobs/{}", id), "job");
  const auto d = admin().job(ac(), id);
  ASSERT_TRUE(d);
  EXPECT_EQ(leading_int(text_of("#job-id").value_or("")), id);
  EXPECT_EQ(text_of("#job-state"), d->summary.state);
  EXPECT_EQ(text_of("#job-queue"), d->summary.queue);
  EXPECT_EQ(text_of("#job-kind"), d->summary.kind);
  EXPECT_EQ(text_of("#job-attempt"),
            fmt::format("{} / {}", d->summary.attempt, d->summary.max_attempts));
  const auto args = text_of("pre#job-args").value_or("");
  EXPECT_EQ(json::parse(args, nullptr, false), json::parse(d->args_json)) << args;
  EXPECT_EQ(args, json::parse(d->args_json).dump(2)) << "JSON.stringify(x, null, 2)";
  const auto metadata = text_of("pre#job-metadata").value_or("");
  EXPECT_EQ(json::parse(metadata, nullptr, false), json::parse(d->metadata_json)) << metadata;
  EXPECT_EQ(text_of("#job-callback"), "—");
  EXPECT_FALSE(exists("#result-section:not([hidden])")) << "no callback result on a failed job";

  ASSERT_FALSE(d->errors.empty());
  const auto errors = rows("table#errors tr[data-attempt]");
  ASSERT_EQ(errors.size(), d->errors.size()) << describe_page();
  for (std::size_t i = 0; i < errors.size(); ++i) {
    EXPECT_EQ(errors[i].data.at("attempt"), std::to_string(d->errors[i].attempt));
    EXPECT_EQ(leading_int(errors[i].cells.at("attempt")), d->errors[i].attempt);
    EXPECT_EQ(errors[i].cells.at("error"), d->errors[i].error);
    EXPECT_FALSE(errors[i].cells.at("at").empty());
  }
  std::vector<std::string> events;
  for (const auto& e : d->timeline) events.push_back(e.event);
  EXPECT_EQ(web()
                .execute("return Array.from(document.querySelectorAll('ol#timeline "
                         "li[data-event]'), l => l.dataset.event)")
                .get<std::vector<std::string>>(),
            events);
  EXPECT_FALSE(exists("button#cancel")) << "a failed job cannot be cancelled";
  screenshot("job");
  expect_clean_console("job");

  const int before = loaded();
  click("button#retry");
  wait_for("the job available again", [&] { return state_of(id) == "available"; });
  wait_render_after(before, "the page shows the job available", [&] {
    return text_of("#job-state") == "available" && !exists("button#retry") &&
           exists("button#cancel");
  });
  // The errors stay with the job.
  EXPECT_EQ(rows("table#errors tr[data-attempt]").size(), d->errors.size());
  finish_page("job-retried");

  // An unknown id: the API's message, and the 404 it answered is the only console error.
  const JobId unknown = 999999999;
  web().navigate(fmt::format("{}/jobs/{}", serve().base_url(), unknown));
  wait_for("#error of an unknown job", [&] {
    return text_of("#error").value_or("").find(fmt::format("job {} not found", unknown)) !=
           std::string::npos;
  });
  finish_page("job-unknown", {fmt::format("/api/jobs/{} - Failed to load resource: the server "
                                          "responded with a status of 404",
                                          unknown)});
}

TEST_F(DashboardTest, JobPageShowsTheCallbackIdARunningAttemptRegistered) {
  ASSERT_TRUE(seed_.running_callback);
  open(fmt::format("/jobs/{}", seed_.running), "job");
  EXPECT_EQ(text_of("#job-state"), "running");
  EXPECT_EQ(text_of("#job-callback"), *seed_.running_callback);
  finish_page("job-callback");
}

TEST_F(DashboardTest, JobPageShowsTheResultACallbackCompletedTheJobWith) {
  open(fmt::format("/jobs/{}", seed_.completed_with_result), "job");
  EXPECT_EQ(text_of("#job-state"), "completed");
  ASSERT_TRUE(exists("#result-section:not([hidden])")) << describe_page();
  const auto shown = text_of("pre#job-result").value_or("");
  EXPECT_EQ(json::parse(shown, nullptr, false), seed_.callback_result) << shown;
  finish_page("job-result");
}

TEST_F(DashboardTest, DlqPageListsDeadLettersAndRetriesTheCheckedOne) {
  open("/dlq", "dlq");
  const auto dlq = admin().list_dlq(ac(), DlqFilter{});
  ASSERT_EQ(dlq.size(), 2U);
  const auto shown = rows("table#dlq tbody tr[data-job-id]");
  ASSERT_EQ(shown.size(), dlq.size()) << describe_page();
  for (std::size_t i = 0; i < dlq.size(); ++i) {
    const auto& e = dlq[i];
    const auto& c = shown[i].cells;
    const std::string where = fmt::format("dlq row {} (job {})", i, e.id);
    EXPECT_EQ(shown[i].data.at("jobId"), std::to_string(e.id)) << where;
    EXPECT_EQ(leading_int(c.at("id")), e.id) << where;
    EXPECT_EQ(c.at("queue"), e.queue) << where;
    EXPECT_EQ(c.at("kind"), e.kind) << where;
    EXPECT_EQ(leading_int(c.at("attempt")), e.attempt) << where;
    EXPECT_EQ(c.at("reason"), e.reason) << where;
    EXPECT_FALSE(c.at("dlq_at").empty()) << where;
    ASSERT_FALSE(e.errors.empty());
    EXPECT_NE(c.at("error").find(e.errors.back().error), std::string::npos)
        << where << ": " << c.at("error");
  }
  EXPECT_EQ(text_of("#dlq-count"), std::to_string(dlq.size()));
  screenshot("dlq");
  expect_clean_console("dlq");

  const JobId pick = seed_.dlq_closed;
  click(job_row(pick, "dlq") + " input.select[type=checkbox]");
  const int before = loaded();
  click("button#retry-selected");
  DlqFilter orders_dlq;
  orders_dlq.queue = kOrders;
  wait_for("the checked dead letter retried", [&] {
    const auto now = admin().list_dlq(ac(), orders_dlq);
    return now.size() == 1 && state_of(pick) == "available";
  });
  EXPECT_EQ(state_of(seed_.dlq_chargeback), "dlq") << "only the checked row is retried";
  wait_render_after(before, "one dead letter left on the page", [&] {
    return rows("table#dlq tbody tr[data-job-id]").size() == 1 && text_of("#dlq-count") == "1";
  });
  EXPECT_FALSE(exists(job_row(pick, "dlq")));
  finish_page("dlq-retried");

  // The filter comes from the URL: emails has no dead letters.
  open(fmt::format("/dlq?queue={}", kEmails), "dlq");
  EXPECT_EQ(form_value(web(), "form#filters select[name=queue]"), kEmails);
  EXPECT_TRUE(rows("table#dlq tbody tr[data-job-id]").empty());
  EXPECT_EQ(text_of("#dlq-count"), "0");
  finish_page("dlq-emails");
}

TEST_F(DashboardTest, StoragePageShowsEachRingAsTheDatabaseHasIt) {
  // One rotation, so the rings differ: the queue ring's current slot moves on.
  const auto r = admin().rotate(ac(), "queue");
  ASSERT_TRUE(r.done) << r.reason;
  open("/storage", "storage");
  const auto rings = admin().storage_status(ac());
  ASSERT_EQ(rings.size(), 3U);
  for (const auto& ring : rings) {
    const std::string sec = "section.ring" + css_attr("data-ring", ring.ring);
    const std::string where = "ring " + ring.ring;
    ASSERT_TRUE(exists(sec)) << where << "; " << describe_page();
    EXPECT_EQ(text_of(sec + " span[data-field=\"current_slot\"]"),
              std::to_string(ring.current_slot))
        << where;
    EXPECT_EQ(text_of(sec + " span[data-field=\"generation\"]"), std::to_string(ring.generation))
        << where;
    const auto slots = rows(sec + " tr[data-slot]");
    ASSERT_EQ(slots.size(), ring.slots.size()) << where;
    for (const auto& s : ring.slots) {
      const auto row = std::find_if(slots.begin(), slots.end(), [&](const Row& x) {
        return x.data.at("slot") == std::to_string(s.slot);
      });
      ASSERT_NE(row, slots.end()) << where << " slot " << s.slot;
      EXPECT_EQ(row->cells.at("state"), s.state) << where << " slot " << s.slot;
      EXPECT_EQ(leading_int(row->cells.at("generation")), s.generation)
          << where << " slot " << s.slot;
      EXPECT_EQ(leading_int(row->cells.at("rows")), s.rows) << where << " slot " << s.slot;
    }
    const auto rotation = text_of(sec + " span[data-field=\"last_rotation\"]").value_or("<none>");
    if (ring.last_rotation) {
      EXPECT_NE(rotation, "—") << where;
    } else {
      EXPECT_EQ(rotation, "—") << where;
    }
  }
  finish_page("storage");
}

TEST_F(DashboardTest, ReadOnlyServerShowsNoActionAndRefusesAPost) {
  auto& ro = read_only_serve();
  const auto no_actions = [&](const std::string& page) {
    EXPECT_EQ(web().execute("return document.body.classList.contains('read-only')"), true) << page;
    for (const char* b :
         {"#pause", "#resume", "#retry", "#cancel", "#bulk-retry", "#bulk-cancel",
          "#retry-selected", "#purge-selected", "#retry-matching", "#purge-matching"}) {
      EXPECT_FALSE(exists(std::string("button") + b)) << page << ": " << b;
    }
  };
  open(fmt::format("/jobs/{}", seed_.failed_timeout), "job", &ro);
  no_actions("job");
  // The page's own origin, with the CSRF header the dashboard sends: still refused.
  const auto status = web().execute(
      "return fetch(arguments[0], {method: 'POST', headers: {'X-Awa-Csrf': '1'}})"
      ".then(r => r.status)",
      {fmt::format("/api/jobs/{}/retry", seed_.failed_timeout)});
  EXPECT_EQ(status, 403);
  EXPECT_EQ(state_of(seed_.failed_timeout), "failed");
  finish_page("read-only-job", {fmt::format("/api/jobs/{}/retry - Failed to load resource: "
                                            "the server responded with a status of 403",
                                            seed_.failed_timeout)});

  open("/jobs?state=failed", "jobs", &ro);
  no_actions("jobs");
  EXPECT_FALSE(exists("table#jobs input.select")) << "nothing to select for";
  finish_page("read-only-jobs");
  open("/dlq", "dlq", &ro);
  no_actions("dlq");
  finish_page("read-only-dlq");
  EXPECT_EQ(admin().list_dlq(ac(), DlqFilter{}).size(), 2U);

  open(std::string("/queues/") + kOrders, "queue", &ro);
  no_actions("queue");
  finish_page("read-only-queue");
  EXPECT_FALSE(admin().queue_summary(ac(), kOrders).settings.paused);
}

// With a token, a page opened without the session goes to /login; a wrong token is
// refused on the form; the right one sets the HttpOnly session cookie (no script sees
// it) and returns to the page asked for, which then shows the database's data.
TEST_F(DashboardTest, LoginFormSetsAnHttpOnlySessionAndReturnsToThePage) {
  const std::string token = "browser-test-token-0123456789";
  auto& guarded = token_serve(token);
  const std::string path = std::string("/queues/") + kOrders;
  web().navigate(guarded.base_url() + path);
  wait_for("the login page", [&] {
    return web().current_url().find("/login?next=") != std::string::npos &&
           exists("form#login input[name=token]");
  });
  const auto submit = [&](const std::string& text) {
    const auto input = web().find("form#login input[name=token]");
    web().clear(input);
    web().send_keys(input, text);
    web().click(web().find("form#login button[type=submit]"));
  };
  submit("not-the-token-at-all");
  wait_for("the wrong token refused", [&] {
    const auto e = text_of("#error");
    return e && e->find("wrong token") != std::string::npos;
  });
  EXPECT_NE(web().current_url().find("/login"), std::string::npos);
  submit(token);
  wait_for("back on the queue page, rendered", [&] {
    const auto p = web().execute("return document.getElementById('page').dataset.page");
    return web().current_url() == guarded.base_url() + path && p == "queue" && loaded() >= 1;
  });
  EXPECT_EQ(text_of("#queue-name"), kOrders);
  EXPECT_EQ(web().execute("return document.cookie"), "") << "the session cookie is HttpOnly";
  // The first load's /api/info answered 401 (that is what sent the page to /login), and
  // so did the wrong token.
  finish_page("login", {"/api/info - Failed to load resource: the server responded with a "
                        "status of 401",
                        "/login - Failed to load resource: the server responded with a status "
                        "of 401"});
}

}  // namespace
}  // namespace awa::testing
