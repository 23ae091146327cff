// The chunked, double-buffered upload pipeline shared by the host and CUDA devices, driven with a
// fake asynchronous target that checks no staging slot is overwritten while its copy is in flight.
#include <catch2/catch.hpp>

#include <atomic>

#include <cstring>
#include <optional>

#include "gpu/upload_pipeline.hpp"
#include "support/test_files.hpp"

namespace {

// Two staging slots; a submitted copy "lands" only when wait() is called for its slot.
class fake_async_target final : public warm::upload_target {
 public:
  fake_async_target(std::size_t size, std::size_t chunk, std::size_t slots)
      : destination(size, '\0'),
        chunk_(chunk),
        staging_(slots, std::string(chunk, '\0')),
        pending_(slots) {}

  std::size_t slots() const override { return staging_.size(); }
  std::size_t chunk_bytes() const override { return chunk_; }
  void* stage(std::size_t slot, std::uint64_t, std::size_t bytes) override {
    REQUIRE(bytes <= chunk_);
    REQUIRE_FALSE(pending_[slot].in_flight);  // the pipeline must wait before reusing a slot
    return staging_[slot].data();
  }
  warm::expected<void> submit(std::size_t slot, std::uint64_t offset, std::size_t bytes) override {
    if (fail_submit_at && submits == *fail_submit_at)
      return warm::make_error(warm::errc::load_failed, "injected");
    ++submits;
    pending_[slot] = {true, offset, bytes};
    max_in_flight = std::max(max_in_flight, in_flight());
    return {};
  }
  warm::expected<void> wait(std::size_t slot) override {
    auto& p = pending_[slot];
    if (p.in_flight) std::memcpy(destination.data() + p.offset, staging_[slot].data(), p.bytes);
    p.in_flight = false;
    return {};
  }
  std::size_t in_flight() const {
    std::size_t n = 0;
    for (const auto& p : pending_)
      n += p.in_flight;
    return n;
  }

  std::string destination;
  std::size_t submits = 0, max_in_flight = 0;
  std::optional<std::size_t> fail_submit_at;

 private:
  struct copy {
    bool in_flight = false;
    std::uint64_t offset = 0;
    std::size_t bytes = 0;
  };
  std::size_t chunk_;
  std::vector<std::string> staging_;
  std::vector<copy> pending_;
};

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
  return s;
}

}  // namespace

TEST_CASE("double buffering copies every byte exactly once, overlapping two chunks") {
  warm::test::temp_dir dir;
  auto path = dir / "data.bin";
  const std::string prefix = "HEADER--";
  auto body = pattern(10'000);
  warm::test::write_file(path, prefix + body);
  auto file = warm::read_file::open(path);
  REQUIRE(file);

  for (std::size_t chunk : {1, 7, 1000, 4096, 10'000, 20'000}) {
    for (std::size_t slots : {1, 2, 3}) {
      INFO("chunk " << chunk << " slots " << slots);
      fake_async_target target(body.size(), chunk, slots);
      std::atomic<std::uint64_t> progress{0};
      REQUIRE(warm::upload(*file, prefix.size(), body.size(), target, &progress));
      CHECK(progress == body.size());  // the live count reaches every byte
      CHECK(target.destination == body);
      CHECK(target.in_flight() == 0);  // drained on return
      CHECK(target.submits == (body.size() + chunk - 1) / chunk);
      if (slots > 1 && chunk < body.size())
        CHECK(target.max_in_flight == std::min<std::size_t>(slots, target.submits));
    }
  }
}

TEST_CASE("a failing submit or read stops the upload with nothing left in flight") {
  warm::test::temp_dir dir;
  auto path = dir / "data.bin";
  warm::test::write_file(path, pattern(1000));
  auto file = warm::read_file::open(path);
  REQUIRE(file);

  fake_async_target target(1000, 100, 2);
  target.fail_submit_at = 3;
  auto r = warm::upload(*file, 0, 1000, target);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "injected");
  CHECK(target.in_flight() == 0);

  fake_async_target past_end(2000, 100, 2);
  auto short_read = warm::upload(*file, 0, 2000, past_end);  // the file is shorter than asked
  REQUIRE_FALSE(short_read);
  CHECK(short_read.error().code == warm::errc::load_failed);
  CHECK_THAT(short_read.error().message, Catch::Contains("unexpected end of file"));
  CHECK(past_end.in_flight() == 0);
}
