#include "remote/tensors.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace warm {
namespace {

// The bytes of `shape` of `type` when its extent (every 0 dimension taken as 1) stays within
// max_wire_tensor_bytes; nullopt otherwise. Overflow-proof: no product is formed past the limit.
std::optional<std::uint64_t> wire_bytes(const capnp::List<std::uint64_t>::Reader& shape,
                                        dtype type) {
  std::uint64_t extent = dtype_size(type), bytes = extent;
  for (auto d : shape) {
    auto factor = std::max<std::uint64_t>(d, 1);
    if (extent > max_wire_tensor_bytes / factor) return std::nullopt;
    extent *= factor;
    bytes *= d;  // <= extent: cannot overflow
  }
  return bytes;
}

std::string shape_text(const capnp::List<std::uint64_t>::Reader& shape) {
  std::string s = "[";
  for (unsigned i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Text from the other side for a message, cut short.
std::string cut(std::string_view text) {
  return text.size() <= 64 ? std::string(text) : std::string(text.substr(0, 64)) + "...";
}

// "tensor 'NAME'" for messages.
std::string label(const std::string& name) {
  return "tensor '" + cut(name) + "'";
}

}  // namespace

void write_tensor(const tensor& t, remote::Tensor::Builder out) {
  out.setName(t.name);
  out.setDtype(std::string(to_string(t.type)));
  auto shape = out.initShape(static_cast<unsigned>(t.shape.size()));
  for (unsigned i = 0; i < t.shape.size(); ++i)
    shape.set(i, t.shape[i]);
  out.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(t.data.data()), t.data.size()));
}

expected<tensor> read_tensor(remote::Tensor::Reader in) {
  tensor t;
  t.name = in.getName();
  auto type = parse_dtype(in.getDtype().cStr());
  auto dtype_name = in.getDtype();
  if (!type)
    return make_error(
        errc::invalid_argument,
        label(t.name) + ": unknown dtype '" + cut({dtype_name.begin(), dtype_name.size()}) + "'");
  t.type = *type;
  auto shape = in.getShape();
  if (shape.size() > max_wire_rank)
    return make_error(errc::invalid_argument, label(t.name) + ": rank " +
                                                  std::to_string(shape.size()) + ", more than " +
                                                  std::to_string(max_wire_rank));
  auto bytes = wire_bytes(shape, t.type);
  if (!bytes)
    return make_error(errc::invalid_argument, label(t.name) + ": shape " + shape_text(shape) +
                                                  " of " + std::string(to_string(t.type)) +
                                                  " is too large");
  auto data = in.getData();
  if (*bytes != data.size())
    return make_error(errc::invalid_argument, label(t.name) + ": " + std::to_string(data.size()) +
                                                  " bytes do not match its shape " +
                                                  shape_text(shape) + " of " +
                                                  std::string(to_string(t.type)));
  t.shape.reserve(shape.size());
  for (auto d : shape)
    t.shape.push_back(d);
  t.data.resize(data.size());
  if (data.size()) std::memcpy(t.data.data(), data.begin(), data.size());
  return t;
}

expected<std::vector<tensor>> read_tensors(capnp::List<remote::Tensor>::Reader in) {
  std::vector<tensor> out;
  out.reserve(in.size());
  for (auto t : in) {
    auto read = read_tensor(t);
    if (!read) return std::move(read).error();
    out.push_back(std::move(*read));
  }
  return out;
}

void write_infer_answer(const expected<std::vector<tensor>>& outputs,
                        remote::ModelRuntime::InferResults::Builder out) {
  if (!outputs) return write_error(outputs.error(), out.initError());
  write_ok(out.initError());
  auto list = out.initOutputs(static_cast<unsigned>(outputs->size()));
  for (unsigned i = 0; i < outputs->size(); ++i)
    write_tensor((*outputs)[i], list[i]);
}

void write_spec(const tensor_spec& spec, remote::TensorSpec::Builder out) {
  out.setName(spec.name);
  if (!spec.known) return;
  out.setDtype(std::string(to_string(spec.type)));
  auto shape = out.initShape(static_cast<unsigned>(spec.shape.size()));
  for (unsigned i = 0; i < spec.shape.size(); ++i)
    shape.set(i, spec.shape[i]);
}

expected<tensor_spec> read_spec(remote::TensorSpec::Reader in) {
  tensor_spec spec;
  spec.name = in.getName();
  if (in.getDtype().size() == 0) {
    spec.known = false;
    return spec;
  }
  auto type = parse_dtype(in.getDtype().cStr());
  auto dtype_name = in.getDtype();
  if (!type)
    return make_error(errc::invalid_argument, label(spec.name) + ": unknown dtype '" +
                                                  cut({dtype_name.begin(), dtype_name.size()}) +
                                                  "'");
  spec.type = *type;
  auto shape = in.getShape();
  if (shape.size() > max_wire_rank)
    return make_error(errc::invalid_argument, label(spec.name) + ": rank " +
                                                  std::to_string(shape.size()) + ", more than " +
                                                  std::to_string(max_wire_rank));
  spec.shape.reserve(shape.size());
  for (auto d : shape)
    spec.shape.push_back(d);
  return spec;
}

namespace {

remote::Error::Code code_of(errc code) {
  switch (code) {
    case errc::not_found:
      return remote::Error::Code::NOT_FOUND;
    case errc::invalid_argument:
      return remote::Error::Code::INVALID_ARGUMENT;
    case errc::model_too_large:
      return remote::Error::Code::MODEL_TOO_LARGE;
    case errc::capacity_exhausted:
      return remote::Error::Code::CAPACITY_EXHAUSTED;
    case errc::load_failed:
      return remote::Error::Code::LOAD_FAILED;
    case errc::unavailable:
      return remote::Error::Code::UNAVAILABLE;
    case errc::timeout:
      return remote::Error::Code::TIMEOUT;
    case errc::internal:
      return remote::Error::Code::INTERNAL;
  }
  return remote::Error::Code::INTERNAL;
}

}  // namespace

void write_ok(remote::Error::Builder out) {
  out.setCode(remote::Error::Code::OK);
}

void write_error(const warm::error& e, remote::Error::Builder out) {
  out.setCode(code_of(e.code));
  out.setMessage(e.message);
}

std::optional<warm::error> read_error(remote::Error::Reader in) {
  auto message = std::string(in.getMessage().cStr());
  switch (in.getCode()) {
    case remote::Error::Code::OK:
      return std::nullopt;
    case remote::Error::Code::NOT_FOUND:
      return make_error(errc::not_found, message);
    case remote::Error::Code::INVALID_ARGUMENT:
      return make_error(errc::invalid_argument, message);
    case remote::Error::Code::MODEL_TOO_LARGE:
      return make_error(errc::model_too_large, message);
    case remote::Error::Code::CAPACITY_EXHAUSTED:
      return make_error(errc::capacity_exhausted, message);
    case remote::Error::Code::LOAD_FAILED:
      return make_error(errc::load_failed, message);
    case remote::Error::Code::UNAVAILABLE:
      return make_error(errc::unavailable, message);
    case remote::Error::Code::TIMEOUT:
      return make_error(errc::timeout, message);
    case remote::Error::Code::INTERNAL:
      return make_error(errc::internal, message);
  }
  return make_error(errc::internal, "unknown error code " +
                                        std::to_string(static_cast<int>(in.getCode())) +
                                        (message.empty() ? "" : ": " + message));
}

void write_model_file(const model_location& where, remote::ModelFile::Builder out) {
  out.setPath(where.path);
  out.setRepository(where.root);
  out.setKind(where.kind);
}

model_location read_model_file(remote::ModelFile::Reader in) {
  model_location where;
  where.path = in.getPath();
  where.root = in.getRepository();
  where.kind = in.getKind();
  return where;
}

}  // namespace warm
