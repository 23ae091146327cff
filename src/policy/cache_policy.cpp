#include "policy/cache_policy.hpp"

#include "policy/lru_policy.hpp"

namespace warm {

expected<std::unique_ptr<cache_policy>> make_policy(std::string_view name) {
  if (name == "lru") return std::unique_ptr<cache_policy>(std::make_unique<lru_policy>());
  return make_error(errc::invalid_argument, "unknown policy '" + std::string(name) + "' (known: lru)");
}

}  // namespace warm
