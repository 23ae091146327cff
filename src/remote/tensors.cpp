#include "remote/tensors.hpp"

#include <cstring>

namespace warm {
namespace {

std::uint64_t elements(const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) {
    if (d != 0 && n > UINT64_MAX / d) return UINT64_MAX;
    n *= d;
  }
  return n;
}

}  // namespace

void write_tensor(const tensor& t, remote::Tensor::Builder out) {
  out.setName(t.name);
  out.setDtype(std::string(to_string(t.type)));
  auto shape = out.initShape(static_cast<unsigned>(t.shape.size()));
  for (unsigned i = 0; i < t.shape.size(); ++i) shape.set(i, t.shape[i]);
  out.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(t.data.data()), t.data.size()));
}

expected<tensor> read_tensor(remote::Tensor::Reader in) {
  tensor t;
  t.name = in.getName();
  auto type = parse_dtype(in.getDtype().cStr());
  if (!type) return make_error(errc::invalid_argument, "tensor '" + t.name + "': unknown dtype '" +
                                                           std::string(in.getDtype().cStr()) + "'");
  t.type = *type;
  for (auto d : in.getShape()) t.shape.push_back(d);
  auto data = in.getData();
  auto count = elements(t.shape);
  if (count == UINT64_MAX || count * dtype_size(t.type) != data.size())
    return make_error(errc::invalid_argument, "tensor '" + t.name + "': " + std::to_string(data.size()) +
                                                  " bytes do not match its shape and dtype");
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

void write_spec(const tensor_spec& spec, remote::TensorSpec::Builder out) {
  out.setName(spec.name);
  if (!spec.known) return;
  out.setDtype(std::string(to_string(spec.type)));
  auto shape = out.initShape(static_cast<unsigned>(spec.shape.size()));
  for (unsigned i = 0; i < spec.shape.size(); ++i) shape.set(i, spec.shape[i]);
}

expected<tensor_spec> read_spec(remote::TensorSpec::Reader in) {
  tensor_spec spec;
  spec.name = in.getName();
  if (in.getDtype().size() == 0) {
    spec.known = false;
    return spec;
  }
  auto type = parse_dtype(in.getDtype().cStr());
  if (!type) return make_error(errc::invalid_argument, "tensor '" + spec.name + "': unknown dtype '" +
                                                           std::string(in.getDtype().cStr()) + "'");
  spec.type = *type;
  for (auto d : in.getShape()) spec.shape.push_back(d);
  return spec;
}

namespace {

remote::Error::Code code_of(errc code) {
  switch (code) {
    case errc::not_found: return remote::Error::Code::NOT_FOUND;
    case errc::invalid_argument: return remote::Error::Code::INVALID_ARGUMENT;
    case errc::model_too_large: return remote::Error::Code::MODEL_TOO_LARGE;
    case errc::capacity_exhausted: return remote::Error::Code::CAPACITY_EXHAUSTED;
    case errc::load_failed: return remote::Error::Code::LOAD_FAILED;
    case errc::unavailable: return remote::Error::Code::UNAVAILABLE;
    case errc::timeout: return remote::Error::Code::TIMEOUT;
    case errc::internal: return remote::Error::Code::INTERNAL;
  }
  return remote::Error::Code::INTERNAL;
}

}  // namespace

void write_ok(remote::Error::Builder out) { out.setCode(remote::Error::Code::OK); }

void write_error(const warm::error& e, remote::Error::Builder out) {
  out.setCode(code_of(e.code));
  out.setMessage(e.message);
}

std::optional<warm::error> read_error(remote::Error::Reader in) {
  auto message = std::string(in.getMessage().cStr());
  switch (in.getCode()) {
    case remote::Error::Code::OK: return std::nullopt;
    case remote::Error::Code::NOT_FOUND: return make_error(errc::not_found, message);
    case remote::Error::Code::INVALID_ARGUMENT: return make_error(errc::invalid_argument, message);
    case remote::Error::Code::MODEL_TOO_LARGE: return make_error(errc::model_too_large, message);
    case remote::Error::Code::CAPACITY_EXHAUSTED: return make_error(errc::capacity_exhausted, message);
    case remote::Error::Code::LOAD_FAILED: return make_error(errc::load_failed, message);
    case remote::Error::Code::UNAVAILABLE: return make_error(errc::unavailable, message);
    case remote::Error::Code::TIMEOUT: return make_error(errc::timeout, message);
    case remote::Error::Code::INTERNAL: return make_error(errc::internal, message);
  }
  return make_error(errc::internal, "unknown error code " + std::to_string(static_cast<int>(in.getCode())) +
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
