// Shared test helpers: temporary directories and hand-made safetensors images.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace warm::test {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A safetensors image: the 8-byte length of `header_text`, the text, then `data_bytes` bytes of
// zeros. No validation: this is how tests make malformed files.
std::string image(const std::string& header_text, std::uint64_t data_bytes);
std::string json_image(const nlohmann::json& header, std::uint64_t data_bytes);

// Writes `bytes` to `path` (creating parent directories).
void write_file(const std::string& path, const std::string& bytes);

// A dense tensor entry {"dtype":"F32","shape":shape,"data_offsets":[begin,end]}.
nlohmann::json f32(std::vector<std::uint64_t> shape, std::uint64_t begin);

// Header of a valid dense model with these widths (tensors contiguous from offset 0).
nlohmann::json dense_header(const std::vector<std::uint64_t>& widths,
                            const std::string& activation = "relu");

}  // namespace warm::test
