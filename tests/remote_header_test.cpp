// A remote safetensors file's header fetched alone (sources/remote_header.hpp), over an in-memory
// store: how many bytes are asked for, headers beyond the first look, lengths that lie, and reads
// past the header refused.
#include <catch2/catch.hpp>

#include "sources/remote_header.hpp"
#include "storage/file.hpp"
#include "storage/safetensors_file.hpp"
#include "support/fake_store.hpp"
#include "warm/safetensors.hpp"

using namespace warm;

namespace {

// A safetensors file: one F32 tensor of `floats` values, its JSON header padded to `header` bytes.
std::string safetensors(std::size_t floats, std::size_t header = 0) {
  std::string json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(floats) +
                     "],\"data_offsets\":[0," + std::to_string(4 * floats) + "]}}";
  if (json.size() < header) json.append(header - json.size(), ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + std::string(4 * floats, '\x7f');
}

struct fixture {
  std::shared_ptr<test::fake_store> store = std::make_shared<test::fake_store>();
  sources::remote_repository repository = [this] {
    sources::remote_stores st;
    st.s3 = store;
    return std::move(*sources::remote_repository::create({}, st));
  }();

  sources::remote_model model(const std::string& url) {
    auto m = repository.resolve(url);
    REQUIRE(m);
    return *m;
  }
};

}  // namespace

TEST_CASE("remote header: a small header is had with one GET, and only it can be read") {
  fixture f;
  const std::string url = "s3://models/big/1/model.safetensors";
  const auto bytes = safetensors(1 << 20);  // 4 MiB of weights
  f.store->put(url, bytes);
  auto m = f.model(url);
  auto arrival = sources::fetch_header(f.repository, m);
  REQUIRE(arrival);
  CHECK(f.store->fetches() == 1);
  CHECK((*arrival)->size() == bytes.size());
  auto file = read_file::arriving(*arrival);
  REQUIRE(file);
  auto header = read_safetensors_header(*file);
  REQUIRE(header);
  CHECK(header->data_bytes == 4u << 20);
  CHECK((*arrival)->contiguous() == sources::header_first_look);
  char weight[4];
  REQUIRE(file->read_exactly(weight, 4, header->data_offset));  // within the first look
  auto past = file->read_exactly(weight, 4, sources::header_first_look);
  REQUIRE_FALSE(past);
  CHECK_THAT(past.error().message, Catch::Contains("only its header was fetched"));
  CHECK_FALSE((*arrival)->settled(0));  // never taken for the whole file
}

TEST_CASE("remote header: a header past the first look is fetched whole with a second GET") {
  fixture f;
  const std::string url = "s3://models/wide/1/model.safetensors";
  f.store->put(url, safetensors(16, 200'000));
  auto m = f.model(url);
  auto arrival = sources::fetch_header(f.repository, m);
  REQUIRE(arrival);
  CHECK(f.store->fetches() == 2);
  CHECK((*arrival)->contiguous() == 8u + 200'000u);
  auto file = read_file::arriving(*arrival);
  REQUIRE(file);
  auto header = read_safetensors_header(*file);
  REQUIRE(header);
  CHECK(header->data_bytes == 64u);
}

TEST_CASE("remote header: a length prefix that lies is refused before anything more is fetched") {
  fixture f;
  const std::string url = "s3://models/liar/1/model.safetensors";
  auto bytes = safetensors(4);
  bytes[5] = '\x01';  // a header of about 2^40 bytes
  f.store->put(url, bytes);
  auto m = f.model(url);
  auto arrival = sources::fetch_header(f.repository, m);
  REQUIRE_FALSE(arrival);
  CHECK(arrival.error().code == errc::invalid_argument);
  CHECK_THAT(arrival.error().message, Catch::Contains("header length"));
  CHECK(f.store->fetches() == 1);

  f.store->put(url, "short");
  auto short_model = f.model(url);
  auto tiny = sources::fetch_header(f.repository, short_model);
  REQUIRE_FALSE(tiny);
  CHECK_THAT(tiny.error().message, Catch::Contains("too short"));
}

TEST_CASE("remote header: an object replaced since its look is looked at again and read") {
  fixture f;
  const std::string url = "s3://models/m/1/model.safetensors";
  f.store->put(url, safetensors(4));
  auto m = f.model(url);
  const auto replacement = safetensors(8);
  f.store->put(url, replacement);  // a new entity tag and size
  auto arrival = sources::fetch_header(f.repository, m);
  REQUIRE(arrival);
  CHECK(m.object.size == replacement.size());  // the model now describes the new object
  CHECK(m.object.etag == "etag-2");
  CHECK((*arrival)->size() == replacement.size());
  auto file = read_file::arriving(*arrival);
  REQUIRE(file);
  auto header = read_safetensors_header(*file);
  REQUIRE(header);
  CHECK(header->data_bytes == 32u);
}
