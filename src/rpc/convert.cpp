#include "rpc/convert.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

namespace warm::rpc {

using Code = Status::Code;

// ---- status --------------------------------------------------------------------------------

Code to_capnp(errc code) noexcept {
  switch (code) {
    case errc::not_found:
      return Code::NOT_FOUND;
    case errc::invalid_argument:
      return Code::INVALID_ARGUMENT;
    case errc::model_too_large:
      return Code::MODEL_TOO_LARGE;
    case errc::capacity_exhausted:
      return Code::CAPACITY_EXHAUSTED;
    case errc::load_failed:
      return Code::LOAD_FAILED;
    case errc::unavailable:
      return Code::UNAVAILABLE;
    case errc::timeout:
      return Code::TIMEOUT;
    case errc::internal:
      return Code::INTERNAL;
  }
  return Code::INTERNAL;
}

std::optional<errc> to_errc(Code code) noexcept {
  switch (code) {
    case Code::OK:
      return std::nullopt;
    case Code::NOT_FOUND:
      return errc::not_found;
    case Code::INVALID_ARGUMENT:
      return errc::invalid_argument;
    case Code::MODEL_TOO_LARGE:
      return errc::model_too_large;
    case Code::CAPACITY_EXHAUSTED:
      return errc::capacity_exhausted;
    case Code::LOAD_FAILED:
      return errc::load_failed;
    case Code::UNAVAILABLE:
      return errc::unavailable;
    case Code::TIMEOUT:
      return errc::timeout;
    case Code::INTERNAL:
      return errc::internal;
    case Code::UNAUTHENTICATED:
      return errc::invalid_argument;
    case Code::TOO_LARGE:
      return errc::invalid_argument;
  }
  return errc::internal;  // a code from a newer peer
}

std::string_view code_name(Code code) noexcept {
  switch (code) {
    case Code::OK:
      return "ok";
    case Code::UNAUTHENTICATED:
      return "unauthenticated";
    case Code::TOO_LARGE:
      return "too_large";
    default:
      break;
  }
  auto e = to_errc(code);
  return e ? warm::to_string(*e) : std::string_view("unknown");
}

void set_ok(Status::Builder out) {
  out.setCode(Code::OK);
  out.setMessage("");
}

void set_status(Status::Builder out, Code code, std::string_view message) {
  out.setCode(code);
  out.setMessage(capnp::Text::Reader(message.data(), message.size()));
}

void to_capnp(const warm::error& err, Status::Builder out) {
  set_status(out, to_capnp(err.code), err.message);
}

expected<void> from_capnp(Status::Reader status) {
  auto code = to_errc(status.getCode());
  if (!code) return {};
  return make_error(*code, to_std(status.getMessage()));
}

std::optional<warm::error> optional_error(Status::Reader status) {
  auto code = to_errc(status.getCode());
  if (!code) return std::nullopt;
  return make_error(*code, to_std(status.getMessage()));
}

void to_capnp(const std::optional<warm::error>& err, Status::Builder out) {
  if (err)
    to_capnp(*err, out);
  else
    set_ok(out);
}

// ---- enums ---------------------------------------------------------------------------------

ModelState to_capnp(model_state state) noexcept {
  switch (state) {
    case model_state::not_found:
      return ModelState::NOT_FOUND;
    case model_state::not_loaded:
      return ModelState::NOT_LOADED;
    case model_state::queued:
      return ModelState::QUEUED;
    case model_state::loading:
      return ModelState::LOADING;
    case model_state::loaded:
      return ModelState::LOADED;
    case model_state::loading_failed:
      return ModelState::LOADING_FAILED;
  }
  return ModelState::NOT_FOUND;
}

model_state from_capnp(ModelState state) noexcept {
  switch (state) {
    case ModelState::NOT_FOUND:
      return model_state::not_found;
    case ModelState::NOT_LOADED:
      return model_state::not_loaded;
    case ModelState::QUEUED:
      return model_state::queued;
    case ModelState::LOADING:
      return model_state::loading;
    case ModelState::LOADED:
      return model_state::loaded;
    case ModelState::LOADING_FAILED:
      return model_state::loading_failed;
  }
  return model_state::not_found;
}

VModelState to_capnp(vmodel_state state) noexcept {
  switch (state) {
    case vmodel_state::not_found:
      return VModelState::NOT_FOUND;
    case vmodel_state::defined:
      return VModelState::DEFINED;
    case vmodel_state::transitioning:
      return VModelState::TRANSITIONING;
    case vmodel_state::transition_failed:
      return VModelState::TRANSITION_FAILED;
  }
  return VModelState::NOT_FOUND;
}

vmodel_state from_capnp(VModelState state) noexcept {
  switch (state) {
    case VModelState::NOT_FOUND:
      return vmodel_state::not_found;
    case VModelState::DEFINED:
      return vmodel_state::defined;
    case VModelState::TRANSITIONING:
      return vmodel_state::transitioning;
    case VModelState::TRANSITION_FAILED:
      return vmodel_state::transition_failed;
  }
  return vmodel_state::not_found;
}

// ---- registrations and statuses ------------------------------------------------------------

namespace {

void to_capnp(const batching_options& b, Batching::Builder out) {
  out.setMaxBatch(b.max_batch);
  out.setMaxQueueDelayUs(
      static_cast<std::uint64_t>(std::max<std::int64_t>(0, b.max_queue_delay.count())));
  auto preferred = out.initPreferredBatch(static_cast<unsigned>(b.preferred_batch.size()));
  for (unsigned k = 0; k < preferred.size(); ++k)
    preferred.set(k, b.preferred_batch[k]);
  out.setMaxQueue(b.max_queue);
}

batching_options from_capnp(Batching::Reader in) {
  batching_options b;
  b.max_batch = in.getMaxBatch();
  // Saturated: a delay past ~292 000 years is as good as forever.
  b.max_queue_delay = std::chrono::microseconds(static_cast<std::int64_t>(
      std::min<std::uint64_t>(in.getMaxQueueDelayUs(), std::numeric_limits<std::int64_t>::max())));
  for (auto size : in.getPreferredBatch())
    b.preferred_batch.push_back(size);
  if (in.getMaxQueue() != 0) b.max_queue = in.getMaxQueue();
  return b;
}

}  // namespace

void to_capnp(const model_info& info, ModelInfo::Builder out) {
  out.setPath(to_text(info.path));
  out.setVersion(info.version.value_or(0));
  out.setSizeHint(info.size_hint.value_or(0));
  if (info.batching) {
    to_capnp(*info.batching, out.initBatching());
  } else if (out.hasBatching()) {
    out.disownBatching();
  }
}

model_info from_capnp(ModelInfo::Reader info) {
  model_info out(to_std(info.getPath()));
  if (info.getVersion() != 0) out.version = info.getVersion();
  if (info.getSizeHint() != 0) out.size_hint = info.getSizeHint();
  if (info.hasBatching()) out.batching = from_capnp(info.getBatching());
  return out;
}

void to_capnp(const model_status& s, ModelStatus::Builder out) {
  out.setId(to_text(s.id));
  out.setState(to_capnp(s.state));
  out.setDevice(to_text(s.device));
  out.setBytes(s.bytes);
  out.setRequests(s.requests);
  out.setHits(s.hits);
  out.setRequestsPerSecond(s.requests_per_second);
  out.setInFlight(s.in_flight);
  out.setIdleSeconds(s.idle_seconds);
  out.setLoadCount(s.loads.count);
  out.setLoadMeanMs(s.loads.mean_ms);
  out.setLoadStddevMs(s.loads.variance_ms2 > 0 ? std::sqrt(s.loads.variance_ms2) : 0.0);
  to_capnp(s.last_error, out.initLastError());
  out.setRetryInSeconds(s.retry_in_seconds);
  out.setLoadedBytes(s.loaded_bytes);
  out.setInputWidth(s.input_width);
  out.setOutputWidth(s.output_width);
  if (s.batching) to_capnp(*s.batching, out.initBatching());
  out.setKind(to_text(s.kind));
  auto put = [](const std::vector<tensor_spec>& specs, capnp::List<TensorSpec>::Builder list) {
    for (unsigned i = 0; i < specs.size(); ++i) {
      auto t = list[i];
      t.setName(to_text(specs[i].name));
      if (!specs[i].known) continue;
      t.setDtype(to_text(std::string(to_string(specs[i].type))));
      auto shape = t.initShape(static_cast<unsigned>(specs[i].shape.size()));
      for (unsigned d = 0; d < specs[i].shape.size(); ++d)
        shape.set(d, specs[i].shape[d]);
    }
  };
  put(s.io.inputs, out.initInputs(static_cast<unsigned>(s.io.inputs.size())));
  put(s.io.outputs, out.initOutputs(static_cast<unsigned>(s.io.outputs.size())));
  out.setBatched(s.io.batched);
  out.setVersion(s.version.value_or(0));
  out.setSource(to_text(s.source));
  out.setInTier(s.in_tier);
  out.setTierBytes(s.tier_bytes);
}

namespace {

std::vector<tensor_spec> from_capnp(capnp::List<TensorSpec>::Reader list) {
  std::vector<tensor_spec> specs;
  for (auto t : list) {
    tensor_spec spec;
    spec.name = to_std(t.getName());
    auto type = parse_dtype(to_std(t.getDtype()));
    spec.known = type.has_value();
    if (type) spec.type = *type;
    for (auto d : t.getShape())
      spec.shape.push_back(d);
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace

model_status from_capnp(ModelStatus::Reader s) {
  model_status out;
  out.id = to_std(s.getId());
  out.state = from_capnp(s.getState());
  out.device = to_std(s.getDevice());
  out.bytes = s.getBytes();
  out.requests = s.getRequests();
  out.hits = s.getHits();
  out.requests_per_second = s.getRequestsPerSecond();
  out.in_flight = s.getInFlight();
  out.idle_seconds = s.getIdleSeconds();
  out.loads.count = s.getLoadCount();
  out.loads.mean_ms = s.getLoadMeanMs();
  out.loads.variance_ms2 = s.getLoadStddevMs() * s.getLoadStddevMs();
  out.last_error = optional_error(s.getLastError());
  out.retry_in_seconds = s.getRetryInSeconds();
  out.loaded_bytes = s.getLoadedBytes();
  out.input_width = s.getInputWidth();
  out.output_width = s.getOutputWidth();
  if (s.hasBatching()) out.batching = from_capnp(s.getBatching());
  out.kind = to_std(s.getKind());
  out.io.inputs = from_capnp(s.getInputs());
  out.io.outputs = from_capnp(s.getOutputs());
  out.io.batched = s.getBatched();
  if (s.getVersion() != 0) out.version = s.getVersion();
  out.source = to_std(s.getSource());
  out.in_tier = s.getInTier();
  out.tier_bytes = s.getTierBytes();
  return out;
}

void to_capnp(const vmodel_status& s, VModelStatus::Builder out) {
  out.setId(to_text(s.id));
  out.setState(to_capnp(s.state));
  out.setActive(to_text(s.active));
  out.setTarget(to_text(s.target));
  out.setActiveState(to_capnp(s.active_state));
  out.setTargetState(to_capnp(s.target_state));
  to_capnp(s.error, out.initError());
}

void to_capnp(const served_model_status& s, ServedModel::Builder out) {
  out.setName(to_text(s.config.name));
  out.setBasePath(to_text(s.config.base_path.empty() ? s.config.name : s.config.base_path));
  out.setVersionPolicy(to_text(to_string(s.config.versions)));
  out.setLoadPolicy(to_text(std::string(to_string(s.config.loading))));
  auto versions = out.initVersions(static_cast<unsigned>(s.versions.size()));
  for (unsigned i = 0; i < s.versions.size(); ++i) {
    auto& v = s.versions[i];
    auto o = versions[i];
    o.setVersion(v.version);
    o.setState(to_text(std::string(to_string(v.state))));
    o.setAspired(v.aspired);
    o.setError(to_text(v.error));
    o.setRetryInSeconds(v.retry_in_seconds);
    o.setFailures(v.failures);
  }
  out.setDefaultVersion(s.default_version.value_or(0));
  auto labels = out.initLabels(static_cast<unsigned>(s.labels.size()));
  unsigned i = 0;
  for (auto& [name, version] : s.labels) {
    labels[i].setName(to_text(name));
    labels[i].setVersion(version);
    ++i;
  }
  out.setSourceError(to_text(s.source_error));
  out.setRolling(s.rolling);
}

served_model_status from_capnp(ServedModel::Reader s) {
  served_model_status out;
  out.config.name = to_std(s.getName());
  out.config.base_path = to_std(s.getBasePath());
  if (auto p = parse_version_policy(to_std(s.getVersionPolicy()))) out.config.versions = *p;
  if (auto p = parse_load_policy(to_std(s.getLoadPolicy()))) out.config.loading = *p;
  for (auto v : s.getVersions()) {
    version_status vs;
    vs.version = v.getVersion();
    auto state = to_std(v.getState());
    for (auto candidate : {version_state::new_, version_state::loading, version_state::ready,
                           version_state::unloading, version_state::error})
      if (to_string(candidate) == state) vs.state = candidate;
    vs.aspired = v.getAspired();
    vs.error = to_std(v.getError());
    vs.retry_in_seconds = v.getRetryInSeconds();
    vs.failures = v.getFailures();
    out.versions.push_back(std::move(vs));
  }
  if (s.getDefaultVersion() != 0) out.default_version = s.getDefaultVersion();
  for (auto l : s.getLabels())
    out.labels[to_std(l.getName())] = l.getVersion();
  out.source_error = to_std(s.getSourceError());
  out.rolling = s.getRolling();
  return out;
}

void to_capnp(const cluster_info& info, ClusterInfo::Builder out) {
  out.setEnabled(info.enabled);
  out.setName(info.name);
  out.setInstance(info.instance);
  out.setJoined(info.joined);
  out.setLastError(info.last_error);
  set_texts(info.endpoints, [&](unsigned n) { return out.initEndpoints(n); });
  out.setForwarded(info.forwarded);
  out.setFellBack(info.fell_back);
  out.setPlaced(info.placed);
  out.setClaimsLost(info.claims_lost);
  auto list = out.initInstances(static_cast<unsigned>(info.instances.size()));
  for (unsigned i = 0; i < info.instances.size(); ++i) {
    const auto& x = info.instances[i];
    auto b = list[i];
    b.setName(x.name);
    b.setAddress(x.address);
    b.setVersion(x.version);
    b.setSelf(x.self);
    b.setDraining(x.draining);
    b.setCapacity(x.capacity);
    b.setUsed(x.used);
    b.setModelsLoaded(x.models_loaded);
    b.setLoadsInFlight(x.loads_in_flight);
    b.setLoadingThreads(x.loading_threads);
    b.setStartedUnix(x.started_unix);
    b.setUpdatedSecondsAgo(x.updated_seconds_ago);
    set_texts(x.residents, [&](unsigned n) { return b.initResidents(n); });
    set_texts(x.loading, [&](unsigned n) { return b.initLoading(n); });
    set_texts(x.tiered, [&](unsigned n) { return b.initTiered(n); });
  }
}

cluster_info from_capnp(ClusterInfo::Reader in) {
  cluster_info out;
  out.enabled = in.getEnabled();
  out.name = to_std(in.getName());
  out.instance = to_std(in.getInstance());
  out.joined = in.getJoined();
  out.last_error = to_std(in.getLastError());
  out.endpoints = texts(in.getEndpoints());
  out.forwarded = in.getForwarded();
  out.fell_back = in.getFellBack();
  out.placed = in.getPlaced();
  out.claims_lost = in.getClaimsLost();
  for (auto x : in.getInstances()) {
    cluster_instance c;
    c.name = to_std(x.getName());
    c.address = to_std(x.getAddress());
    c.version = to_std(x.getVersion());
    c.self = x.getSelf();
    c.draining = x.getDraining();
    c.capacity = x.getCapacity();
    c.used = x.getUsed();
    c.models_loaded = x.getModelsLoaded();
    c.loads_in_flight = x.getLoadsInFlight();
    c.loading_threads = x.getLoadingThreads();
    c.started_unix = x.getStartedUnix();
    c.updated_seconds_ago = x.getUpdatedSecondsAgo();
    c.residents = texts(x.getResidents());
    c.loading = texts(x.getLoading());
    c.tiered = texts(x.getTiered());
    out.instances.push_back(std::move(c));
  }
  return out;
}

vmodel_status from_capnp(VModelStatus::Reader s) {
  vmodel_status out;
  out.id = to_std(s.getId());
  out.state = from_capnp(s.getState());
  out.active = to_std(s.getActive());
  out.target = to_std(s.getTarget());
  out.active_state = from_capnp(s.getActiveState());
  out.target_state = from_capnp(s.getTargetState());
  out.error = optional_error(s.getError());
  return out;
}

// ---- tensors and inference -----------------------------------------------------------------

expected<std::uint64_t> tensor_bytes(dtype type, const capnp::List<std::uint64_t>::Reader& shape) {
  std::uint64_t n = dtype_size(type);
  for (std::uint64_t d : shape)
    if (d == 0) return std::uint64_t(0);  // empty, however large the other dimensions
  for (std::uint64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n))
      return make_error(errc::invalid_argument, "tensor shape overflows 64 bits");
  }
  return n;
}

void to_capnp(const tensor& t, Tensor::Builder out) {
  out.setName(to_text(t.name));
  auto dt = to_string(t.type);
  out.setDtype(capnp::Text::Reader(dt.data(), dt.size()));
  auto shape = out.initShape(static_cast<unsigned>(t.shape.size()));
  for (unsigned i = 0; i < t.shape.size(); ++i)
    shape.set(i, t.shape[i]);
  out.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(t.data.data()), t.data.size()));
}

expected<tensor> from_capnp(Tensor::Reader t) {
  tensor out;
  out.name = to_std(t.getName());
  auto dt_text = t.getDtype();
  auto dt = parse_dtype(std::string_view(dt_text.cStr(), dt_text.size()));
  if (!dt) return make_error(errc::invalid_argument, "unknown dtype \"" + to_std(dt_text) + "\"");
  out.type = *dt;
  auto shape = t.getShape();
  auto bytes = tensor_bytes(*dt, shape);
  if (!bytes) return bytes.error();
  auto data = t.getData();
  if (*bytes != data.size())
    return make_error(errc::invalid_argument, "tensor data is " + std::to_string(data.size()) +
                                                  " bytes, its shape and dtype say " +
                                                  std::to_string(*bytes));
  out.shape.reserve(shape.size());
  for (std::uint64_t d : shape)
    out.shape.push_back(d);
  out.data.resize(data.size());
  if (data.size() != 0) std::memcpy(out.data.data(), data.begin(), data.size());
  return out;
}

namespace {

void tensors_to_capnp(const std::vector<tensor>& in, capnp::List<Tensor>::Builder out) {
  for (unsigned i = 0; i < in.size(); ++i)
    to_capnp(in[i], out[i]);
}

expected<std::vector<tensor>> tensors_from_capnp(capnp::List<Tensor>::Reader in, const char* what) {
  std::vector<tensor> out;
  out.reserve(in.size());
  for (unsigned i = 0; i < in.size(); ++i) {
    auto t = from_capnp(in[i]);
    if (!t) {
      auto name = to_std(in[i].getName());
      return make_error(errc::invalid_argument, std::string(what) + " " + std::to_string(i) +
                                                    (name.empty() ? "" : " (\"" + name + "\")") +
                                                    ": " + t.error().message);
    }
    out.push_back(std::move(*t));
  }
  return out;
}

}  // namespace

void to_capnp(const infer_request& request, InferRequest::Builder out) {
  out.setTarget(to_text(request.target));
  tensors_to_capnp(request.inputs, out.initInputs(static_cast<unsigned>(request.inputs.size())));
  out.setForwarded(request.forwarded);
}

expected<infer_request> from_capnp(InferRequest::Reader request) {
  auto inputs = tensors_from_capnp(request.getInputs(), "input");
  if (!inputs) return inputs.error();
  infer_request out;
  out.target = to_std(request.getTarget());
  out.inputs = std::move(*inputs);
  out.forwarded = request.getForwarded();
  return out;
}

void to_capnp(const infer_result& result, InferResult::Builder out) {
  tensors_to_capnp(result.outputs, out.initOutputs(static_cast<unsigned>(result.outputs.size())));
  out.setModel(to_text(result.model));
  out.setCacheHit(result.cache_hit);
  out.setLoadWaitMs(result.load_wait_ms);
}

expected<infer_result> from_capnp(InferResult::Reader result) {
  auto outputs = tensors_from_capnp(result.getOutputs(), "output");
  if (!outputs) return outputs.error();
  infer_result out;
  out.outputs = std::move(*outputs);
  out.model = to_std(result.getModel());
  out.cache_hit = result.getCacheHit();
  out.load_wait_ms = result.getLoadWaitMs();
  return out;
}

}  // namespace warm::rpc
