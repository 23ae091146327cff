#include <charconv>

#include "gpu/cuda_device.hpp"
#include "gpu/host_device.hpp"
#include "warm/device.hpp"
#include "warm/units.hpp"

namespace warm {

inline constexpr std::uint64_t default_host_capacity = std::uint64_t{1} << 30;

std::string device_spec::to_string() const {
  std::string out = type == kind::cuda ? "cuda:" + std::to_string(ordinal)
                    : partition < 0    ? "host"
                                       : "host." + std::to_string(partition);
  if (capacity) out += ":" + std::to_string(*capacity);
  return out;
}

expected<device_spec> parse_device_spec(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument,
                      "bad device '" + text + "': " + why +
                          " (expected host[:SIZE] or cuda:N[:SIZE], e.g. host:4GiB)");
  };
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    auto colon = text.find(':', start);
    parts.push_back(
        text.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  device_spec spec;
  std::size_t size_at = 1;
  if (parts[0] == "host") {
    spec.type = device_spec::kind::host;
  } else if (parts[0].rfind("host.", 0) == 0) {
    // host.N: a separately budgeted partition of host memory (several host devices).
    spec.type = device_spec::kind::host;
    auto index = parts[0].substr(5);
    auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), spec.partition);
    if (index.empty() || ec != std::errc{} || end != index.data() + index.size() ||
        spec.partition < 0)
      return bad("host partition '" + index + "' is not a non-negative integer");
  } else if (parts[0] == "cuda") {
    spec.type = device_spec::kind::cuda;
    if (parts.size() < 2) return bad("missing GPU index");
    const auto& index = parts[1];
    auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), spec.ordinal);
    if (index.empty() || ec != std::errc{} || end != index.data() + index.size() ||
        spec.ordinal < 0)
      return bad("GPU index '" + index + "' is not a non-negative integer");
    size_at = 2;
  } else {
    return bad("unknown device kind '" + parts[0] + "'");
  }
  if (parts.size() > size_at + 1) return bad("too many fields");
  if (parts.size() == size_at + 1) {
    auto bytes = parse_bytes(parts[size_at]);
    if (!bytes) return bad(bytes.error().message);
    if (*bytes == 0) return bad("capacity must be positive");
    spec.capacity = *bytes;
  }
  return spec;
}

expected<std::unique_ptr<device>> make_device(const device_spec& spec) {
  if (spec.type == device_spec::kind::host)
    return make_host_device(spec.capacity.value_or(default_host_capacity),
                            spec.partition < 0 ? "host" : "host." + std::to_string(spec.partition));
  return make_cuda_device(spec.ordinal, spec.capacity);
}

}  // namespace warm
