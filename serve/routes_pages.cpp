// The dashboard: its page paths answer with one HTML shell and /assets/ with the
// embedded scripts and styles (serve/ui/). The shell and assets hold no data: what the
// pages show comes from /api/, behind its checks.
#include <fmt/format.h>

#include "api.hpp"
#include "ui_assets.hpp"

namespace awa::serve::detail {
namespace {

std::string_view content_type(std::string_view name) {
  const auto dot = name.rfind('.');
  const std::string_view ext = dot == std::string_view::npos ? "" : name.substr(dot + 1);
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "svg") return "image/svg+xml";
  return "application/octet-stream";
}

const UiAsset* find_asset(std::string_view name) {
  for (const auto& a : ui_assets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

// Every path a page is shown at; the shell's script picks the page from the path, so a
// URL with its filters can be shared. Ids, queue and batch names are checked by the API.
constexpr const char* kPagePaths[] = {"/",           "/queues/[^/]+", "/jobs",
                                      "/jobs/[^/]+", "/batches",      "/batches/[^/]+",
                                      "/dlq",        "/storage",      "/login"};

}  // namespace

void add_page_routes(httplib::Server& http, const HostCheck& guard) {
  for (const char* path : kPagePaths) {
    http.Get(path, [guard](const httplib::Request& req, httplib::Response& res) {
      if (!guard(req, res)) return;
      // Scripts, styles and fetches from this origin only; no inline script, no frames.
      res.set_header("Content-Security-Policy",
                     "default-src 'self'; frame-ancestors 'none'; form-action 'self'");
      res.set_header("X-Frame-Options", "DENY");
      const auto* shell = find_asset("index.html");
      res.set_content(std::string(shell->content), std::string(content_type(shell->name)));
    });
  }
  http.Get("/assets/([A-Za-z0-9_.-]+)",
           [guard](const httplib::Request& req, httplib::Response& res) {
             if (!guard(req, res)) return;
             const std::string name = req.matches[1];
             const auto* a = name == "index.html" ? nullptr : find_asset(name);
             if (a == nullptr) {
               send_json(res, 404, {{"error", fmt::format("no such asset: {}", name)}});
               return;
             }
             res.set_content(std::string(a->content), std::string(content_type(a->name)));
           });
}

}  // namespace awa::serve::detail
