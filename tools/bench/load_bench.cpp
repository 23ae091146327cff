// warm-bench load: one copy from the page cache is the limit. The same run times
//   load      — device::load() onto a fresh host device (allocate + sequential reads into it),
//   read      — plain read() of the same bytes into a freshly malloc'd buffer (the baseline),
//   read_warm — read() into a buffer already faulted in (the memcpy-from-page-cache ceiling),
// interleaved `repeats` times, the three rotated so that each runs first equally often. Medians
// are reported. The headline `ratio` is the median over repeats of load speed / read_warm speed:
// warm's load pre-populates its mapping, so the fair yardstick is the copy with no page faults.
// `ratio_fresh` is load speed / read speed (a page fault per 4 KiB on the read side). Each ratio
// pairs measurements of one repeat, which saw the same machine state (fresh-memory costs on these
// VMs swing by 2x between minutes).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "storage/file.hpp"
#include "warm/backend.hpp"
#include "warm/device.hpp"
#include "warm/model_repository.hpp"
#ifdef WARM_BENCH_TORCH
#include "torch_direct.hpp"
#endif
#include "warm/model_writer.hpp"

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// Plain read() of [offset, offset + bytes) into `out`, in 64 MiB calls.
bool plain_read(const std::string& path, std::uint64_t offset, std::uint64_t bytes, char* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0) return false;
  std::uint64_t done = 0;
  while (done < bytes) {
    auto n = ::read(fd, out + done, std::min<std::uint64_t>(bytes - done, 64u << 20));
    if (n <= 0) break;
    done += static_cast<std::uint64_t>(n);
  }
  ::close(fd);
  return done == bytes;
}

}  // namespace

#ifdef WARM_BENCH_TORCH
// `load --backend torchscript`: the encoder of tools/torch_models.py loaded the way warm loads it
// (the torchscript backend onto a host device: the confined open, torch::jit::load, the size
// measured, a warm-up inference on zeros) vs torch::jit::load of the same file, alone and followed
// by one forward() on the same zeros, interleaved and rotated. ratio = the median over repeats of
// torch::jit::load's time / warm's (1 = no overhead); ratio_first_call the same with the first
// call, which warm's load includes.
int run_torch_load(const load_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench load: %s\n", message.c_str());
    return 1;
  };
  scratch_dir dir("load-torch");
  auto repo = (dir.path() / "repo").string();
  auto command = "/usr/bin/python3 " WARM_SOURCE_ROOT "/tools/torch_models.py " + repo + " >&2";
  if (std::system(command.c_str()) != 0)
    return fail("tools/torch_models.py failed (is python3-torch installed?)");
  auto repository = model_repository::create({repo});
  if (!repository) return fail(repository.error().to_string());
  auto where = repository->resolve("encoder");
  if (!where) return fail(where.error().to_string());
  auto backend = find_backend(where->kind);
  if (!backend) return fail(backend.error().to_string());
  auto described = (*backend)->describe(*where);
  if (!described) return fail(described.error().to_string());
  device_spec spec;
  spec.type = device_spec::kind::host;
  spec.capacity = std::uint64_t{256} << 20;
  auto dev = make_device(spec);
  if (!dev) return fail(dev.error().to_string());

  auto warm_load = [&]() -> expected<double> {
    auto reservation = (*dev)->reserve(described->predicted_bytes);
    if (!reservation) return std::move(reservation).error();
    auto start = clock_type::now();
    auto model = (*backend)->load(**dev, *where, std::move(*reservation), nullptr);
    auto seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    if (!model) return std::move(model).error();
    return seconds;
  };
  // The warm-up's input: zeros of the smallest shape, as warm's load makes them.
  std::vector<tensor> zeros{{"src", dtype::f32, {1, 5, 16}, std::vector<std::byte>(5 * 16 * 4)}};
  // Three loads per repeat, rotated: warm's, torch::jit::load alone, and with its first call.
  std::vector<double> samples[3], ratios, ratios_first_call;
  for (int r = 0; r < options.repeats; ++r) {
    double took_s[3] = {0, 0, 0};
    for (int step = 0; step < 3; ++step) {
      int which = (step + r) % 3;
      auto took =
          which == 0 ? warm_load() : time_torch_load(where->path, which == 2 ? &zeros : nullptr);
      if (!took) return fail(took.error().to_string());
      took_s[which] = *took;
      samples[which].push_back(*took * 1e3);
    }
    ratios.push_back(took_s[1] / took_s[0]);
    ratios_first_call.push_back(took_s[2] / took_s[0]);
  }
  nlohmann::ordered_json out{{"scenario", "load"},
                             {"backend", "torchscript"},
                             {"model", "encoder (TransformerEncoderLayer d=16, traced)"},
                             {"file_bytes", std::filesystem::file_size(where->path)},
                             {"warm_ms", median(samples[0])},
                             {"torch_load_ms", median(samples[1])},
                             {"torch_load_first_call_ms", median(samples[2])},
                             {"ratio", median(ratios)},
                             {"ratio_first_call", median(ratios_first_call)},
                             {"repeats", options.repeats}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
#endif

int run_load(const load_options& options) {
  if (options.backend == "torchscript") {
#ifdef WARM_BENCH_TORCH
    return run_torch_load(options);
#else
    std::fprintf(stderr, "warm-bench load: this build has no TorchScript backend\n");
    return 1;
#endif
  }
  namespace fs = std::filesystem;
  bool own_dir = options.dir.empty();
  fs::path dir = own_dir
                     ? fs::temp_directory_path() / ("warm-bench-load-" + std::to_string(::getpid()))
                     : fs::path(options.dir);
  auto path = (dir / "model.safetensors").string();
  auto cleanup = [&] {
    std::error_code ec;
    if (own_dir)
      fs::remove_all(dir, ec);
    else
      fs::remove(path, ec);
  };
  auto fail = [&](const std::string& message) {
    std::fprintf(stderr, "warm-bench load: %s\n", message.c_str());
    cleanup();
    return 1;
  };

  if (auto r = write_dense_model(path, {widths_for_bytes(options.bytes), activation::relu, 1}); !r)
    return fail(r.error().message);
  auto model = open_model_file(path);
  if (!model) return fail(model.error().message);
  const std::uint64_t bytes = model->spec.data_bytes;
  const std::uint64_t offset = model->header.data_offset;

  // Bring the file into the page cache, and fault in the warm baseline's buffer.
  std::unique_ptr<char[]> warm_buffer(new char[bytes]);
  std::memset(warm_buffer.get(), 0, bytes);
  if (!plain_read(path, offset, bytes, warm_buffer.get())) return fail("cannot read " + path);

  auto dev = make_device(device_spec{device_spec::kind::host, 0, bytes});
  if (!dev) return fail(dev.error().message);

  enum class side { load, read, read_warm };
  std::vector<double> load_s, read_s, warm_s;
  for (int i = 0; i < options.repeats; ++i) {
    for (side s : rotated_order<side>({side::load, side::read, side::read_warm}, i)) {
      auto start = clock_type::now();
      if (s == side::load) {
        auto resident = (*dev)->load(*model);
        load_s.push_back(seconds_since(start));
        if (!resident) return fail(resident.error().message);
        resident->reset();
      } else if (s == side::read) {
        std::unique_ptr<char[]> fresh(new char[bytes]);
        bool ok = plain_read(path, offset, bytes, fresh.get());
        read_s.push_back(seconds_since(start));
        if (!ok) return fail("cannot read " + path);
      } else {
        bool ok = plain_read(path, offset, bytes, warm_buffer.get());
        warm_s.push_back(seconds_since(start));
        if (!ok) return fail("cannot read " + path);
      }
    }
  }
  cleanup();

  std::vector<double> warm_ratios, fresh_ratios;  // load speed / baseline speed, per repeat
  for (std::size_t i = 0; i < load_s.size(); ++i) {
    warm_ratios.push_back(warm_s[i] / load_s[i]);
    fresh_ratios.push_back(read_s[i] / load_s[i]);
  }
  auto gbps = [&](std::vector<double>& s) {
    return static_cast<double>(bytes) / percentile(s, 50) / 1e9;
  };
  double load_gbps = gbps(load_s), read_gbps = gbps(read_s), warm_gbps = gbps(warm_s);
  nlohmann::ordered_json out{{"scenario", "load"},
                             {"bytes", bytes},
                             {"repeats", options.repeats},
                             {"load_gbps", load_gbps},
                             {"read_gbps", read_gbps},
                             {"read_warm_gbps", warm_gbps},
                             {"ratio", percentile(warm_ratios, 50)},
                             {"ratio_fresh", percentile(fresh_ratios, 50)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace warm::bench
