// Embedding warm: the smallest complete host program, built against an installed warm only.
//
//   c++ -std=c++17 embed.cpp -o embed $(pkg-config --cflags --libs --static warm)
//   ./embed [DIR]        # DIR: where to put the repository and state (default: a temp dir)
//
// It writes a small dense model into a model repository, creates a runtime over it, registers
// the model, runs one inference (the first use loads the model: a cold start), prints the output
// and the model's status, and exits 0. Any error is printed to stderr and exits 1.
//
// Only public headers are used: <warm/runtime.hpp> is the API; <warm/model_writer.hpp> is here
// just to make a model file (a real host points warm at models it already has).
#include <warm/model_writer.hpp>
#include <warm/runtime.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace {

int fail(const char* what, const warm::error& e) {
  std::fprintf(stderr, "embed: %s: %s\n", what, e.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const bool own_dir = argc < 2;
  const fs::path dir =
      own_dir ? fs::temp_directory_path() / ("warm-embed-" + std::to_string(::getpid()))
              : fs::path(argv[1]);
  struct cleanup {  // a temp dir we made is removed on every way out
    fs::path dir;
    ~cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } remove_at_exit{own_dir ? dir : fs::path()};

  // 1. A model repository: <root>/<model>/<version>/model.safetensors. This model takes 4 inputs
  //    and gives 3 outputs through a hidden layer of 8 (ReLU).
  const fs::path repo = dir / "repo";
  if (auto r = warm::write_dense_model((repo / "tiny" / "1" / "model.safetensors").string(),
                                       {{4, 8, 3}});
      !r)
    return fail("writing the model", r.error());

  // 2. The runtime: one host device with a 64 MiB budget, the repository, and a state directory
  //    for the registry (registrations survive restarts). Threads are created here.
  warm::runtime_options options;
  options.devices = {"host:64MiB"};
  options.repositories = {repo.string()};
  options.state_dir = (dir / "state").string();
  auto created = warm::runtime::create(options);
  if (!created) return fail("creating the runtime", created.error());
  std::unique_ptr<warm::runtime> rt = std::move(*created);

  // 3. Register the model under an id. The path is relative to a repository root; the highest
  //    version is used. The future form blocks until the registration is durable.
  if (auto r = rt->register_model("tiny", warm::model_info{"tiny"}).get(); !r)
    return fail("registering", r.error());

  // 4. Infer: one F32 input tensor named "input", shape [batch, 4], raw little-endian bytes.
  //    The model is not loaded yet, so warm loads it first (once, whatever the number of
  //    concurrent requests) and then answers. Later calls on a loaded model are hits, run on the
  //    calling thread.
  const std::vector<float> values{0.5f, -1.0f, 2.0f, 0.25f};
  warm::tensor input;
  input.name = "input";
  input.type = warm::dtype::f32;
  input.shape = {1, values.size()};
  input.data.resize(values.size() * sizeof(float));
  std::memcpy(input.data.data(), values.data(), input.data.size());
  auto result = rt->infer(warm::infer_request{"tiny", {input}}).get();
  if (!result) return fail("inferring", result.error());

  const warm::tensor& out = result->outputs.at(0);
  std::vector<float> y(out.data.size() / sizeof(float));
  std::memcpy(y.data(), out.data.data(), out.data.size());
  std::printf("output %s [%llu, %llu]:", out.name.c_str(),
              static_cast<unsigned long long>(out.shape.at(0)),
              static_cast<unsigned long long>(out.shape.at(1)));
  for (float v : y)
    std::printf(" %.6f", v);
  std::printf("\nserved by %s, cache_hit %s, waited %.2f ms for the load\n", result->model.c_str(),
              result->cache_hit ? "true" : "false", result->load_wait_ms);

  // 5. The same request again is a hit: the model is resident.
  auto again = rt->infer(warm::infer_request{"tiny", {input}}).get();
  if (!again) return fail("inferring again", again.error());

  // 6. The model's status: state, device, bytes, uses and load times.
  auto status = rt->status("tiny").get();
  if (!status) return fail("reading the status", status.error());
  std::printf(
      "status %s: %s on %s, %llu bytes, %llu requests (%llu hits), %llu load(s), mean %.2f ms\n",
      status->id.c_str(), std::string(warm::to_string(status->state)).c_str(),
      status->device.c_str(), static_cast<unsigned long long>(status->bytes),
      static_cast<unsigned long long>(status->requests),
      static_cast<unsigned long long>(status->hits),
      static_cast<unsigned long long>(status->loads.count), status->loads.mean_ms);
  if (!again->cache_hit || status->state != warm::model_state::loaded) {
    std::fprintf(stderr, "embed: expected the second inference to be a hit on a loaded model\n");
    return 1;
  }

  // 7. Destroying the runtime waits for inferences in flight, stops its threads and unloads.
  rt.reset();
  std::printf("ok\n");
  return 0;
}
