// External callbacks (docs/scheduling.md, "External callbacks"): parking an attempt
// (QueueStorage, the runtime) and ending it by its callback id (Admin, awa serve). The
// SQL is sql/functions/0072_callbacks.sql; every end goes through close_attempts.
#include <cctype>
#include <string_view>

#include <fmt/format.h>

#include "awa/admin.hpp"
#include "awa/error.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/attempt_values.hpp"
#include "storage/consume.hpp"
#include "storage/store_access.hpp"
#include "storage/utf8.hpp"
#include "storage/validate.hpp"

namespace awa {
namespace {

void validate_timeout(std::chrono::milliseconds timeout) {
  if (timeout < std::chrono::milliseconds(1) || timeout > kMaxScheduleAhead) {
    throw InvalidArgument(
        fmt::format("callback timeout {} ms is outside 1 ms .. 100 years", timeout.count()));
  }
}

// A UUID in its text form (8-4-4-4-12 hex digits), which is what register_callback
// hands out. Checked here so that a mistyped id is a clear error, not SQLSTATE 22P02.
void validate_callback_id(std::string_view id) {
  bool ok = id.size() == 36;
  for (std::size_t i = 0; ok && i < id.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    ok = dash ? id[i] == '-' : std::isxdigit(static_cast<unsigned char>(id[i])) != 0;
  }
  if (!ok) {
    throw InvalidArgument(
        fmt::format("callback id \"{}\" is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
                    storage::storable_text(id, 64)));
  }
}

CallbackResult resolve(const std::string& quoted, Connection& conn, const std::string& id,
                       const char* outcome, const std::optional<std::string>& error,
                       const std::optional<std::string>& result_json) {
  validate_callback_id(id);
  if (result_json) storage::validate_json_text("the callback result", *result_json, kMaxArgsBytes);
  std::optional<std::string> stored;
  if (error) stored = storage::storable_text(*error, storage::kMaxErrorBytes);
  const auto res =
      pg::native(conn).exec(sql::query("queries/admin/resolve_callback.sql", quoted),
                            pg::make_params(id, std::string(outcome), stored, result_json));
  CallbackResult r;
  if (res.rows() > 0) {
    r.job_id = res.get<std::int64_t>(0, 0);
    r.state = res.get<std::string>(0, 1);
  }
  return r;
}

}  // namespace

namespace storage {

std::optional<std::string> Consumer::callback(pg::Connection& conn, const ClaimedEntry& e,
                                              std::optional<std::chrono::milliseconds> timeout,
                                              bool park) const {
  if (timeout) validate_timeout(*timeout);
  std::optional<std::string> iv;
  if (timeout) iv = storage::interval(*timeout);
  const auto res = conn.exec_cached(
      callback_sql_, pg::make_params(e.claim_batch, e.lane_seq, e.job_id, e.run_lease,
                                     static_cast<std::int64_t>(e.ready_slot),
                                     static_cast<std::int64_t>(e.attempt), iv, park));
  return res.get_opt<std::string>(0, 0);
}

}  // namespace storage

std::optional<std::string> QueueStorage::register_callback(Connection& conn,
                                                           const ClaimedEntry& entry,
                                                           std::chrono::milliseconds timeout) {
  return storage::consumer(*this).callback(pg::native(conn), entry, timeout, false);
}

std::optional<std::string> QueueStorage::wait_for_callback(
    Connection& conn, const ClaimedEntry& entry, std::optional<std::chrono::milliseconds> timeout) {
  return storage::consumer(*this).callback(pg::native(conn), entry, timeout, true);
}

CallbackResult Admin::complete_external(Connection& conn, const std::string& callback_id,
                                        const std::optional<std::string>& result_json) const {
  return resolve(quoted_, conn, callback_id, "completed", std::nullopt, result_json);
}

CallbackResult Admin::fail_external(Connection& conn, const std::string& callback_id,
                                    const std::string& error, bool retryable) const {
  return resolve(quoted_, conn, callback_id, retryable ? "retry" : "fail", error, std::nullopt);
}

std::optional<JobId> Admin::heartbeat_external(
    Connection& conn, const std::string& callback_id,
    std::optional<std::chrono::milliseconds> timeout) const {
  validate_callback_id(callback_id);
  if (timeout) validate_timeout(*timeout);
  std::optional<std::string> iv;
  if (timeout) iv = storage::interval(*timeout);
  const auto res =
      pg::native(conn).exec(sql::query("queries/admin/heartbeat_callback.sql", quoted_),
                            pg::make_params(callback_id, iv));
  return res.get_opt<std::int64_t>(0, 0);
}

}  // namespace awa
