// core/weights.hpp: a loaded model's weights are freed only through the reclaimer they were made
// with, however the handle goes (dropped, assigned over, reclaimed on purpose, or held by a slot
// whose last lease ends).
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/serving_slot.hpp"
#include "core/weights.hpp"
#include "support/test_files.hpp"
#include "warm/model_writer.hpp"

using namespace warm;

namespace {

// A host device with one small model file, and a reclaimer that keeps the tasks it is given
// until run() (so a test sees what was handed over and when it is freed).
struct bench {
  test::temp_dir dir;
  std::unique_ptr<device> dev = make_device(*parse_device_spec("host:1MiB")).value();
  model_file file;
  std::vector<std::function<void()>> tasks;
  bench() {
    auto path = dir / "m.safetensors";
    REQUIRE(write_dense_model(path, {{16, 8}, activation::relu, 1}));
    file = *open_model_file(path);
  }
  reclaim_fn reclaimer() {
    return [this](std::function<void()> task) { tasks.push_back(std::move(task)); };
  }
  weights load() { return {dev->load(file).value(), reclaimer()}; }
  void run() {
    auto now = std::move(tasks);
    tasks.clear();
    for (auto& t : now)
      t();
  }
};

}  // namespace

TEST_CASE("dropped weights go to their reclaimer, which alone frees them") {
  bench b;
  {
    auto w = b.load();
    REQUIRE(w);
    CHECK(b.dev->used() == w->bytes());
  }
  REQUIRE(b.tasks.size() == 1);
  CHECK(b.dev->used() > 0);  // handed over, not freed where the handle went
  b.run();
  CHECK(b.dev->used() == 0);
}

TEST_CASE("weights assigned over, or moved from, free what they held once, through the reclaimer") {
  bench b;
  auto first = b.load();
  auto bytes = first->bytes();
  first = b.load();  // the first model is handed over; the second is held
  REQUIRE(b.tasks.size() == 1);
  CHECK(b.dev->used() == 2 * bytes);
  b.run();
  CHECK(b.dev->used() == bytes);
  weights moved = std::move(first);
  CHECK_FALSE(first);  // NOLINT(bugprone-use-after-move): a moved-from handle is empty
  { weights empty; }   // nothing to reclaim
  CHECK(b.tasks.empty());
  moved = weights{};
  REQUIRE(b.tasks.size() == 1);
  b.run();
  CHECK(b.dev->used() == 0);
}

TEST_CASE("reclaim(then) calls then after the bytes are back, on the reclaimer") {
  bench b;
  auto w = b.load();
  std::uint64_t used_when_told = 1;
  std::move(w).reclaim([&] { used_when_told = b.dev->used(); });
  CHECK_FALSE(w);              // NOLINT(bugprone-use-after-move)
  CHECK(used_when_told == 1);  // not yet: the reclaimer has not run
  b.run();
  CHECK(used_when_told == 0);
  bool told = false;
  weights{}.reclaim([&] { told = true; });  // nothing held: told at once
  CHECK(told);
}

TEST_CASE("weights need a reclaimer") {
  bench b;
  CHECK_THROWS_AS(weights(b.dev->load(b.file).value(), nullptr), std::invalid_argument);
  CHECK(b.dev->used() == 0);  // the refused model was freed on the way out
  CHECK_NOTHROW(weights(nullptr, nullptr));
}

TEST_CASE("a slot's weights are freed through their reclaimer when its last lease ends") {
  bench b;
  std::vector<serving_slot::event> events;
  auto slot = std::make_shared<serving_slot>("m", *b.dev, b.load(),
                                             [&](serving_slot::event e) { events.push_back(e); });
  auto lease = slot->try_acquire(timestamp{});
  REQUIRE(lease);
  CHECK_FALSE(slot->withdraw());  // a lease is held: nothing freed yet
  CHECK(b.tasks.empty());
  lease.reset();  // the last lease quiesces the slot: the freeing goes to the reclaimer
  REQUIRE(b.tasks.size() == 1);
  CHECK(b.dev->used() > 0);
  CHECK(events.empty());  // quiesced is told after the bytes are back
  b.run();
  CHECK(b.dev->used() == 0);
  CHECK(events == std::vector<serving_slot::event>{serving_slot::event::quiesced});
  CHECK(slot->withdraw());  // freed by now
}
