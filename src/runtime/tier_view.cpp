#include "runtime/tier_view.hpp"

#include <algorithm>
#include <map>

namespace warm {

void attach_models(tier_info& tier,
                   const std::vector<std::pair<std::string, std::string>>& sources) {
  std::map<std::string, std::vector<std::string>> by_source;
  for (const auto& [id, source] : sources)
    by_source[source].push_back(id);
  for (auto& held : tier.held) {
    held.models.clear();
    auto it = by_source.find(held.source);
    if (it == by_source.end()) continue;
    held.models = it->second;
    std::sort(held.models.begin(), held.models.end());
  }
}

void mark_tier(model_status& status, const tier_info& tier) {
  if (status.source.empty()) return;
  status.in_tier = false;
  status.tier_bytes = 0;
  for (const auto& held : tier.held)
    if (held.source == status.source) {
      status.in_tier = true;
      status.tier_bytes = held.bytes;
      return;
    }
}

void mark_tier(std::vector<model_status>& statuses, const tier_info& tier) {
  std::map<std::string, std::uint64_t> bytes;
  for (const auto& held : tier.held)
    bytes.emplace(held.source, held.bytes);
  for (auto& st : statuses) {
    if (st.source.empty()) continue;
    auto it = bytes.find(st.source);
    st.in_tier = it != bytes.end();
    st.tier_bytes = st.in_tier ? it->second : 0;
  }
}

}  // namespace warm
