// GET /api/batches (the newest first) and GET /api/batches/{name} (one batch with a page of
// its members), through awa::WorkflowAdmin (docs/workflows.md, "Batches"). Read-only: a
// batch is opened and sealed by producers, not from the dashboard.
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "api.hpp"
#include "awa/workflows.hpp"

namespace awa::serve::detail {

void add_batch_routes(Router& r) {
  const WorkflowAdmin workflows(r.server_options().schema);
  r.get("/api/batches", [workflows](const httplib::Request& req, httplib::Response& res,
                                    Connection& conn, const Admin&) {
    const Params p(req, {"open", "limit"});
    const int limit = static_cast<int>(p.integer("limit", 1, 10000).value_or(100));
    auto out = nlohmann::json::array();
    for (const auto& b : workflows.list_batches(conn, limit, p.flag("open"))) {
      out.push_back(to_json(b));
    }
    send_json(res, 200, out);
  });
  // Batch names are A-Z a-z 0-9 _ . : - ; anything else in the segment reaches
  // WorkflowAdmin's validation and is a 400.
  r.get("/api/batches/([^/]+)", [workflows](const httplib::Request& req, httplib::Response& res,
                                            Connection& conn, const Admin&) {
    const Params p(req, {"members", "after"});
    const std::string name = req.matches[1];
    const int members = static_cast<int>(p.integer("members", 0, 10000).value_or(100));
    const JobId after = p.integer("after", 0, INT64_MAX).value_or(0);
    const auto b = workflows.batch(conn, name);
    if (!b) {
      throw HttpError(
          404, fmt::format("batch {} not found (never opened, or purged after it finished)", name));
    }
    auto out = to_json(*b);
    auto list = nlohmann::json::array();
    std::vector<JobLink> page;
    if (members > 0) page = workflows.batch_members(conn, name, members, after);
    for (const auto& m : page) list.push_back({{"id", m.id}, {"state", m.state}});
    out["member_jobs"] = std::move(list);
    // A full page may have a next one: its `after` is the last id shown.
    const bool full = members > 0 && page.size() == static_cast<std::size_t>(members);
    out["next_after"] = full ? nlohmann::json(page.back().id) : nlohmann::json(nullptr);
    send_json(res, 200, out);
  });
}

}  // namespace awa::serve::detail
