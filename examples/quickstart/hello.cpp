// hello: a worker and a producer in one process. Usage: hello [schema]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <awa/client.hpp>
#include <awa/connection.hpp>
#include <awa/migrate.hpp>

int main(int argc, char** argv) {
  const char* url = std::getenv("DATABASE_URL");
  if (url == nullptr) {
    std::fprintf(stderr, "hello: set DATABASE_URL\n");
    return 2;
  }
  awa::ClientOptions options;
  options.database_url = url;
  options.schema = argc > 1 ? argv[1] : "awa";
  auto conn = awa::Connection::connect(url);
  awa::migrate(conn, options.schema);  // in production: `awa migrate` once per release

  awa::Client client(options);
  std::atomic<bool> sent{false};
  client.register_worker("send_receipt", [&](awa::JobContext& job) {
    std::printf("receipt for order %d\n", job.args().at("order").get<int>());
    sent = true;                         // handlers may run more than once: make them idempotent
    return awa::JobResult::completed();  // or retry_after, snooze, failed, cancel
  });
  client.add_queue({.name = "default", .max_workers = 4});
  client.start();
  client.insert(awa::NewJob("send_receipt", {{"order", 42}}));
  while (!sent) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  client.stop();  // graceful: finishes in-flight jobs, flushes their completions
}
