#include "warm/model_writer.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include <unistd.h>

#include <nlohmann/json.hpp>

namespace warm {
namespace {

namespace fs = std::filesystem;

// splitmix64: tiny, fast and identical on every platform (unlike std distributions).
struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float unit() { return static_cast<float>(static_cast<double>(next() >> 40) * 0x1p-23 - 1.0); }
};

expected<void> check(const dense_model_options& o) {
  if (o.widths.size() < 2)
    return make_error(errc::invalid_argument, "a dense model needs at least two widths (in, out)");
  for (auto w : o.widths)
    if (w == 0 || w > max_dense_width)
      return make_error(errc::invalid_argument,
                        "layer width " + std::to_string(w) + " is out of range");
  return {};
}

std::string header_json(const dense_model_options& o) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"warm.kind", "dense"},
                            {"warm.activation", std::string(to_string(o.activation))}};
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i + 1 < o.widths.size(); ++i) {
    auto in = o.widths[i], out = o.widths[i + 1];
    auto prefix = "layers." + std::to_string(i);
    header[prefix + ".weight"] = {
        {"dtype", "F32"}, {"shape", {out, in}}, {"data_offsets", {offset, offset + 4 * out * in}}};
    offset += 4 * out * in;
    header[prefix + ".bias"] = {
        {"dtype", "F32"}, {"shape", {out}}, {"data_offsets", {offset, offset + 4 * out}}};
    offset += 4 * out;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data buffer starts 8-byte aligned
  return text;
}

// Produces the file image in pieces: the length prefix and header, then tensors in chunks.
expected<void> emit(const dense_model_options& o,
                    const std::function<expected<void>(const void*, std::size_t)>& sink) {
  if (auto ok = check(o); !ok) return ok;
  std::string header = header_json(o);
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i)
    prefix[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  if (auto r = sink(prefix, 8); !r) return r;
  if (auto r = sink(header.data(), header.size()); !r) return r;

  splitmix64 rng{o.seed};
  std::vector<float> chunk(1 << 18);
  auto random_tensor = [&](std::uint64_t count, float bound) -> expected<void> {
    while (count > 0) {
      std::size_t n = count < chunk.size() ? count : chunk.size();
      for (std::size_t i = 0; i < n; ++i)
        chunk[i] = bound * rng.unit();
      if (auto r = sink(chunk.data(), n * sizeof(float)); !r) return r;
      count -= n;
    }
    return {};
  };
  for (std::size_t i = 0; i + 1 < o.widths.size(); ++i) {
    float bound = 1.0f / std::sqrt(static_cast<float>(o.widths[i]));
    if (auto r = random_tensor(o.widths[i] * o.widths[i + 1], bound); !r) return r;
    if (auto r = random_tensor(o.widths[i + 1], bound); !r) return r;
  }
  return {};
}

}  // namespace

expected<std::vector<std::uint64_t>> parse_widths(const std::string& text) {
  std::vector<std::uint64_t> widths;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    auto piece = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (piece.empty() || piece.size() > 9 ||
        piece.find_first_not_of("0123456789") != std::string::npos)
      return make_error(errc::invalid_argument,
                        "bad layer widths '" + text + "': expected e.g. 784,512,10");
    widths.push_back(std::stoull(piece));
    if (widths.back() == 0 || widths.back() > max_dense_width)
      return make_error(errc::invalid_argument, "layer width " + piece + " is out of range");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (widths.size() < 2)
    return make_error(errc::invalid_argument,
                      "bad layer widths '" + text + "': need at least in,out");
  return widths;
}

std::uint64_t dense_data_bytes(const std::vector<std::uint64_t>& widths) {
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i + 1 < widths.size(); ++i)
    bytes += 4 * (widths[i] * widths[i + 1] + widths[i + 1]);
  return bytes;
}

std::vector<std::uint64_t> widths_for_bytes(std::uint64_t bytes, std::uint64_t in,
                                            std::uint64_t out) {
  // bytes ≈ 4 * (hidden * in + hidden + out * hidden + out)
  std::uint64_t per_hidden = 4 * (in + 1 + out);
  std::uint64_t hidden = bytes > 4 * out ? (bytes - 4 * out) / per_hidden : 1;
  if (hidden == 0) hidden = 1;
  if (hidden > max_dense_width) hidden = max_dense_width;
  return {in, hidden, out};
}

expected<std::string> dense_model_bytes(const dense_model_options& options) {
  std::string image;
  auto ok = emit(options, [&](const void* data, std::size_t n) -> expected<void> {
    image.append(static_cast<const char*>(data), n);
    return {};
  });
  if (!ok) return std::move(ok).error();
  return image;
}

expected<void> write_dense_model(const std::string& path, const dense_model_options& options) {
  if (auto ok = check(options); !ok) return ok;
  std::error_code ec;
  fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec)
    return make_error(errc::invalid_argument, path + ": cannot create directory: " + ec.message());
  std::string temp = path + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(temp.c_str(), "wb"), &std::fclose);
  if (!out)
    return make_error(errc::invalid_argument, temp + ": cannot create: " + std::strerror(errno));
  auto ok = emit(options, [&](const void* data, std::size_t n) -> expected<void> {
    if (std::fwrite(data, 1, n, out.get()) != n)
      return make_error(errc::internal, temp + ": write failed: " + std::strerror(errno));
    return {};
  });
  // Flush to stable storage before the rename publishes the file, so a crash never leaves a
  // truncated model under the final name.
  if (ok && (std::fflush(out.get()) != 0 || ::fsync(::fileno(out.get())) != 0))
    ok = make_error(errc::internal, temp + ": write failed: " + std::strerror(errno));
  if (ok && std::fclose(out.release()) != 0)
    ok = make_error(errc::internal, temp + ": write failed: " + std::strerror(errno));
  if (ok) {
    fs::rename(temp, target, ec);
    if (ec) ok = make_error(errc::internal, path + ": cannot rename into place: " + ec.message());
  }
  if (!ok) fs::remove(temp, ec);
  return ok;
}

}  // namespace warm
