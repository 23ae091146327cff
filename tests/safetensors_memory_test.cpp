// The safetensors reader's memory, measured: the most bytes live at once (every operator new of
// this process counted, the test's own input included) while it reads crafted headers of 16 MB.
// A document tree of the JSON cost up to ~25 bytes per byte of header (a 99 MB header took
// 2.5 GB); the streaming reader keeps what the header describes, within a few bytes per byte.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "warm/safetensors.hpp"

namespace {

std::atomic<std::int64_t> live{0}, peak{0};

// Each block carries its size ahead of the caller's bytes (16 bytes keep the alignment).
void* counted_alloc(std::size_t n) {
  auto* block = static_cast<unsigned char*>(std::malloc(n + 16));
  if (!block) throw std::bad_alloc();
  *reinterpret_cast<std::size_t*>(block) = n;
  auto now = live.fetch_add(static_cast<std::int64_t>(n)) + static_cast<std::int64_t>(n);
  auto seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
  return block + 16;
}

void counted_free(void* p) {
  if (!p) return;
  auto* block = static_cast<unsigned char*>(p) - 16;
  live.fetch_sub(static_cast<std::int64_t>(*reinterpret_cast<std::size_t*>(block)));
  std::free(block);
}

std::string length_prefix(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// A file image: the header `json` padded with spaces to `header_bytes`, then `data` zero bytes.
std::string image(std::string json, std::size_t header_bytes, std::size_t data = 0) {
  if (json.size() < header_bytes) json.append(header_bytes - json.size(), ' ');
  return length_prefix(json.size()) + json + std::string(data, '\0');
}

// The peak of live bytes above what was live before, while parsing `file`.
std::int64_t parse_peak(const std::string& file, bool& accepted, std::string& message) {
  auto before = live.load();
  peak.store(before);
  {
    auto parsed = warm::parse_safetensors(file);
    accepted = static_cast<bool>(parsed);
    if (!parsed) message = parsed.error().message;
  }
  return peak.load() - before;
}

constexpr std::size_t target = 16'000'000;  // header bytes of each crafted file

}  // namespace

// Every replaceable form, the nothrow ones included: a block from the runtime's own nothrow new
// (Catch2 uses it) released through the counted delete would read its size from outside it.
void* operator new(std::size_t n) {
  return counted_alloc(n);
}
void* operator new[](std::size_t n) {
  return counted_alloc(n);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept {
  return operator new(n, tag);
}
void operator delete(void* p) noexcept {
  counted_free(p);
}
void operator delete[](void* p) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  counted_free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  counted_free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  counted_free(p);
}

TEST_CASE("crafted 16 MB headers are read within a few bytes of memory per header byte") {
  struct crafted {
    const char* what;
    std::string file;
    bool valid;
  };
  std::vector<crafted> cases;
  {
    // The densest valid header: empty tensors, each a record of its own.
    std::string json = "{";
    for (std::size_t i = 0; json.size() < target - 64; ++i)
      json += (i ? ",\"" : "\"") + std::to_string(i) +
              R"(":{"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
    json += "}";
    cases.push_back({"400k empty tensors", image(json, json.size()), true});
  }
  {
    std::string json = R"({"t":{"dtype":"U8","shape":[)";
    while (json.size() < target - 64)
      json += "1,";
    json += R"(1],"data_offsets":[0,1]}})";
    cases.push_back({"a shape of 8M dimensions", image(json, json.size(), 1), false});
  }
  {
    std::string json = R"({"__metadata__":{)";
    for (std::size_t i = 0; json.size() < target - 64; ++i)
      json += (i ? ",\"" : "\"") + std::to_string(i) + "\":\"\"";
    json += "}}";
    cases.push_back({"1.6M metadata entries", image(json, json.size()), false});
  }
  {
    std::string json = R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":[)";
    while (json.size() < target - 64)
      json += "{},";
    json += "{}]}}";
    cases.push_back({"5M empty objects in an unknown field", image(json, json.size()), false});
  }
  {
    std::string json = "[";
    while (json.size() < target - 64)
      json += "[],";
    json += "[]]";
    cases.push_back({"5M empty arrays as the root", image(json, json.size()), false});
  }
  {
    std::string json = "{\"" + std::string(target - 80, 'n') +
                       R"(":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})";
    cases.push_back({"one 16 MB tensor name", image(json, json.size()), true});
  }
  for (const auto& c : cases) {
    INFO(c.what);
    bool accepted = false;
    std::string message;
    auto used = parse_peak(c.file, accepted, message);
    INFO("message: " << message);
    CHECK(accepted == c.valid);
    auto header = static_cast<std::int64_t>(c.file.size());
    INFO("peak " << used << " bytes for a " << header << "-byte header ("
                 << double(used) / double(header) << " per byte)");
    CHECK(used <= 6 * header);
  }
}
