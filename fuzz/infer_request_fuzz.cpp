// Fuzz target: inference inputs as the RPC server receives them. The input is a Cap'n Proto
// message (segment table + segments, as on the wire) read as a warm::rpc::InferRequest, converted
// with src/rpc/convert (from_capnp) and validated with warm::check_inputs against a fixed dense
// model (16 -> 8). Malformed messages throw kj::Exception, which the RPC layer turns into an error
// reply: caught here. What converts must survive to_capnp/from_capnp unchanged, and an error must
// fit a Status the way the server sends it.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "fuzz_check.hpp"
#include "rpc/convert.hpp"
#include "warm/runtime.hpp"

namespace {

const warm::dense_spec& model() {
  static const warm::dense_spec spec = [] {
    warm::dense_spec s;
    s.activation = warm::activation::relu;
    s.layers.push_back({16, 8, 0, 16 * 8 * 4});
    s.data_bytes = (16 * 8 + 8) * 4;
    return s;
  }();
  return spec;
}

bool same(const warm::tensor& a, const warm::tensor& b) {
  return a.name == b.name && a.type == b.type && a.shape == b.shape && a.data == b.data;
}

void check_request(const warm::infer_request& request) {
  for (const auto& t : request.inputs) {
    std::uint64_t bytes = warm::dtype_size(t.type);
    bool overflow = false;
    for (auto d : t.shape)
      overflow |= __builtin_mul_overflow(bytes, d, &bytes);
    // from_capnp promises data of exactly product(shape) x dtype size bytes (0 when a dimension
    // is 0, however large the others).
    FUZZ_CHECK(overflow ? t.data.empty() : bytes == t.data.size());
  }
  auto inputs = request.inputs;
  auto batch = warm::check_inputs(inputs, warm::dense_io(model()),
                                  warm::max_activation_elements / model().widest());
  if (batch) {
    const auto& t = inputs.front();
    FUZZ_CHECK(*batch >= 1);
    FUZZ_CHECK(t.type == warm::dtype::f32);
    FUZZ_CHECK(t.shape.back() == model().input_width());
    FUZZ_CHECK(t.data.size() == *batch * model().input_width() * sizeof(float));
  } else {
    FUZZ_CHECK(batch.error().code == warm::errc::invalid_argument);
  }
  // Two typed inputs (INT64 ids and an FP32 mask, [batch, 6] each): accepted inputs are in the
  // model's order, with its dtypes, one batch and exactly their bytes.
  static const warm::model_io two{
      {{"ids", warm::dtype::i64, {-1, 6}}, {"mask", warm::dtype::f32, {-1, 6}}}, {}, true};
  auto pair = request.inputs;
  auto rows = warm::check_inputs(pair, two, 1 << 20);
  if (rows) {
    FUZZ_CHECK(pair.size() == 2 && pair[0].name == "ids" && pair[1].name == "mask");
    for (std::size_t i = 0; i < 2; ++i) {
      FUZZ_CHECK(pair[i].type == two.inputs[i].type);
      FUZZ_CHECK((pair[i].shape == std::vector<std::uint64_t>{*rows, 6}));
      FUZZ_CHECK(pair[i].data.size() == *rows * 6 * warm::dtype_size(pair[i].type));
    }
  } else {
    FUZZ_CHECK(rows.error().code == warm::errc::invalid_argument);
  }

  // Back to the wire and again: nothing may change.
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<warm::rpc::InferRequest>();
  warm::rpc::to_capnp(request, root);
  auto again = warm::rpc::from_capnp(root.asReader());
  FUZZ_CHECK(again);
  FUZZ_CHECK(again->target == request.target);
  FUZZ_CHECK(again->inputs.size() == request.inputs.size());
  for (std::size_t i = 0; i < request.inputs.size(); ++i)
    FUZZ_CHECK(same(again->inputs[i], request.inputs[i]));
}

void check_error(const warm::error& e) {
  FUZZ_CHECK(e.code == warm::errc::invalid_argument);
  capnp::MallocMessageBuilder builder;
  auto status = builder.initRoot<warm::rpc::Status>();
  warm::rpc::to_capnp(e, status);
  auto back = warm::rpc::from_capnp(status.asReader());
  FUZZ_CHECK(!back && back.error().code == e.code && back.error().message == e.message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Copy into aligned words (a trailing partial word is dropped, as a stream reader would).
  auto words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  if (words.size() != 0) std::memcpy(words.begin(), data, words.size() * sizeof(capnp::word));
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 1 << 17;  // 1 MiB
  options.nestingLimit = 16;
  try {
    capnp::FlatArrayMessageReader reader(words, options);
    auto request = warm::rpc::from_capnp(reader.getRoot<warm::rpc::InferRequest>());
    if (request)
      check_request(*request);
    else
      check_error(request.error());
  } catch (const kj::Exception&) {
    // A malformed message: the RPC layer answers it with an exception of its own.
  }
  return 0;
}
