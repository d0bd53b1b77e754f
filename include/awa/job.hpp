// Jobs as producers describe them.
//
// A job has a kind (what to run), JSON args (its input) and insert options. Limits
// (validated before anything is written; awa::InvalidArgument otherwise):
//   kind: 1..200 bytes.  queue: 1..200 chars from [A-Za-z0-9_.:-].  priority: 1..4.
//   max_attempts: 1..1000.  args: valid JSON text.  ordering_key: at most 256 bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace awa {

using JobId = std::int64_t;

inline constexpr std::size_t kMaxNameBytes = 200;
inline constexpr std::size_t kMaxOrderingKeyBytes = 256;

struct InsertOpts {
  // Default: "default".
  std::string queue = "default";
  // 1 (highest) .. 4 (lowest). Default: 2.
  int priority = 2;
  // Attempts before the job fails for good (or goes to the DLQ). Default: 25.
  int max_attempts = 25;
  // Not before this time. A time in the future makes the job scheduled (deferred_jobs)
  // until promotion; unset or past means runnable now.
  std::optional<std::chrono::system_clock::time_point> run_at;
  // Jobs with the same key share a shard of their queue, and so stay FIFO relative to
  // each other across separate insert calls (ADR-025). Bytes, not necessarily text.
  // Ignored when the queue has one shard.
  std::optional<std::string> ordering_key;
  // Free-form JSON kept with the job; null means none.
  nlohmann::json metadata;
  std::vector<std::string> tags;
};

struct NewJob {
  std::string kind;
  // The args as JSON text. Default: "{}".
  std::string args_json = "{}";
  InsertOpts opts;

  NewJob() = default;
  NewJob(std::string kind_, const nlohmann::json& args, InsertOpts opts_ = {})
      : kind(std::move(kind_)), args_json(args.dump()), opts(std::move(opts_)) {}
  // Args given as JSON text, checked at insert.
  static NewJob from_text(std::string kind, std::string args_json, InsertOpts opts = {}) {
    NewJob j;
    j.kind = std::move(kind);
    j.args_json = std::move(args_json);
    j.opts = std::move(opts);
    return j;
  }
};

}  // namespace awa
