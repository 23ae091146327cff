#include "warm/runtime_types.hpp"

namespace warm {

std::string_view to_string(model_state state) noexcept {
  switch (state) {
    case model_state::not_found:
      return "NOT_FOUND";
    case model_state::not_loaded:
      return "NOT_LOADED";
    case model_state::queued:
      return "QUEUED";
    case model_state::loading:
      return "LOADING";
    case model_state::loaded:
      return "LOADED";
    case model_state::loading_failed:
      return "LOADING_FAILED";
  }
  return "UNKNOWN";
}

std::string_view to_string(vmodel_state state) noexcept {
  switch (state) {
    case vmodel_state::not_found:
      return "NOT_FOUND";
    case vmodel_state::defined:
      return "DEFINED";
    case vmodel_state::transitioning:
      return "TRANSITIONING";
    case vmodel_state::transition_failed:
      return "TRANSITION_FAILED";
  }
  return "UNKNOWN";
}

}  // namespace warm
