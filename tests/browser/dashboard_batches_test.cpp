// The dashboard's batch pages in a real browser (docs/workflows.md, "Batches"): the list
// with each batch's progress bar, one batch's counts, members and completion job, and the
// API's answers for an unknown and a bad name. The batches are made here, through the
// engine's paths (dashboard_fixture.hpp has the rest of the seed); every expectation is
// read back through awa::WorkflowAdmin.
#include <fmt/format.h>

#include <algorithm>

#include "awa/workflows.hpp"
#include "dashboard_fixture.hpp"

namespace awa::testing {
namespace {

using nlohmann::json;

constexpr const char* kImport = "nightly-import";      // sealed, every member ended
constexpr const char* kOrderItems = "order-42.items";  // open, some members pending
constexpr const char* kImportQueue = "imports";
constexpr const char* kItemsQueue = "items";

std::string batch_row(const std::string& name) {
  return "table#batches tbody tr" + css_attr("data-batch", name);
}

// The progress bar's segments under `css`: {"completed": width in %, ...}.
std::map<std::string, double> segments(browser::WebDriver& web, const std::string& css) {
  const auto v = web.execute(R"(
    const out = {};
    for (const s of document.querySelectorAll(arguments[0] + ' .progress .seg'))
      out[s.dataset.seg] = parseFloat(s.style.width);
    return out;)",
                             {css});
  std::map<std::string, double> out;
  for (const auto& [k, w] : v.items()) out[k] = w.get<double>();
  return out;
}

void expect_bar(browser::WebDriver& web, const std::string& css, const Batch& b,
                const std::string& where) {
  const auto seg = segments(web, css);
  ASSERT_EQ(seg.size(), 3U) << where;
  const auto share = [&](std::int64_t n) {
    return b.members == 0 ? 0.0 : 100.0 * static_cast<double>(n) / static_cast<double>(b.members);
  };
  EXPECT_NEAR(seg.at("completed"), share(b.completed), 0.01) << where;
  EXPECT_NEAR(seg.at("failed"), share(b.failed), 0.01) << where;
  EXPECT_NEAR(seg.at("cancelled"), share(b.cancelled), 0.01) << where;
}

TEST_F(DashboardTest, BatchesPageShowsEachBatchWithItsProgressAndTheBatchPageItsMembers) {
  const WorkflowAdmin workflows(schema_);
  BatchOptions import_options;
  import_options.on_complete = "import_done";
  import_options.queue = "reports";
  import_options.on_complete_args = {{"day", "mon"}};
  workflows.open_batch(ac(), kImport, import_options);
  InsertOpts member = opts(kImportQueue, 2, std::nullopt, 1);
  member.batch = kImport;
  std::vector<JobId> imported;
  for (int i = 0; i < 3; ++i) imported.push_back(enqueue(member, "import", {{"file", i}}));
  workflows.seal_batch(ac(), kImport);
  // The last cancelled while it waits, the first completed, the second failed for good.
  EXPECT_EQ(admin().cancel_job(ac(), imported[2]), "available");
  EXPECT_EQ(finish(claim_one(kImportQueue, imported[0]), Outcome::kCompleted), "completed");
  EXPECT_EQ(finish(claim_one(kImportQueue, imported[1]), Outcome::kRetry, "bad row 7"), "failed");

  BatchOptions order_options;
  order_options.on_complete = "order_done";
  workflows.open_batch(ac(), kOrderItems, order_options);
  InsertOpts item = opts(kItemsQueue);
  item.batch = kOrderItems;
  std::vector<JobId> items;
  for (int i = 0; i < 5; ++i) items.push_back(enqueue(item, "line_item", {{"line", i}}));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(
        finish(claim_one(kItemsQueue, items[static_cast<std::size_t>(i)]), Outcome::kCompleted),
        "completed");
  }

  const auto import = workflows.batch(ac(), kImport);
  const auto order = workflows.batch(ac(), kOrderItems);
  ASSERT_TRUE(import && order);
  ASSERT_TRUE(import->finished && import->completion_job) << to_json(*import).dump();
  ASSERT_EQ(order->completed, 2);
  ASSERT_EQ(order->pending, 3);

  // The list: the newest first, each row's counts, bar and completion job.
  open("/batches", "batches");
  const auto listed = workflows.list_batches(ac());
  const auto shown = rows("table#batches tbody tr[data-batch]");
  ASSERT_EQ(shown.size(), listed.size()) << describe_page();
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const Batch& b = listed[i];
    const auto& c = shown[i].cells;
    const std::string where = "batches row " + b.name;
    EXPECT_EQ(shown[i].data.at("batch"), b.name) << where;
    EXPECT_EQ(c.at("name"), b.name) << where;
    EXPECT_EQ(c.at("state"), b.finished ? "finished" : b.sealed ? "sealed" : "open") << where;
    EXPECT_EQ(c.at("progress"),
              fmt::format("{}/{}", b.completed + b.failed + b.cancelled, b.members))
        << where;
    EXPECT_EQ(leading_int(c.at("completed")), b.completed) << where;
    EXPECT_EQ(leading_int(c.at("failed")), b.failed) << where;
    EXPECT_EQ(leading_int(c.at("cancelled")), b.cancelled) << where;
    EXPECT_EQ(leading_int(c.at("pending")), b.pending) << where;
    EXPECT_EQ(c.at("on_complete"), b.on_complete.value_or("—")) << where;
    expect_bar(web(), batch_row(b.name), b, where);
    EXPECT_TRUE(exists(batch_row(b.name) + " td[data-col=\"name\"] a" +
                       css_attr("href", "/batches/" + b.name)))
        << where;
    if (b.completion_job) {
      EXPECT_EQ(c.at("completion_job"), fmt::format("job {}", *b.completion_job)) << where;
      EXPECT_TRUE(exists(batch_row(b.name) + " a" +
                         css_attr("href", fmt::format("/jobs/{}", *b.completion_job))))
          << where;
    } else {
      EXPECT_EQ(c.at("completion_job"), "—") << where;
    }
  }
  ASSERT_EQ(listed.size(), 2U);
  EXPECT_EQ(listed[0].name, kOrderItems) << "the newest first";
  EXPECT_TRUE(exists("header nav a#nav-batches.current"));
  finish_page("batches");

  // Only those not finished: the checkbox puts it in the URL.
  click("form#filters input[name=open]");
  wait_for("only the open batch listed", [&] {
    return web().current_url().find("/batches?open=1") != std::string::npos && loaded() >= 1 &&
           rows("table#batches tbody tr[data-batch]").size() == 1;
  });
  EXPECT_TRUE(exists(batch_row(kOrderItems)));
  EXPECT_FALSE(exists(batch_row(kImport)));
  finish_page("batches-open");

  // One batch: its counts, bar, members (each a link to its job) and completion job.
  open("/batches", "batches");
  click(batch_row(kImport) + " td[data-col=\"name\"] a");
  wait_for("the batch page", [&] {
    return web().current_url() == serve().base_url() + "/batches/" + kImport &&
           text_of("#batch-state") == "finished";
  });
  EXPECT_EQ(text_of("#batch-name"), kImport);
  EXPECT_EQ(text_of("#batch-progress"),
            fmt::format("{}/{} ended ({} completed, {} failed, {} cancelled)",
                        import->completed + import->failed + import->cancelled, import->members,
                        import->completed, import->failed, import->cancelled));
  EXPECT_EQ(text_of("#batch-members"), std::to_string(import->members));
  EXPECT_EQ(text_of("#batch-completed"), std::to_string(import->completed));
  EXPECT_EQ(text_of("#batch-failed"), std::to_string(import->failed));
  EXPECT_EQ(text_of("#batch-cancelled"), std::to_string(import->cancelled));
  EXPECT_EQ(text_of("#batch-pending"), std::to_string(import->pending));
  EXPECT_EQ(text_of("#batch-on-complete"), import->on_complete.value_or("?"));
  EXPECT_EQ(text_of("#batch-queue"), import->queue);
  expect_bar(web(), "#batch-bar-wrap", *import, "batch page");
  const auto members = workflows.batch_members(ac(), kImport);
  const auto member_rows = rows("table#members tbody tr[data-job-id]");
  ASSERT_EQ(member_rows.size(), members.size()) << describe_page();
  for (std::size_t i = 0; i < members.size(); ++i) {
    const std::string where = fmt::format("member {}", members[i].id);
    EXPECT_EQ(member_rows[i].data.at("jobId"), std::to_string(members[i].id)) << where;
    EXPECT_EQ(member_rows[i].cells.at("state"), members[i].state) << where;
    EXPECT_TRUE(
        exists("table#members a" + css_attr("href", fmt::format("/jobs/{}", members[i].id))))
        << where;
  }
  EXPECT_EQ(member_rows[0].cells.at("state"), "completed");
  EXPECT_EQ(member_rows[1].cells.at("state"), "failed");
  EXPECT_EQ(member_rows[2].cells.at("state"), "cancelled");
  EXPECT_TRUE(exists("header nav a#nav-batches.current"));
  finish_page("batch");

  // The completion job's link leads to its job page, with the counts in its args.
  const JobId completion = *import->completion_job;
  EXPECT_EQ(text_of("#batch-completion"), fmt::format("job {}", completion));
  click("#batch-completion a" + css_attr("href", fmt::format("/jobs/{}", completion)));
  wait_for("the completion job's page", [&] {
    return web().current_url() == serve().base_url() + fmt::format("/jobs/{}", completion) &&
           loaded() >= 1 && text_of("#job-kind") == "import_done";
  });
  EXPECT_EQ(text_of("#job-queue"), "reports");
  const auto args = json::parse(text_of("pre#job-args").value_or(""), nullptr, false);
  EXPECT_EQ(args, json({{"day", "mon"},
                        {"batch", kImport},
                        {"members", import->members},
                        {"completed", import->completed},
                        {"failed", import->failed},
                        {"cancelled", import->cancelled}}));
  finish_page("batch-completion-job");
}

TEST_F(DashboardTest, OpenBatchPageShowsNoCompletionJobYetAndAnUnknownBatchIsAnError) {
  const WorkflowAdmin workflows(schema_);
  BatchOptions order_options;
  order_options.on_complete = "order_done";
  workflows.open_batch(ac(), kOrderItems, order_options);
  InsertOpts item = opts(kItemsQueue);
  item.batch = kOrderItems;
  const JobId first = enqueue(item, "line_item", {{"line", 1}});
  enqueue(item, "line_item", {{"line", 2}});
  EXPECT_EQ(finish(claim_one(kItemsQueue, first), Outcome::kCompleted), "completed");

  open(std::string("/batches/") + kOrderItems, "batch");
  const auto b = workflows.batch(ac(), kOrderItems);
  ASSERT_TRUE(b);
  EXPECT_EQ(text_of("#batch-state"), "open");
  EXPECT_EQ(text_of("#batch-completion"), "none yet");
  EXPECT_EQ(text_of("#batch-members"), fmt::format("{} (so far)", b->members));
  EXPECT_EQ(text_of("#batch-sealed"), "—");
  const auto progress = text_of("#batch-progress").value_or("<none>");
  EXPECT_EQ(progress.rfind("1/2 ended (1 completed, 0 failed, 0 cancelled)", 0), 0U) << progress;
  expect_bar(web(), "#batch-bar-wrap", *b, "open batch page");
  EXPECT_EQ(rows("table#members tbody tr[data-job-id]").size(), 2U);
  finish_page("batch-open");

  // The page follows the database: sealed now, the next refresh says so.
  const int before = loaded();
  workflows.seal_batch(ac(), kOrderItems);
  wait_render_after(before, "the page shows the batch sealed",
                    [&] { return text_of("#batch-state") == "sealed"; });
  EXPECT_EQ(text_of("#batch-members"), "2");

  // The API: 404 for an unknown batch, 400 for a bad name or parameter.
  const auto status = [&](const std::string& path) {
    return web().execute("return fetch(arguments[0]).then(r => r.status)", {path});
  };
  EXPECT_EQ(status("/api/batches/nosuch"), 404);
  EXPECT_EQ(status("/api/batches/bad%20name"), 400);
  EXPECT_EQ(status("/api/batches?limit=0"), 400);
  EXPECT_EQ(status("/api/batches?bogus=1"), 400);
  const auto body = web().execute("return fetch(arguments[0]).then(r => r.json())",
                                  {std::string("/api/batches/") + kOrderItems + "?members=1"});
  EXPECT_EQ(body.at("member_jobs").size(), 1U) << body.dump();
  EXPECT_EQ(body.at("next_after"), first) << "a full page has a next one";
  expect_clean_console("api", {"/api/batches/nosuch - Failed to load resource: the server "
                               "responded with a status of 404",
                               "Failed to load resource: the server responded with a status of "
                               "400"});

  web().navigate(serve().base_url() + "/batches/nosuch");
  wait_for("#error of an unknown batch", [&] {
    return text_of("#error").value_or("").find("batch nosuch not found") != std::string::npos;
  });
  finish_page("batch-unknown", {"/api/batches/nosuch?members=100 - Failed to load resource: "
                                "the server responded with a status of 404"});
}

}  // namespace
}  // namespace awa::testing
