// The smallest awa program: one handler, one job. Usage: quickstart [schema]
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <set>

#include <awa/client.hpp>

int run(int argc, char** argv) {
  const char* url = std::getenv("DATABASE_URL");
  if (url == nullptr) {
    std::fprintf(stderr, "quickstart: set DATABASE_URL\n");
    return 2;
  }
  awa::ClientOptions options;
  options.database_url = url;
  options.schema = argc > 1 ? argv[1] : "quickstart";
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
