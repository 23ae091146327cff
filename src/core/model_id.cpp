#include "core/model_id.hpp"

namespace warm {

expected<void> check_id(const std::string& id, const char* what) {
  if (id.empty() || id.size() > 256)
    return make_error(errc::invalid_argument,
                      std::string(what) + " id must be 1 to 256 bytes long");
  for (unsigned char c : id)
    if (c <= 0x20 || c >= 0x7f || c == '/')
      return make_error(errc::invalid_argument,
                        std::string(what) + " id '" + id +
                            "' may hold only printable ASCII without spaces or '/'");
  return {};
}

}  // namespace warm
