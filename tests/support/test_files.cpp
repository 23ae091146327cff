#include "support/test_files.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

namespace warm::test {

namespace fs = std::filesystem;

temp_dir::temp_dir() {
  std::string pattern = (fs::temp_directory_path() / "warm-test-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

temp_dir::~temp_dir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string image(const std::string& header_text, std::uint64_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((header_text.size() >> (8 * i)) & 0xff);
  out += header_text;
  out.append(data_bytes, '\0');
  return out;
}

std::string json_image(const nlohmann::json& header, std::uint64_t data_bytes) {
  return image(header.dump(), data_bytes);
}

void write_file(const std::string& path, const std::string& bytes) {
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

nlohmann::json f32(std::vector<std::uint64_t> shape, std::uint64_t begin) {
  std::uint64_t bytes = 4;
  for (auto d : shape)
    bytes *= d;
  return {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, begin + bytes}}};
}

nlohmann::json dense_header(const std::vector<std::uint64_t>& widths,
                            const std::string& activation) {
  nlohmann::json header;
  header["__metadata__"] = {{"warm.kind", "dense"}, {"warm.activation", activation}};
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
    auto prefix = "layers." + std::to_string(i);
    header[prefix + ".weight"] = f32({widths[i + 1], widths[i]}, offset);
    offset += 4 * widths[i + 1] * widths[i];
    header[prefix + ".bias"] = f32({widths[i + 1]}, offset);
    offset += 4 * widths[i + 1];
  }
  return header;
}

}  // namespace warm::test
