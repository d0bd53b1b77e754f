// The dashboard's pages, scripts and styles (serve/ui/), embedded at build time by
// cmake/embed_assets.cmake.
#pragma once

#include <span>
#include <string_view>

namespace awa::serve::detail {

struct UiAsset {
  std::string_view name;  // file name in serve/ui/, e.g. "core.js"
  std::string_view content;
};

// Every embedded file, sorted by name.
std::span<const UiAsset> ui_assets();

}  // namespace awa::serve::detail
