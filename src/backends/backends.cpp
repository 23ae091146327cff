#include <mutex>

#include "backends/builtin.hpp"
#include "storage/runtime_manifest.hpp"

namespace warm {
namespace {

std::vector<const backend*> built_in() {
  std::vector<const backend*> all{dense_backend_instance()};
  if (auto* torch = torchscript_backend_instance()) all.push_back(torch);
  return all;
}

// The process's code policy, behind its lock (function statics: set_code_policy may be called
// during another file's static initialization).
struct policy_holder {
  std::mutex mutex;
  code_policy policy;  // guarded by mutex
};
policy_holder& code_policy_holder() {
  static policy_holder holder;
  return holder;
}

const std::vector<const backend*>& all_backends() {
  static const std::vector<const backend*> all = built_in();
  return all;
}

}  // namespace

expected<const backend*> find_backend(std::string_view kind) {
  for (const auto* b : all_backends())
    if (b->name() == kind) return b;
  std::string served;
  for (const auto& k : backend_kinds())
    served += (served.empty() ? "" : ", ") + k;
  return make_error(errc::not_found, "no backend serves model kind '" + std::string(kind) +
                                         "' in this build (it serves " + served + ")");
}

std::vector<std::string> backend_kinds() {
  std::vector<std::string> kinds;
  for (const auto* b : all_backends())
    kinds.emplace_back(b->name());
  return kinds;
}

namespace {

// A model a runtime serves (warm.json): its type and the bytes of its files, as a first
// prediction. Its inputs and outputs are unknown until a runtime has loaded it.
expected<model_description> describe_manifest(const model_location& where) {
  auto manifest = read_runtime_manifest(where);
  if (!manifest) return std::move(manifest).error();
  auto target = manifest_target(where, *manifest);
  if (!target) return std::move(target).error();
  auto bytes = manifest_target_bytes(*target);
  if (!bytes) return std::move(bytes).error();
  model_description d;
  d.kind = manifest->type;
  d.predicted_bytes = *bytes;
  return d;
}

}  // namespace

expected<model_description> describe_model(const model_location& where) {
  if (is_manifest(where.path)) return describe_manifest(where);
  auto b = find_backend(where.kind);
  if (!b) return make_error(errc::invalid_argument, where.path + ": " + b.error().message);
  return (*b)->describe(where);
}

void set_code_policy(code_policy p) {
  auto& h = code_policy_holder();
  std::lock_guard lock(h.mutex);
  h.policy = std::move(p);
}

code_policy current_code_policy() {
  auto& h = code_policy_holder();
  std::lock_guard lock(h.mutex);
  return h.policy;
}

expected<model_description> describe_open_file(std::string_view kind, int fd,
                                               const std::string& path) {
  if (kind == "torchscript") return describe_torchscript_fd(fd, path);
  return make_error(errc::invalid_argument,
                    path +
                        ": describe_open_file serves model kinds that are code "
                        "(torchscript), not '" +
                        std::string(kind) + "'");
}

void set_backend_threads(int threads) {
  set_host_blas_threads(threads);
  set_torchscript_threads(threads);
}

bool runs_on(const model_location& where, device& dev) {
  if (auto* host = dev.hosted_models()) return host->serves(where.kind);
  auto b = find_backend(where.kind);
  return b && (*b)->runs_on(dev);
}

}  // namespace warm
