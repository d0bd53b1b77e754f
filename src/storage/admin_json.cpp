#include "awa/admin_json.hpp"

#include "storage/stored_json.hpp"

namespace awa::json {
namespace {

using nlohmann::json;

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json parse_or_text(const std::string& text) { return stored(text); }

json errors_of(const std::vector<JobError>& errors) {
  auto out = json::array();
  for (const auto& e : errors)
    out.push_back({{"attempt", e.attempt}, {"at", e.at}, {"error", e.error}});
  return out;
}

// A rotation carries its generation and slot, a prune also its row counts, a skip only
// its reason.
json event_of(const std::optional<RingEvent>& e, bool with_rows, bool with_reason) {
  if (!e) return nullptr;
  json j{{"at", e->at}};
  if (!with_reason) {
    j["generation"] = e->generation;
    j["slot"] = e->slot;
  }
  if (with_rows) {
    j["rows_removed"] = e->rows_removed;
    j["rows_carried"] = e->rows_carried;
  }
  if (with_reason) j["reason"] = e->reason;
  return j;
}

}  // namespace

json stored(const std::string& text) {
  json j;
  if (!storage::decode_stored_json(text, j).empty()) return json(text);
  return j;
}

json of(const JobSummary& s) {
  return {{"id", s.id},
          {"state", s.state},
          {"queue", s.queue},
          {"kind", s.kind},
          {"priority", s.priority},
          {"attempt", s.attempt},
          {"max_attempts", s.max_attempts},
          {"enqueue_shard", opt(s.enqueue_shard)},
          {"created_at", s.created_at},
          {"run_at", s.run_at}};
}

json of(const JobDetail& d) {
  auto j = of(d.summary);
  j["args"] = parse_or_text(d.args_json);
  j["metadata"] = parse_or_text(d.metadata_json);
  j["tags"] = d.tags;
  j["ordering_key"] = opt(d.ordering_key);
  j["lane_seq"] = opt(d.lane_seq);
  j["run_lease"] = d.run_lease;
  j["errors"] = errors_of(d.errors);
  j["progress"] = d.progress_json ? parse_or_text(*d.progress_json) : json(nullptr);
  j["callback_id"] = opt(d.callback_id);
  j["result"] = d.result_json ? parse_or_text(*d.result_json) : json(nullptr);
  const auto links = [](const std::vector<JobLink>& v) {
    json a = json::array();
    for (const auto& l : v) a.push_back({{"id", l.id}, {"state", l.state}});
    return a;
  };
  j["parents"] = links(d.parents);
  j["children"] = links(d.children);
  j["on_parent_failure"] = opt(d.on_parent_failure);
  j["pending_parents"] = opt(d.pending_parents);
  j["timeline"] = json::array();
  for (const auto& e : d.timeline) {
    j["timeline"].push_back({{"at", e.at.empty() ? json(nullptr) : json(e.at)},
                             {"event", e.event},
                             {"attempt", e.attempt},
                             {"enqueue_shard", opt(e.enqueue_shard)},
                             {"detail", e.detail}});
  }
  return j;
}

json of(const DlqEntry& e) {
  return {{"id", e.id},
          {"queue", e.queue},
          {"kind", e.kind},
          {"priority", e.priority},
          {"attempt", e.attempt},
          {"max_attempts", e.max_attempts},
          {"reason", e.reason},
          {"dlq_at", e.dlq_at},
          {"args", parse_or_text(e.args_json)},
          {"errors", errors_of(e.errors)}};
}

json of(const RingStatus& r) {
  auto slots = json::array();
  for (const auto& s : r.slots) {
    slots.push_back(
        {{"slot", s.slot}, {"state", s.state}, {"generation", s.generation}, {"rows", s.rows}});
  }
  return {{"ring", r.ring},
          {"current_slot", r.current_slot},
          {"generation", r.generation},
          {"slots", std::move(slots)},
          {"kept_rows", r.kept_rows},
          {"last_rotation", event_of(r.last_rotation, false, false)},
          {"last_prune", event_of(r.last_prune, true, false)},
          {"rotate_skipped", event_of(r.last_rotate_skip, false, true)},
          {"prune_skipped", event_of(r.last_prune_skip, false, true)}};
}

json of(const Health& h) {
  auto workers = json::array();
  for (const auto& w : h.workers) {
    workers.push_back({{"instance_id", w.instance_id},
                       {"hostname", w.hostname},
                       {"pid", w.pid},
                       {"queues", w.queues},
                       {"started_at", w.started_at},
                       {"last_seen_at", w.last_seen_at},
                       {"is_leader", w.is_leader}});
  }
  auto queues = json::array();
  for (const auto& q : h.queues) {
    queues.push_back(
        {{"queue", q.queue}, {"oldest_available_age_s", opt(q.oldest_available_age_s)}});
  }
  return {{"healthy", h.healthy},
          {"schema_version", h.schema_version},
          {"expected_schema_version", h.expected_schema_version},
          {"leader_present", h.leader_present},
          {"leader_tick_age_s", opt(h.leader_tick_age_s)},
          {"workers", std::move(workers)},
          {"queues", std::move(queues)},
          {"problems", h.problems}};
}

}  // namespace awa::json
