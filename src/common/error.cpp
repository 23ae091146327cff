#include "warm/error.hpp"

namespace warm {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::not_found:
      return "not_found";
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::model_too_large:
      return "model_too_large";
    case errc::capacity_exhausted:
      return "capacity_exhausted";
    case errc::load_failed:
      return "load_failed";
    case errc::unavailable:
      return "unavailable";
    case errc::timeout:
      return "timeout";
    case errc::internal:
      return "internal";
  }
  return "internal";
}

std::string error::to_string() const {
  std::string out(warm::to_string(code));
  out += ": ";
  out += message;
  return out;
}

}  // namespace warm
