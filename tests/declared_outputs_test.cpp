// Every answer warm::runtime gives is what the model declares (checked_outputs): a model whose
// outputs disagree with its declaration is an internal error naming the model, the output and
// both shapes, on every path an inference takes — after a miss, inline on a hit, and batched.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <mutex>

#include "support/runtime_fixture.hpp"
#include "warm/model_loader.hpp"

using namespace warm;

namespace {

// A model that runs another (the dense model the repository holds) but declares `io` of its own:
// what a model file declaring outputs its model does not give looks like to the runtime.
class redeclared final : public resident_model {
 public:
  redeclared(std::unique_ptr<resident_model> inner, model_io io)
      : resident_model(inner->owner(), std::move(io)), inner_(std::move(inner)) {}
  std::uint64_t bytes() const override { return inner_->bytes(); }
  std::uint64_t max_batch() const override { return inner_->max_batch(); }
  std::uint64_t cost(std::uint64_t batch) const override { return inner_->cost(batch); }
  expected<std::vector<tensor>> run(const std::vector<tensor>& inputs,
                                    std::uint64_t batch) const override {
    return inner_->run(inputs, batch);
  }

 private:
  std::unique_ptr<resident_model> inner_;
};

// Loads the files as warm does, then gives a model named in `declared` (its directory's name) that
// declaration instead of its own. Thread-safe.
class redeclaring_loader final : public model_loader {
 public:
  void declare(const std::string& model, model_io io) {
    std::lock_guard<std::mutex> lock(mutex_);
    declared_[model] = std::move(io);
  }
  expected<std::unique_ptr<resident_model>> load(device& dev, const model_location& where,
                                                 memory_reservation reservation,
                                                 load_stats* stats) override {
    auto loaded = files_.load(dev, where, std::move(reservation), stats);
    if (!loaded) return loaded;
    // <root>/<model>/<version>/model.safetensors
    auto model = std::filesystem::path(where.path).parent_path().parent_path().filename().string();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = declared_.find(model);
    if (it == declared_.end()) return loaded;
    return std::unique_ptr<resident_model>(
        std::make_unique<redeclared>(std::move(*loaded), it->second));
  }

 private:
  std::mutex mutex_;
  std::map<std::string, model_io> declared_;
  file_loader files_;
};

// The fixture's dense [16 → 8] model's io with its output declared as `output`.
model_io dense_declaring(tensor_spec output) {
  model_io io;
  io.batched = true;
  io.inputs = {{"input", dtype::f32, {-1, 16}}};
  io.outputs = {std::move(output)};
  return io;
}

std::string refusal(expected<infer_result> r) {
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::internal);
  return r.error().message;
}

}  // namespace

TEST_CASE("a model answering other than it declares is internal, after a miss and on a hit") {
  auto loader = std::make_shared<redeclaring_loader>();
  loader->declare("wrong", dense_declaring({"output", dtype::f32, {-1, 5}}));
  test::runtime_fixture f({"wrong", "right"}, {"host:64KiB"}, 2,
                          [&](runtime_options& o) { o.loader = loader; });
  f.register_all();
  const std::string expected =
      "model 'wrong' answered with output 'output' of shape [1, 8]; the model declares output F32 "
      "[-1, 5]";
  CHECK(refusal(f.rt->infer({"wrong", {test::input(1)}}).get()) ==
        expected);  // a miss: after the load
  REQUIRE(test::state_of(*f.rt, "wrong") == model_state::loaded);
  CHECK(refusal(f.rt->infer({"wrong", {test::input(1)}}).get()) ==
        expected);  // a hit: on this thread
  // A model that gives what it declares is served as ever.
  auto right = f.rt->infer({"right", {test::input(2)}}).get();
  REQUIRE(right);
  CHECK(right->outputs.at(0).shape == std::vector<std::uint64_t>{2, 8});
}

TEST_CASE("a heavy hit on the inference threads is checked too") {
  auto loader = std::make_shared<redeclaring_loader>();
  loader->declare("wrong", dense_declaring({"output", dtype::f16, {-1, 8}}));
  test::runtime_fixture f({"wrong"}, {"host:64KiB"}, 2, [&](runtime_options& o) {
    o.loader = loader;
    o.inline_inference_limit = 0;  // every hit leaves the caller's thread
  });
  f.register_all(true);
  REQUIRE(test::eventually([&] { return test::state_of(*f.rt, "wrong") == model_state::loaded; }));
  CHECK(
      refusal(f.rt->infer({"wrong", {test::input(3)}}).get()) ==
      "model 'wrong' answered with output 'output' of F32; the model declares output F16 [-1, 8]");
}

TEST_CASE("a batched pass is checked before its rows are split among the requests") {
  auto loader = std::make_shared<redeclaring_loader>();
  loader->declare("wrong", dense_declaring({"output", dtype::f32, {-1, 5}}));
  test::runtime_fixture f({"wrong"}, {"host:64KiB"}, 2, [&](runtime_options& o) {
    o.loader = loader;
    o.batching.max_batch = 3;  // the two requests' 3 rows fill a pass, which runs at once
    o.batching.max_queue_delay = std::chrono::seconds(10);
  });
  f.register_all(true);
  REQUIRE(test::eventually([&] { return test::state_of(*f.rt, "wrong") == model_state::loaded; }));
  auto first = f.rt->infer({"wrong", {test::input(2)}});
  auto second = f.rt->infer({"wrong", {test::input(1)}});
  for (auto* pending : {&first, &second})
    CHECK(refusal(pending->get()) ==
          "model 'wrong' answered with output 'output' of shape [3, 8]; the model declares output "
          "F32 [-1, 5]");
  CHECK(f.rt->metrics().batch_rows.read().count == 1);  // one pass for both
}

TEST_CASE("outputs a model does not declare (known == false) pass whatever their shape") {
  auto loader = std::make_shared<redeclaring_loader>();
  loader->declare("free", dense_declaring({"output", dtype::f32, {}, false}));
  test::runtime_fixture f({"free"}, {"host:64KiB"}, 2,
                          [&](runtime_options& o) { o.loader = loader; });
  f.register_all();
  for (int i = 0; i < 2; ++i) {  // a miss, then a hit
    auto r = f.rt->infer({"free", {test::input(2)}}).get();
    REQUIRE(r);
    CHECK(r->outputs.at(0).shape == std::vector<std::uint64_t>{2, 8});
  }
}
