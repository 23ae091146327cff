// The host device's memory pool (src/gpu/host_pool.hpp): best fit, merging, fragmentation, and
// the host device reusing a freed model's memory for the next load.
#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "gpu/host_pool.hpp"
#include "warm/device.hpp"

using warm::host_pool;

namespace {

const std::uint64_t page = host_pool::page_bytes();

std::unique_ptr<host_pool> pool_of(std::uint64_t pages) {
  auto p = host_pool::reserve(pages * page);
  REQUIRE(p);
  return std::move(*p);
}

char* at(host_pool& p, std::uint64_t pages) {
  auto* block = static_cast<char*>(p.take(pages * page));
  REQUIRE(block != nullptr);
  return block;
}

}  // namespace

TEST_CASE("blocks are whole pages, and the pool's bytes are exactly what is handed out") {
  auto p = pool_of(8);
  auto* a = static_cast<char*>(p->take(1));  // one byte takes a page
  REQUIRE(a != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(a) % page == 0);
  auto* b = static_cast<char*>(p->take(page + 1));  // two pages
  REQUIRE(b != nullptr);
  CHECK(b == a + page);
  auto u = p->now();
  CHECK(u.reserved == 8 * page);
  CHECK(u.taken == 3 * page);
  CHECK(u.blocks == 2);
  CHECK(u.largest_free == 5 * page);
  CHECK(u.touched == 3 * page);
  std::memset(b, 0x5a, 2 * page);  // usable memory, all of it
  p->give_back(a);
  p->give_back(b);
  u = p->now();
  CHECK(u.taken == 0);
  CHECK(u.blocks == 0);
  CHECK(u.largest_free == 8 * page);  // merged back into one run
  CHECK(p->take(8 * page) != nullptr);
}

TEST_CASE("the shortest free run that holds a block is used, the lowest address among equals") {
  auto p = pool_of(16);
  auto* a = at(*p, 3);
  auto* b = at(*p, 1);
  auto* c = at(*p, 2);
  auto* d = at(*p, 1);
  auto* e = at(*p, 2);
  at(*p, 7);                      // the rest: no free run left at the end
  p->give_back(a);                // a free run of 3 pages
  p->give_back(c);                // one of 2
  p->give_back(e);                // another of 2, higher up
  CHECK(p->take(2 * page) == c);  // 2 fits both 2-page runs: the lower one
  CHECK(p->take(2 * page) == e);
  CHECK(p->take(2 * page) == a);  // only the 3-page run is left; its last page stays free
  CHECK(p->now().largest_free == page);
  (void)b;
  (void)d;
}

TEST_CASE("a fragmented pool refuses a block no single run holds, though enough pages are free") {
  auto p = pool_of(6);
  std::vector<char*> blocks;
  for (int i = 0; i < 6; ++i)
    blocks.push_back(at(*p, 1));
  p->give_back(blocks[0]);
  p->give_back(blocks[2]);
  p->give_back(blocks[4]);
  CHECK(p->now().largest_free == page);
  CHECK(p->take(2 * page) == nullptr);  // three pages free, none adjacent
  p->give_back(blocks[1]);              // 0, 1 and 2 merge
  CHECK(p->take(3 * page) == blocks[0]);
}

TEST_CASE("merging takes the free runs on both sides of a block given back") {
  auto p = pool_of(3);
  auto* a = at(*p, 1);
  auto* b = at(*p, 1);
  auto* c = at(*p, 1);
  p->give_back(a);
  p->give_back(c);
  p->give_back(b);  // joins a's run and c's
  CHECK(p->now().largest_free == 3 * page);
  CHECK(p->take(3 * page) == a);
}

TEST_CASE("what is not a block of the pool is refused, and nothing larger than it is handed out") {
  auto p = pool_of(4);
  auto* a = at(*p, 2);
  int elsewhere = 0;
  CHECK_THROWS_AS(p->give_back(&elsewhere), std::invalid_argument);
  CHECK_THROWS_AS(p->give_back(a + page), std::invalid_argument);  // inside a block, not its start
  CHECK(p->take(5 * page) == nullptr);
  CHECK(p->take(0) == nullptr);
  p->give_back(a);
  CHECK_THROWS_AS(p->give_back(a), std::invalid_argument);  // twice
}

TEST_CASE("the host device loads a large model into the memory its last one freed") {
  const std::uint64_t bytes = std::uint64_t{8} << 20;
  auto dev = warm::make_device(warm::device_spec{warm::device_spec::kind::host, 0, 3 * bytes});
  REQUIRE(dev);
  auto first = (*dev)->allocate(bytes);
  REQUIRE(first);
  void* where = (*first)->address();
  std::memset(where, 1, bytes);
  first->reset();
  CHECK((*dev)->used() == 0);
  auto second = (*dev)->allocate(bytes);
  REQUIRE(second);
  CHECK((*second)->address() == where);  // reused, not a fresh mapping
  CHECK((*dev)->state() ==
        "pool 8.00 MiB faulted in at most, 8.00 MiB in 1 block, longest free run 16.0 MiB");
  // Two more: the second fills the budget in the pool; the accounting is the device's either way.
  auto third = (*dev)->allocate(bytes);
  auto fourth = (*dev)->allocate(bytes);
  REQUIRE(third);
  REQUIRE(fourth);
  CHECK((*dev)->used() == 3 * bytes);
  std::memset((*fourth)->address(), 2, bytes);
  second->reset();
  third->reset();
  fourth->reset();
  CHECK((*dev)->used() == 0);
}
