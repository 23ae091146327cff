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
#include <cstring>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "storage/file.hpp"
#include "warm/device.hpp"
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

int run_load(const load_options& options) {
  namespace fs = std::filesystem;
  bool own_dir = options.dir.empty();
  fs::path dir = own_dir ? fs::temp_directory_path() / ("warm-bench-load-" + std::to_string(::getpid())) : fs::path(options.dir);
  auto path = (dir / "model.safetensors").string();
  auto cleanup = [&] {
    std::error_code ec;
    if (own_dir) fs::remove_all(dir, ec); else fs::remove(path, ec);
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
  auto gbps = [&](std::vector<double>& s) { return static_cast<double>(bytes) / percentile(s, 50) / 1e9; };
  double load_gbps = gbps(load_s), read_gbps = gbps(read_s), warm_gbps = gbps(warm_s);
  nlohmann::ordered_json out{{"scenario", "load"},      {"bytes", bytes},
                             {"repeats", options.repeats}, {"load_gbps", load_gbps},
                             {"read_gbps", read_gbps},  {"read_warm_gbps", warm_gbps},
                             {"ratio", percentile(warm_ratios, 50)},
                             {"ratio_fresh", percentile(fresh_ratios, 50)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace warm::bench
