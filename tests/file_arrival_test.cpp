// A file whose bytes are still arriving (storage/file_arrival.hpp) and read_file's reads of one:
// ranges out of order joining the prefix, readers woken as it grows, a restart failing the reads
// of the old epoch, a fetch that fails after some bytes, and a writer that goes away.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "storage/file.hpp"
#include "storage/file_arrival.hpp"

using namespace std::chrono_literals;
using namespace warm;

namespace {

// An arrival of `size` bytes over a memfd; write() puts bytes in it and marks them arrived.
struct arriving_file {
  std::shared_ptr<file_arrival> arrival;
  int fd = -1;

  explicit arriving_file(std::uint64_t size)
      : arrival(std::make_shared<file_arrival>(size, "s3://b/m/1/model.safetensors")) {
    fd = ::memfd_create("arrival-test", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    arrival->give_file(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  }
  ~arriving_file() { ::close(fd); }

  void write(std::uint64_t offset, const std::string& bytes) {
    REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)) ==
            static_cast<ssize_t>(bytes.size()));
    arrival->arrived(offset, bytes.size());
  }
};

}  // namespace

TEST_CASE("file_arrival: ranges out of order join the prefix only when the gap before them fills") {
  file_arrival a(100, "x");
  a.arrived(50, 25);  // an island
  CHECK(a.contiguous() == 0);
  a.arrived(75, 25);  // extends the island
  CHECK(a.contiguous() == 0);
  a.arrived(0, 30);
  CHECK(a.contiguous() == 30);
  a.arrived(30, 19);
  CHECK(a.contiguous() == 49);  // one byte short of the island
  a.arrived(49, 1);
  CHECK(a.contiguous() == 100);
  a.finish({});
  CHECK(a.settled(0));
  file_arrival b(10, "y");
  b.arrived(0, 4);
  b.arrived(5, 5);  // one byte short of the prefix: an island still
  CHECK(b.contiguous() == 4u);
}

TEST_CASE("file_arrival: a fetch that ends ok with bytes missing is not taken as complete") {
  file_arrival a(10, "x");
  a.arrived(0, 9);
  a.finish({});
  auto r = a.settled(0);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::internal);
  CHECK_THAT(r.error().message, Catch::Contains("1 bytes missing"));
}

TEST_CASE("file_arrival: a reader waits for its bytes and reads them as they arrive") {
  arriving_file f(8);
  auto file = read_file::arriving(f.arrival);
  REQUIRE(file);
  CHECK(file->size() == 8u);
  CHECK(*file->current_size() == 8u);  // the object's size, not the file's so far
  auto reader = std::async(std::launch::async, [&] {
    char out[8] = {};
    auto r = file->read_exactly(out, 8, 0);
    return r ? std::string(out, 8) : "error: " + r.error().message;
  });
  f.write(4, "efgh");
  CHECK(reader.wait_for(50ms) == std::future_status::timeout);  // a gap before its bytes
  f.write(0, "abcd");
  REQUIRE(reader.wait_for(5s) == std::future_status::ready);
  CHECK(reader.get() == "abcdefgh");
  char past[1];
  auto r = file->read_exactly(past, 1, 8);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("past the end"));
}

TEST_CASE("file_arrival: a restart fails the reads of the old epoch, waiting ones too") {
  arriving_file f(8);
  auto old_reader = read_file::arriving(f.arrival);
  REQUIRE(old_reader);
  f.write(0, "old!");
  char out[8];
  REQUIRE(old_reader->read_exactly(out, 4, 0));
  auto waiting =
      std::async(std::launch::async, [&] { return old_reader->read_exactly(out, 4, 4); });
  CHECK(waiting.wait_for(50ms) == std::future_status::timeout);
  f.arrival->restart();
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  auto r = waiting.get();
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("replaced while it was being fetched"));
  // Even bytes at offsets the old epoch had: they may be the new object's by now.
  CHECK_FALSE(old_reader->read_exactly(out, 4, 0));

  auto new_reader = read_file::arriving(f.arrival);
  REQUIRE(new_reader);
  CHECK(new_reader->arrival_epoch() == 1u);
  f.write(0, "new!");
  f.write(4, "1234");
  REQUIRE(new_reader->read_exactly(out, 8, 0));
  CHECK(std::string(out, 8) == "new!1234");
  f.arrival->finish({});
  CHECK(f.arrival->settled(1));
  CHECK_FALSE(f.arrival->settled(0));  // a load that began before the restart is not kept
}

TEST_CASE("file_arrival: after a failed fetch the bytes that came stay readable; the rest fail") {
  arriving_file f(8);
  auto file = read_file::arriving(f.arrival);
  REQUIRE(file);
  f.write(0, "abcd");
  auto waiting = std::async(std::launch::async, [&] {
    char out[4];
    return file->read_exactly(out, 4, 4);
  });
  f.arrival->finish(make_error(errc::unavailable, "s3 said 503 SlowDown (3 tries)"));
  auto r = waiting.get();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::unavailable);
  CHECK_THAT(r.error().message, Catch::Contains("503"));
  char out[4];
  REQUIRE(file->read_exactly(out, 4, 0));
  CHECK(std::string(out, 4) == "abcd");
  CHECK_FALSE(f.arrival->settled(0));
}

TEST_CASE("file_arrival: a writer dropped unfinished leaves no reader waiting") {
  auto arrival = std::make_shared<file_arrival>(8, "s3://b/k");
  auto opener = std::async(std::launch::async, [&] { return read_file::arriving(arrival); });
  CHECK(opener.wait_for(50ms) == std::future_status::timeout);  // no file yet
  { arrival_guard writer(arrival); }
  REQUIRE(opener.wait_for(5s) == std::future_status::ready);
  auto r = opener.get();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::unavailable);
  CHECK_THAT(r.error().message, Catch::Contains("abandoned"));
  // A guard whose writer finished first changes nothing.
  auto done = std::make_shared<file_arrival>(0, "empty");
  {
    arrival_guard writer(done);
    done->finish({});
  }
  CHECK(done->settled(0));
}
