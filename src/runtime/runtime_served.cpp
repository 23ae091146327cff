// warm::runtime's vmodels and served models (runtime.cpp has the rest of the facade).
#include "runtime/runtime_impl.hpp"

#include "actors/protocol/registry_protocol.hpp"
#include "actors/protocol/version_manager_protocol.hpp"

namespace warm {

using runtime_detail::promised;

// ---- vmodels --------------------------------------------------------------------------------

void runtime::set_vmodel(const std::string& id, const std::string& target, bool auto_delete_target,
                         std::optional<std::string> expected_target,
                         callback<warm::vmodel_status> done) {
  caf::anon_send(impl_->registry, msg::set_vmodel{id, target, auto_delete_target,
                                                  std::move(expected_target), std::move(done)});
}

std::future<expected<vmodel_status>> runtime::set_vmodel(
    const std::string& id, const std::string& target, bool auto_delete_target,
    std::optional<std::string> expected_target) {
  auto [cb, future] = promised<warm::vmodel_status>();
  set_vmodel(id, target, auto_delete_target, std::move(expected_target), std::move(cb));
  return std::move(future);
}

void runtime::delete_vmodel(const std::string& id, callback<void> done) {
  caf::anon_send(impl_->registry, msg::delete_vmodel{id, std::move(done)});
}

std::future<expected<void>> runtime::delete_vmodel(const std::string& id) {
  auto [cb, future] = promised<void>();
  delete_vmodel(id, std::move(cb));
  return std::move(future);
}

void runtime::vmodel_status(const std::string& id, callback<warm::vmodel_status> done) {
  caf::anon_send(impl_->registry, msg::get_vmodel_status{id, std::move(done)});
}

std::future<expected<vmodel_status>> runtime::vmodel_status(const std::string& id) {
  auto [cb, future] = promised<warm::vmodel_status>();
  vmodel_status(id, std::move(cb));
  return std::move(future);
}

// ---- served models --------------------------------------------------------------------------

void runtime::serve(served_models_config config, callback<void> done) {
  caf::anon_send(impl_->versions, msg::serve_models{std::move(config), std::move(done)});
}

std::future<expected<void>> runtime::serve(served_models_config config) {
  auto [cb, future] = promised<void>();
  serve(std::move(config), std::move(cb));
  return std::move(future);
}

void runtime::served(callback<std::vector<served_model_status>> done) {
  caf::anon_send(impl_->versions, msg::served_status{std::move(done)});
}

std::future<expected<std::vector<served_model_status>>> runtime::served() {
  auto [cb, future] = promised<std::vector<served_model_status>>();
  served(std::move(cb));
  return std::move(future);
}

}  // namespace warm
