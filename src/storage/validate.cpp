#include "storage/validate.hpp"

#include <algorithm>
#include <chrono>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/error.hpp"
#include "awa/trace.hpp"
#include "storage/job_metadata.hpp"
#include "storage/stored_json.hpp"
#include "storage/utf8.hpp"

namespace awa::storage {
namespace {

bool queue_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '-';
}

// jsonb cannot store U+0000; PostgreSQL would reject the row (22P05) and abort the
// caller's transaction. Backslashes occur only inside JSON strings, each starting a
// two-character escape (or \uXXXX), so a linear scan finds \u0000 exactly.
bool has_nul_escape(std::string_view json) {
  for (std::size_t i = 0; i + 1 < json.size(); ++i) {
    if (json[i] != '\\') continue;
    if (json[i + 1] == 'u' && json.substr(i + 2, 4) == "0000") return true;
    ++i;  // skip the escaped character (an escaped backslash must not start a new escape)
  }
  return false;
}

// PostgreSQL's text type holds UTF-8 without NUL (a NUL would also end the libpq
// parameter early, silently truncating the value). Returns what is wrong, or "".
std::string text_problem(std::string_view text) {
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    return fmt::format("contains a NUL byte at offset {}", nul);
  }
  if (const auto bad = invalid_utf8_at(text)) {
    return fmt::format("is not valid UTF-8 (byte 0x{:02x} at offset {})",
                       static_cast<unsigned char>(text[*bad]), *bad);
  }
  return {};
}

}  // namespace

std::string printable(std::string_view text, std::size_t limit) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size() && out.size() < limit) {
    const std::size_t n = utf8_sequence(text, i);
    const auto b = static_cast<unsigned char>(text[i]);
    if (n == 0 || (n == 1 && (b < 0x20 || b == 0x7F))) {
      out += fmt::format("\\x{:02x}", b);
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  if (i < text.size()) out += "...";
  return out;
}

void validate_queue_name(std::string_view queue) {
  if (queue.empty() || queue.size() > kMaxNameBytes ||
      !std::all_of(queue.begin(), queue.end(), queue_char)) {
    throw InvalidArgument(
        fmt::format("invalid queue name \"{}\": use 1..{} characters from A-Z a-z 0-9 _ . : -",
                    printable(queue), kMaxNameBytes));
  }
}

void validate_json_text(std::string_view what, std::string_view json, std::size_t limit) {
  // Size first: no point parsing 10 MB to reject it.
  if (json.size() > limit) {
    throw InvalidArgument(
        fmt::format("{} is {} bytes of JSON; the limit is {}", what, json.size(), limit));
  }
  if (!is_json_text(json)) {
    throw InvalidArgument(fmt::format("{} is not valid JSON: \"{}\"", what, printable(json)));
  }
  if (has_nul_escape(json)) {
    throw InvalidArgument(
        fmt::format("{} contains \\u0000, which PostgreSQL's jsonb cannot store", what));
  }
}

void validate_job(const NewJob& job, std::size_t index) {
  const auto fail = [&](const std::string& what) {
    throw InvalidArgument(
        fmt::format("job {} (kind \"{}\"): {}", index, printable(job.kind), what));
  };
  if (job.kind.empty() || job.kind.size() > kMaxNameBytes) {
    fail(fmt::format("kind must be 1..{} bytes", kMaxNameBytes));
  }
  if (const auto p = text_problem(job.kind); !p.empty()) fail("kind " + p);
  try {
    validate_queue_name(job.opts.queue);
  } catch (const InvalidArgument& e) {
    fail(e.what());
  }
  if (job.opts.priority < 1 || job.opts.priority > 4) {
    fail(fmt::format("priority {} is outside 1..4", job.opts.priority));
  }
  if (job.opts.max_attempts < 1 || job.opts.max_attempts > 1000) {
    fail(fmt::format("max_attempts {} is outside 1..1000", job.opts.max_attempts));
  }
  if (job.opts.ordering_key && job.opts.ordering_key->size() > kMaxOrderingKeyBytes) {
    fail(fmt::format("ordering_key is {} bytes; the limit is {}", job.opts.ordering_key->size(),
                     kMaxOrderingKeyBytes));
  }
  // Size first: no point parsing 10 MB to reject it.
  if (job.args_json.size() > kMaxArgsBytes) {
    fail(fmt::format("args are {} bytes of JSON; the limit is {} (1 MiB)", job.args_json.size(),
                     kMaxArgsBytes));
  }
  if (!is_json_text(job.args_json)) {
    fail("args are not valid JSON");
  }
  if (has_nul_escape(job.args_json)) {
    fail("args contain \\u0000, which PostgreSQL's jsonb cannot store");
  }
  if (job.opts.trace) {
    if (auto why = trace::invalid_reason(job.opts.trace->traceparent, job.opts.trace->tracestate);
        !why.empty()) {
      fail("trace: " + why);
    }
  } else if (job.opts.metadata.is_object()) {
    // A producer's own keys: held to the rule SQL producers meet (validate_metadata).
    const auto& m = job.opts.metadata;
    const auto tp = m.find(trace::kTraceparentKey);
    const auto ts = m.find(trace::kTracestateKey);
    if (tp != m.end() || ts != m.end()) {
      if (tp == m.end() || !tp->is_string()) {
        fail("metadata.traceparent must be a string when metadata.tracestate is given");
      }
      if (ts != m.end() && !ts->is_string()) fail("metadata.tracestate must be a string");
      const auto why =
          trace::invalid_reason(tp->get_ref<const std::string&>(),
                                ts == m.end() ? "" : ts->get_ref<const std::string&>());
      if (!why.empty()) fail("metadata: " + why);
    }
  }
  if (!job.opts.metadata.is_null() || job.opts.trace) {
    if (!job.opts.metadata.is_null() && !job.opts.metadata.is_object()) {
      fail("metadata must be a JSON object");
    }
    std::string text;
    try {
      text = metadata_text(job).value_or("");
    } catch (const nlohmann::json::type_error& e) {
      // nlohmann's message says where ("invalid UTF-8 byte at index 0: 0xFF").
      fail(fmt::format("metadata is not valid UTF-8 ({})", e.what()));
    }
    if (text.size() > kMaxMetadataBytes) {
      fail(fmt::format("metadata is {} bytes serialized; the limit is {} (64 KiB)", text.size(),
                       kMaxMetadataBytes));
    }
    if (has_nul_escape(text)) {
      fail("metadata contains \\u0000, which PostgreSQL's jsonb cannot store");
    }
  }
  if (job.opts.tags.size() > kMaxTags) {
    fail(fmt::format("{} tags; the limit is {}", job.opts.tags.size(), kMaxTags));
  }
  for (std::size_t t = 0; t < job.opts.tags.size(); ++t) {
    const auto& tag = job.opts.tags[t];
    if (tag.size() > kMaxTagBytes) {
      fail(fmt::format("tag {} is {} bytes; the limit is {}", t, tag.size(), kMaxTagBytes));
    }
    if (const auto p = text_problem(tag); !p.empty()) fail(fmt::format("tag {} {}", t, p));
  }
  if (const auto& u = job.opts.unique) {
    if (u->states.empty()) fail("unique.states is empty: name at least one job state");
    for (const auto& state : u->states) {
      if (std::find(std::begin(kJobStates), std::end(kJobStates), state) == std::end(kJobStates)) {
        fail(fmt::format(
            "unique.states: unknown job state \"{}\" (expected waiting, scheduled, retryable, "
            "available, running, waiting_external, completed, failed, cancelled or dlq)",
            printable(state)));
      }
    }
    if (u->period && (u->period->count() < 1 || *u->period > kMaxScheduleAhead)) {
      fail(fmt::format("unique.period {} s is outside 1 s .. 100 years", u->period->count()));
    }
  }
  const auto parents = job.opts.after.size() + job.opts.after_in_call.size();
  if (parents > kMaxParents) {
    fail(fmt::format("{} parents; the limit is {}", parents, kMaxParents));
  }
  if (parents > 0 && job.opts.unique) {
    fail("a job enqueued after parents cannot also be unique");
  }
  if (!job.opts.batch.empty()) {
    if (job.opts.batch.size() > kMaxNameBytes ||
        !std::all_of(job.opts.batch.begin(), job.opts.batch.end(), queue_char)) {
      fail(fmt::format("invalid batch name \"{}\": use 1..{} characters from A-Z a-z 0-9 _ . : -",
                       printable(job.opts.batch), kMaxNameBytes));
    }
    if (job.opts.unique) fail("a batch member cannot also be unique");
  }
  for (const auto position : job.opts.after_in_call) {
    if (position >= index) {
      fail(fmt::format("after_in_call names position {}, which is not an earlier job of the call",
                       position));
    }
  }
  if (job.opts.run_at) {
    const auto now = std::chrono::system_clock::now();
    // Compared as a difference: now + kMaxScheduleAhead cannot overflow, but a caller's
    // time_point::max() must not be added to anything.
    if (*job.opts.run_at > now && *job.opts.run_at - now > kMaxScheduleAhead) {
      fail("run_at is more than 100 years from now");
    }
  }
}

}  // namespace awa::storage

namespace awa {

void validate_job(const NewJob& job) { storage::validate_job(job, 0); }

const char* on_parent_failure_name(OnParentFailure policy) {
  switch (policy) {
    case OnParentFailure::kRun:
      return "run";
    case OnParentFailure::kFail:
      return "fail";
    case OnParentFailure::kCancel:
      break;
  }
  return "cancel";
}

const char* follow_up_on_name(FollowUpOn on) {
  return on == FollowUpOn::kExhausted ? "exhausted" : "completed";
}

void validate_follow_up(const FollowUp& follow_up) {
  const auto& job = follow_up.job;
  try {
    storage::validate_job(job, 0);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("follow-up: {}", e.what()));
  }
  const auto fail = [&](std::string_view why) {
    throw InvalidArgument(
        fmt::format("follow-up job \"{}\" {}", storage::printable(job.kind), why));
  };
  if (!job.opts.after.empty() || !job.opts.after_in_call.empty()) fail("cannot have parents");
  if (job.opts.unique) fail("cannot be unique");
  if (!job.opts.batch.empty()) fail("cannot join a batch");
  // SQL takes a follow-up's key as text (insert_jobs_compat).
  if (job.opts.ordering_key && !storage::text_problem(*job.opts.ordering_key).empty()) {
    fail("needs an ordering_key of UTF-8 text without NUL");
  }
}

}  // namespace awa
