// WorkflowAdmin: batches and queue follow-ups (awa batch ..., awa queue follow-up). Each
// call is one statement of one SQL function (sql/functions/0069_batches.sql), so it is
// atomic whether or not the caller opened a transaction.
#include "awa/workflows.hpp"

#include <fmt/format.h>

#include "awa/error.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "pg/params.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/validate.hpp"

namespace awa {
namespace {

std::optional<std::string> optional_text(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<std::string>();
}

Batch parse_batch(const nlohmann::json& j) {
  Batch b;
  b.name = j.at("name").get<std::string>();
  b.sealed = j.at("sealed").get<bool>();
  b.members = j.at("members").get<std::int64_t>();
  b.completed = j.at("completed").get<std::int64_t>();
  b.failed = j.at("failed").get<std::int64_t>();
  b.cancelled = j.at("cancelled").get<std::int64_t>();
  b.pending = j.at("pending").get<std::int64_t>();
  b.finished = j.at("finished").get<bool>();
  if (!j.at("completion_job").is_null()) b.completion_job = j.at("completion_job").get<JobId>();
  b.on_complete = optional_text(j, "on_complete");
  b.queue = j.at("queue").get<std::string>();
  b.created_at = j.at("created_at").get<std::string>();
  b.sealed_at = optional_text(j, "sealed_at");
  b.finished_at = optional_text(j, "finished_at");
  return b;
}

Batch parse_batch_text(const std::string& text) { return parse_batch(nlohmann::json::parse(text)); }

std::vector<QueueFollowUp> parse_follow_ups(const std::string& text) {
  std::vector<QueueFollowUp> out;
  for (const auto& f : nlohmann::json::parse(text)) {
    QueueFollowUp q;
    q.source_queue = f.at("source_queue").get<std::string>();
    q.on = f.at("trigger").get<std::string>() == "exhausted" ? FollowUpOn::kExhausted
                                                             : FollowUpOn::kCompleted;
    q.kind = f.at("kind").get<std::string>();
    q.queue = f.at("queue").get<std::string>();
    out.push_back(std::move(q));
  }
  return out;
}

void validate_batch_name(const std::string& name) {
  try {
    storage::validate_queue_name(name);
  } catch (const InvalidArgument&) {
    throw InvalidArgument(
        fmt::format("invalid batch name \"{}\": use 1..{} characters from A-Z a-z 0-9 _ . : -",
                    storage::printable(name), kMaxNameBytes));
  }
}

void validate_limit(int limit) {
  if (limit < 1 || limit > 10000) {
    throw InvalidArgument(fmt::format("limit {} is outside 1..10000", limit));
  }
}

}  // namespace

nlohmann::json to_json(const Batch& b) {
  const auto opt = [](const std::optional<std::string>& s) {
    return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
  };
  return nlohmann::json{
      {"name", b.name},
      {"sealed", b.sealed},
      {"members", b.members},
      {"completed", b.completed},
      {"failed", b.failed},
      {"cancelled", b.cancelled},
      {"pending", b.pending},
      {"finished", b.finished},
      {"completion_job",
       b.completion_job ? nlohmann::json(*b.completion_job) : nlohmann::json(nullptr)},
      {"on_complete", opt(b.on_complete)},
      {"queue", b.queue},
      {"created_at", b.created_at},
      {"sealed_at", opt(b.sealed_at)},
      {"finished_at", opt(b.finished_at)},
  };
}

nlohmann::json to_json(const QueueFollowUp& f) {
  return nlohmann::json{{"source_queue", f.source_queue},
                        {"on", follow_up_on_name(f.on)},
                        {"kind", f.kind},
                        {"queue", f.queue}};
}

WorkflowAdmin::WorkflowAdmin(std::string schema)
    : schema_(std::move(schema)), quoted_(sql::quote_schema(schema_)) {}

Batch WorkflowAdmin::open_batch(Connection& conn, const std::string& name,
                                const BatchOptions& options) const {
  validate_batch_name(name);
  if (!options.on_complete_args.is_object()) {
    throw InvalidArgument("the completion job's args must be a JSON object");
  }
  InsertOpts on_queue;
  on_queue.queue = options.queue;
  NewJob completion(options.on_complete.empty() ? "batch" : options.on_complete,
                    options.on_complete_args, on_queue);
  validate_job(completion);
  pg::Params p;
  p.add(name);
  if (options.on_complete.empty()) {
    p.null();
  } else {
    p.add(options.on_complete);
  }
  p.add(options.queue).add(completion.args_json);
  const auto res =
      pg::native(conn).exec(sql::query("queries/workflows/open_batch.sql", quoted_), p);
  return parse_batch_text(res.get<std::string>(0, 0));
}

Batch WorkflowAdmin::seal_batch(Connection& conn, const std::string& name) const {
  validate_batch_name(name);
  const auto res = pg::native(conn).exec(sql::query("queries/workflows/seal_batch.sql", quoted_),
                                         pg::make_params(name));
  return parse_batch_text(res.get<std::string>(0, 0));
}

std::optional<Batch> WorkflowAdmin::batch(Connection& conn, const std::string& name) const {
  validate_batch_name(name);
  const auto res = pg::native(conn).exec(sql::query("queries/workflows/batch_view.sql", quoted_),
                                         pg::make_params(name));
  if (res.is_null(0, 0)) return std::nullopt;
  return parse_batch_text(res.get<std::string>(0, 0));
}

std::vector<Batch> WorkflowAdmin::list_batches(Connection& conn, int limit, bool open_only) const {
  validate_limit(limit);
  const auto res = pg::native(conn).exec(sql::query("queries/workflows/batch_list.sql", quoted_),
                                         pg::make_params(limit, open_only));
  std::vector<Batch> out;
  for (int r = 0; r < res.rows(); ++r) out.push_back(parse_batch_text(res.get<std::string>(r, 0)));
  return out;
}

std::vector<JobLink> WorkflowAdmin::batch_members(Connection& conn, const std::string& name,
                                                  int limit, JobId after) const {
  validate_batch_name(name);
  validate_limit(limit);
  const auto res =
      pg::native(conn).exec(sql::query("queries/workflows/batch_members.sql", quoted_),
                            pg::make_params(name, limit, static_cast<std::int64_t>(after)));
  std::vector<JobLink> out;
  for (const auto& m : nlohmann::json::parse(res.get<std::string>(0, 0))) {
    out.push_back(JobLink{m.at("id").get<JobId>(), m.at("state").is_null()
                                                       ? std::string()
                                                       : m.at("state").get<std::string>()});
  }
  return out;
}

std::vector<QueueFollowUp> WorkflowAdmin::set_queue_follow_up(
    Connection& conn, const std::string& queue, FollowUpOn on, const std::string& kind,
    const std::optional<std::string>& target_queue) const {
  storage::validate_queue_name(queue);
  InsertOpts target;
  target.queue = target_queue.value_or(queue);
  validate_job(NewJob(kind, nlohmann::json::object(), target));
  const auto res =
      pg::native(conn).exec(sql::query("queries/workflows/set_queue_follow_up.sql", quoted_),
                            pg::make_params(queue, follow_up_on_name(on), kind, target_queue));
  return parse_follow_ups(res.get<std::string>(0, 0));
}

std::vector<QueueFollowUp> WorkflowAdmin::clear_queue_follow_up(Connection& conn,
                                                                const std::string& queue,
                                                                FollowUpOn on) const {
  storage::validate_queue_name(queue);
  const auto res = pg::native(conn).exec(
      sql::query("queries/workflows/set_queue_follow_up.sql", quoted_),
      pg::make_params(queue, follow_up_on_name(on), std::nullopt, std::nullopt));
  return parse_follow_ups(res.get<std::string>(0, 0));
}

std::vector<QueueFollowUp> WorkflowAdmin::queue_follow_ups(
    Connection& conn, const std::optional<std::string>& queue) const {
  if (queue) storage::validate_queue_name(*queue);
  const auto res = pg::native(conn).exec(
      sql::query("queries/workflows/queue_follow_ups.sql", quoted_), pg::make_params(queue));
  return parse_follow_ups(res.get<std::string>(0, 0));
}

}  // namespace awa
