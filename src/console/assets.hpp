// The console's page, script and style, compiled into the binary from src/console/page by
// embed_assets.py: no file is read at run time and the page needs nothing from elsewhere.
#pragma once

#include <string_view>
#include <vector>

namespace warm::console {

struct asset {
  std::string_view path;  // "/console/index.html", "/console/console.js", …
  std::string_view type;  // its Content-Type
  std::string_view body;
};

// Every embedded file; static data, alive for the program's life.
const std::vector<asset>& assets();

// The asset served at `path`: "/" and "/console" are the page (index.html); nullptr for any
// other path.
inline const asset* find_asset(std::string_view path) {
  if (path == "/" || path == "/console" || path == "/console/") path = "/console/index.html";
  for (const auto& a : assets())
    if (a.path == path) return &a;
  return nullptr;
}

}  // namespace warm::console
