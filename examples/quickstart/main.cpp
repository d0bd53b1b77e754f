// The smallest awa programs, on the installed headers only. Usage: quickstart [schema]
//   1. the queue storage by hand: migrate, enqueue in the caller's transaction, claim,
//      complete, read the queue's counts;
//   2. the embedded runtime: one handler, one job.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <awa/admin.hpp>
#include <awa/client.hpp>
#include <awa/connection.hpp>
#include <awa/migrate.hpp>
#include <awa/queue_storage.hpp>

int by_hand(const std::string& url, const std::string& schema) {
  awa::Connection conn = awa::Connection::connect(url);
  const awa::MigrationReport report = awa::migrate(conn, schema);
  std::printf("quickstart: schema %s at version %d\n", report.schema.c_str(), report.version);

  awa::StorageOptions storage_options;
  storage_options.schema = schema;
  awa::QueueStorage store(storage_options);
  awa::InsertOpts opts;
  opts.queue = "by_hand";
  awa::JobId id = 0;
  {
    // The job becomes visible with the caller's other writes, or not at all.
    awa::Transaction tx(conn);
    id = store.insert(conn, awa::NewJob("resize", {{"width", 64}}, opts));
    tx.commit();
  }

  const std::vector<awa::ClaimedEntry> claimed = store.claim(conn, "by_hand");
  if (claimed.size() != 1 || claimed[0].job_id != id) {
    std::fprintf(stderr, "quickstart: claimed %zu jobs, expected job %lld\n", claimed.size(),
                 static_cast<long long>(id));
    return 1;
  }
  const std::vector<awa::Completion> done{
      awa::Completion::of(claimed[0], awa::Outcome::kCompleted)};
  const auto results = store.complete(conn, done);
  if (results.size() != 1 || results[0].state != "completed") {
    std::fprintf(stderr, "quickstart: completion of job %lld was not applied\n",
                 static_cast<long long>(id));
    return 1;
  }

  const awa::QueueSummary summary = awa::Admin(schema).queue_summary(conn, "by_hand");
  if (summary.counts.completed != 1 || summary.counts.available != 0 ||
      summary.counts.running != 0) {
    std::fprintf(stderr, "quickstart: queue by_hand shows %lld completed, %lld available\n",
                 static_cast<long long>(summary.counts.completed),
                 static_cast<long long>(summary.counts.available));
    return 1;
  }
  std::printf("quickstart: enqueued, claimed and completed job %lld by hand\n",
              static_cast<long long>(id));
  return 0;
}

int run(int argc, char** argv) {
  const char* url = std::getenv("DATABASE_URL");
  if (url == nullptr) {
    std::fprintf(stderr, "quickstart: set DATABASE_URL\n");
    return 2;
  }
  const std::string schema = argc > 1 ? argv[1] : "quickstart";
  if (const int rc = by_hand(url, schema); rc != 0) return rc;

  awa::ClientOptions options;
  options.database_url = url;
  options.schema = schema;
  awa::Client client(options);

  // Handlers run on the client's worker threads: record what ran under a lock.
  std::mutex mu;
  std::condition_variable cv;
  std::set<awa::JobId> ran;
  client.register_worker("hello", [&](awa::JobContext& job) {
    std::lock_guard lock(mu);
    ran.insert(job.job_id());
    cv.notify_all();
    return awa::JobResult::completed();
  });
  client.add_queue({.name = "default", .max_workers = 2});
  client.start();
  const awa::JobId id = client.insert(awa::NewJob("hello", {{"greeting", "hi"}}));

  bool done = false;
  {
    std::unique_lock lock(mu);
    done = cv.wait_for(lock, std::chrono::seconds(30), [&] { return ran.count(id) > 0; });
  }
  client.stop();
  if (!done) {
    std::fprintf(stderr, "quickstart: job %lld did not run within 30 s\n",
                 static_cast<long long>(id));
    return 1;
  }
  std::printf("quickstart: processed job %lld\n", static_cast<long long>(id));
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // awa::Error: connection refused, bad schema, ...
    std::fprintf(stderr, "quickstart: %s\n", e.what());
    return 1;
  }
}
