// Backends: what turns a model's file into a model resident on a device. Each model kind has
// one ("dense": warm's MLP in safetensors; "torchscript": a PyTorch TorchScript archive, when warm
// was built with libtorch). A model's kind comes from its file's name (model_location::kind);
// everything above the backends (actors, policies, batcher, fronts) sees only resident_model and
// model_io.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "warm/device.hpp"
#include "warm/error.hpp"
#include "warm/model_io.hpp"
#include "warm/model_repository.hpp"

namespace warm {

// What reading a model's file (without loading it) tells.
struct model_description {
  std::string kind;
  model_io io;
  // Bytes to reserve on a device before loading: the weights' bytes, or the backend's
  // conservative estimate. A load may charge more once it has measured what the model takes.
  std::uint64_t predicted_bytes = 0;
  std::uint32_t layers = 0;  // dense: layers and activation
  std::string activation;
};

class backend {
 public:
  virtual ~backend() = default;

  // "dense", "torchscript": the kind model_location::kind names.
  virtual std::string_view name() const = 0;

  // Whether models of this kind can run on `dev`.
  virtual bool runs_on(const device& dev) const = 0;

  // Reads the model's file, beneath its root, and describes the model. Blocks on I/O (and may
  // parse the whole model): call it off actor threads. invalid_argument for a malformed model.
  virtual expected<model_description> describe(const model_location& where) const = 0;

  // Loads the model onto `dev`, charged `reservation` to begin with (made from describe's
  // predicted bytes or a size hint). May block. On failure every byte goes back to `dev`.
  virtual expected<std::unique_ptr<resident_model>> load(device& dev, const model_location& where,
                                                         memory_reservation reservation,
                                                         load_stats* stats) const = 0;
};

// The backend for a kind; not_found naming the kinds this build serves when there is none.
expected<const backend*> find_backend(std::string_view kind);

// The kinds this build serves, "dense" first.
std::vector<std::string> backend_kinds();

// find_backend(where.kind)->describe(where).
expected<model_description> describe_model(const model_location& where);

// How many threads one inference may use on the host, for every backend (set_host_blas_threads
// for dense models; libtorch's intra-op threads for TorchScript ones). Process-wide; 1 by default.
void set_backend_threads(int threads);

// Where model code may run. A TorchScript archive is a program: loading it runs its code (its
// classes' __setstate__), and its forward() can read and write whatever the process can, open
// sockets and start programs. warm therefore never loads one in a process that serves anything
// else unless told to: TorchScript models run in a model runtime (warm-runtime, which sandboxes
// itself), and are described (their inputs, outputs and size, read at registration) by a
// short-lived, sandboxed helper process. Process-wide.
struct code_policy {
  // Load, run and describe TorchScript models in this process (its host devices). Off by
  // default: anyone who can write a model file into a repository then runs code as this process.
  bool in_process = false;
  // The executable that describes a TorchScript file when in_process is off: run as
  // `HELPER --describe` with the file open on descriptor 3 and nothing else it can reach, it
  // prints the description as JSON on its standard output (warm-runtime does). Empty: such
  // describes fail with an error that says why.
  std::string describe_helper;
  // A describe that has not answered within the deadline is killed, and the model refused.
  std::chrono::milliseconds describe_deadline{30'000};
  // The helper's address space and CPU time: a hostile archive runs out of them, not the host.
  std::uint64_t describe_memory = std::uint64_t{8} << 30;
  std::uint32_t describe_cpu_seconds = 20;
};

// Sets the process's code policy (before models are registered: a describe reads it once).
void set_code_policy(code_policy policy);
code_policy current_code_policy();

// Describes the model of `kind` in the file already open on `fd` (which stays open and owned by
// the caller), named `path` in messages. What a describe helper runs inside its sandbox, and the
// in-process path of describe(). Checks an archive's entries before anything is inflated.
expected<model_description> describe_open_file(std::string_view kind, int fd,
                                               const std::string& path);

// Whether a model at `where` can run on `dev`: for a device that hosts models itself (a model
// runtime), whether it serves the kind; otherwise whether this build's backend for the kind runs
// there (false for a kind this build does not serve).
bool runs_on(const model_location& where, device& dev);

}  // namespace warm
