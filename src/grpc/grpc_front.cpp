#include "grpc/grpc_front.hpp"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_buffer_reader.h>
#include <grpcpp/server_posix.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <optional>

#include "grpc/fd_acceptor.hpp"
#include "grpc/input_decode.hpp"
#include "grpc/wire_bounds.hpp"
#include "kserve_v2.grpc.pb.h"
#include "net/front_access.hpp"
#include "net/login_limiter.hpp"
#include "net/tls_server.hpp"
#include "net/token.hpp"
#include "runtime/executor.hpp"
#include "v2/v2_common.hpp"
#include "warm/runtime.hpp"

namespace warm::grpc_front {
namespace {

namespace pb = ::inference;
using ServerContext = ::grpc::ServerContextBase;
using ::grpc::Status;
using ::grpc::StatusCode;

Status to_status(const warm::error& e) {
  return Status(static_cast<StatusCode>(grpc_code(e.code)), e.message);
}

Status invalid(std::string message) {
  return Status(StatusCode::INVALID_ARGUMENT, std::move(message));
}

// How long a call may wait for the runtime: the request timeout, or less when the client's
// deadline comes sooner.
std::chrono::milliseconds budget(const ServerContext& ctx, std::chrono::milliseconds limit) {
  const auto deadline = ctx.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return limit;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::system_clock::now());
  return std::clamp(left, std::chrono::milliseconds(0), limit);
}

using v2::wait;

// The client's address in gRPC's peer string ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000",
// "unix:/path"), for the login limiter.
std::string peer_host(const std::string& peer) {
  auto colon = peer.find(':');
  std::string rest = colon == std::string::npos ? peer : peer.substr(colon + 1);
  if (peer.rfind("unix:", 0) == 0) return rest;
  if (auto port = rest.rfind(':'); port != std::string::npos) rest.resize(port);
  if (rest.size() >= 2 && rest.front() == '[' && rest.back() == ']')
    rest = rest.substr(1, rest.size() - 2);
  return rest;
}

}  // namespace

int grpc_code(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument:
      return StatusCode::INVALID_ARGUMENT;
    case errc::not_found:
      return StatusCode::NOT_FOUND;
    case errc::model_too_large:
    case errc::capacity_exhausted:
      return StatusCode::RESOURCE_EXHAUSTED;
    case errc::load_failed:
    case errc::unavailable:
      return StatusCode::UNAVAILABLE;
    case errc::timeout:
      return StatusCode::DEADLINE_EXCEEDED;
    case errc::internal:
      return StatusCode::INTERNAL;
  }
  return StatusCode::INTERNAL;
}

namespace {

// The service: each method runs on one of the front's threads and waits there for the runtime.
class service final {
 public:
  service(runtime& rt, const front_options& options, fd_acceptor& acceptor)
      : rt_(rt), options_(options), acceptor_(acceptor) {}

  Status ServerLive(const ServerContext&, const pb::ServerLiveRequest*,
                    pb::ServerLiveResponse* out) {
    out->set_live(true);
    return Status::OK;
  }

  Status ServerReady(const ServerContext& ctx, const pb::ServerReadyRequest*,
                     pb::ServerReadyResponse* out) {
    out->set_ready(bool(wait(rt_.list_models("", 1),
                             std::min<std::chrono::milliseconds>(
                                 budget(ctx, options_.request_timeout), std::chrono::seconds(2)))));
    return Status::OK;
  }

  Status ServerMetadata(const ServerContext& ctx, const pb::ServerMetadataRequest*,
                        pb::ServerMetadataResponse* out) {
    out->set_name("warm");
    out->set_version("0.1.0");
    out->add_extensions("model_repository");
    return Status::OK;
  }

  Status ModelMetadata(const ServerContext& ctx, const pb::ModelMetadataRequest* req,
                       pb::ModelMetadataResponse* out) {
    auto target = served(ctx, req->name(), req->version());
    if (!target) return to_status(target.error());
    auto described = v2::describe(rt_, req->name(), *target, budget(ctx, options_.request_timeout));
    if (!described) return to_status(described.error());
    const auto* meta = &described->meta;
    out->set_name(req->name());
    for (auto v : described->versions)
      out->add_versions(std::to_string(v));  // every one it serves
    out->set_platform(meta->kind == "torchscript" ? "pytorch_libtorch" : "warm_" + meta->kind);
    auto add = [](auto* t, const tensor_spec& spec) {  // undeclared: datatype "" and shape [-1]
      t->set_name(spec.name);
      t->set_datatype(spec.known ? std::string(v2_name(spec.type)) : "");
      if (!spec.known) t->add_shape(-1);
      for (auto d : spec.shape)
        t->add_shape(d);
    };
    for (const auto& spec : meta->io.inputs)
      add(out->add_inputs(), spec);
    for (const auto& spec : meta->io.outputs)
      add(out->add_outputs(), spec);
    return Status::OK;
  }

  Status ModelReady(const ServerContext& ctx, const pb::ModelReadyRequest* req,
                    pb::ModelReadyResponse* out) {
    auto target = served(ctx, req->name(), req->version());
    if (!target) return to_status(target.error());
    auto state = v2::state_of(rt_, *target, budget(ctx, options_.request_timeout));
    if (!state) return to_status(state.error());
    out->set_ready(*state == model_state::loaded);
    return Status::OK;
  }

  Status ModelInfer(const ServerContext& ctx, const pb::ModelInferRequest* req,
                    pb::ModelInferResponse* out) {
    if (req->inputs_size() == 0) return invalid("\"inputs\" must not be empty");
    const bool raw = req->raw_input_contents_size() > 0;
    if (raw && req->raw_input_contents_size() != req->inputs_size())
      return invalid("raw_input_contents holds " + std::to_string(req->raw_input_contents_size()) +
                     " entries for " + std::to_string(req->inputs_size()) + " inputs");
    auto target = served(ctx, req->model_name(), req->model_version());
    if (!target) return to_status(target.error());
    infer_request request;
    request.target = std::move(*target);
    for (int i = 0; i < req->inputs_size(); ++i) {
      auto t = decode_input(req->inputs(i), raw ? &req->raw_input_contents(i) : nullptr,
                            options_.max_tensor_bytes);
      if (!t) return to_status(t.error());
      request.inputs.push_back(std::move(*t));
    }
    auto result = wait(rt_.infer(std::move(request)), budget(ctx, options_.request_timeout));
    if (!result) return to_status(result.error());
    std::vector<std::string> asked;
    for (const auto& o : req->outputs())
      asked.push_back(o.name());
    if (auto chosen = v2::select_outputs(*result, asked); !chosen) return to_status(chosen.error());
    out->set_model_name(result->model);
    out->set_model_version(
        v2::answered_version(result->model, req->model_version()));  // the one that served
    out->set_id(req->id());
    (*out->mutable_parameters())["warm_cache_hit"].set_bool_param(result->cache_hit);
    (*out->mutable_parameters())["warm_load_wait_us"].set_int64_param(
        static_cast<std::int64_t>(result->load_wait_ms * 1000));
    for (auto& t : result->outputs) {
      auto* o = out->add_outputs();
      o->set_name(t.name);
      o->set_datatype(std::string(v2_name(t.type)));
      for (auto d : t.shape)
        o->add_shape(static_cast<std::int64_t>(d));
      out->add_raw_output_contents(
          std::string(reinterpret_cast<const char*>(t.data.data()), t.data.size()));
    }
    return Status::OK;
  }

  Status RepositoryIndex(const ServerContext& ctx, const pb::RepositoryIndexRequest* req,
                         pb::RepositoryIndexResponse* out) {
    auto models = wait(rt_.list_models(), budget(ctx, options_.request_timeout));
    if (!models) return to_status(models.error());
    for (const auto& m : *models) {
      if (req->ready() && m.state != model_state::loaded) continue;
      auto* entry = out->add_models();
      entry->set_name(m.id);
      entry->set_state(v2::triton_state(m.state));
      if (m.last_error) entry->set_reason(m.last_error->message);
    }
    return Status::OK;
  }

  Status RepositoryModelLoad(const ServerContext& ctx, const pb::RepositoryModelLoadRequest* req,
                             pb::RepositoryModelLoadResponse*) {
    auto done = v2::load(rt_, req->model_name(), budget(ctx, options_.request_timeout));
    return done ? Status::OK : to_status(done.error());
  }

  Status RepositoryModelUnload(const ServerContext& ctx,
                               const pb::RepositoryModelUnloadRequest* req,
                               pb::RepositoryModelUnloadResponse*) {
    auto done = wait(rt_.unload(req->model_name()), budget(ctx, options_.request_timeout));
    return done ? Status::OK : to_status(done.error());
  }

 public:
  // An error status when the call does not carry the token (or its address has spent its
  // budget of wrong tokens); nothing when it may go on.
  std::optional<Status> authorize(const ServerContext& ctx) const {
    if (options_.token.empty()) return std::nullopt;
    // The token first: the right one is never refused, whatever its address's budget (a shared
    // NAT or a proxy speaks for many clients); only wrong ones are counted and limited.
    const auto& metadata = ctx.client_metadata();
    auto found = metadata.find("authorization");
    const std::string prefix = "Bearer ";
    if (found != metadata.end()) {
      std::string_view header(found->second.data(), found->second.size());
      if (header.substr(0, prefix.size()) == prefix &&
          net::constant_time_equal(header.substr(prefix.size()), options_.token))
        return std::nullopt;
    }
    const auto address = client_address(ctx);
    auto now = net::login_limiter::clock::now();
    std::chrono::seconds retry_after{0};
    if (options_.login_limiter &&
        !options_.login_limiter->allow(address, "grpc", now, &retry_after))
      return Status(StatusCode::UNAUTHENTICATED,
                    "too many wrong tokens from this address; retry in " +
                        std::to_string(retry_after.count()) + " s");
    if (options_.login_limiter) options_.login_limiter->failed(address, "grpc", now);
    return Status(StatusCode::UNAUTHENTICATED,
                  "this server needs \"authorization: Bearer TOKEN\" metadata");
  }

 private:
  // The model a request names: `model` when `version` is empty, else v2::version_target's
  // (a served model's version or label, or `model` when it serves that version).
  expected<std::string> served(const ServerContext& ctx, const std::string& model,
                               const std::string& version) {
    if (version.empty()) return model;
    return v2::version_target(rt_, model, version, budget(ctx, options_.request_timeout));
  }

  // The client's address: gRPC names a connection it was handed by its descriptor ("fd:12"),
  // which the acceptor knows the peer of.
  std::string client_address(const ServerContext& ctx) const {
    const auto peer = ctx.peer();
    if (peer.rfind("fd:", 0) == 0) {
      int fd = -1;
      std::from_chars(peer.data() + 3, peer.data() + peer.size(), fd);
      if (auto address = acceptor_.peer(fd); !address.empty()) return address;
    }
    return peer_host(peer);
  }

  runtime& rt_;
  const front_options& options_;
  fd_acceptor& acceptor_;
};

// One method of the service as the generic front serves it: whether it needs the token, whether
// it reads a request message at all, the largest request it takes, and the typed call.
struct method {
  bool authenticated = true;
  bool reads_request = true;
  std::uint64_t max_bytes = 0;
  // Decodes the request (bounded first), runs the call, encodes the answer into `out`.
  std::function<Status(service&, const ServerContext&, ::grpc::ByteBuffer&, ::grpc::ByteBuffer&)>
      run;
};

// The typed call `call` of `service` as a method: the request is checked against `bounds` before
// protobuf parses it, and the response serialized into the reply buffer.
template <class Request, class Response>
method typed(Status (service::*call)(const ServerContext&, const Request*, Response*),
             std::uint64_t max_bytes, wire_limits bounds, bool authenticated = true) {
  method m;
  m.authenticated = authenticated;
  m.max_bytes = max_bytes;
  m.run = [call, bounds](service& s, const ServerContext& ctx, ::grpc::ByteBuffer& in,
                         ::grpc::ByteBuffer& out) {
    const auto wire_bytes = in.Length();
    {
      ::grpc::ProtoBufferReader reader(&in);
      if (auto fits = check_wire(reader, wire_bytes, *Request::descriptor(), bounds); !fits)
        return invalid(fits.error().message);
    }
    Request request;
    {
      ::grpc::ProtoBufferReader reader(&in);
      if (!request.ParseFromZeroCopyStream(&reader))
        return invalid("the request is not a " + Request::descriptor()->name());
    }
    Response response;
    auto status = (s.*call)(ctx, &request, &response);
    if (!status.ok()) return status;
    bool own = false;
    return ::grpc::SerializationTraits<Response>::Serialize(response, &out, &own);
  };
  return m;
}

// The service's methods by their full gRPC name ("/inference.GRPCInferenceService/ModelInfer").
// Only ModelInfer carries tensors: every other request is a few names and takes at most 64 KiB.
std::map<std::string, method, std::less<>> methods(const front_options& options) {
  constexpr std::uint64_t small = 64 << 10;
  wire_limits names;  // a request that carries names only
  names.max_repeated = 64;
  names.max_objects = 256;
  wire_limits tensors;
  tensors.max_repeated = options.max_tensors;
  tensors.max_objects = options.max_message_entries;
  const std::string prefix = "/inference.GRPCInferenceService/";
  std::map<std::string, method, std::less<>> all;
  all[prefix + "ServerLive"] = typed(&service::ServerLive, small, names, false);
  all[prefix + "ServerLive"].reads_request = false;  // answers at once, whatever was sent
  all[prefix + "ServerReady"] = typed(&service::ServerReady, small, names, false);
  all[prefix + "ServerReady"].reads_request = false;
  all[prefix + "ServerMetadata"] = typed(&service::ServerMetadata, small, names);
  all[prefix + "ModelMetadata"] = typed(&service::ModelMetadata, small, names);
  all[prefix + "ModelReady"] = typed(&service::ModelReady, small, names);
  all[prefix + "ModelInfer"] = typed(&service::ModelInfer, options.max_request_bytes, tensors);
  all[prefix + "RepositoryIndex"] = typed(&service::RepositoryIndex, small, names);
  all[prefix + "RepositoryModelLoad"] = typed(&service::RepositoryModelLoad, small, names);
  all[prefix + "RepositoryModelUnload"] = typed(&service::RepositoryModelUnload, small, names);
  return all;
}

// Serves every call of the front with gRPC's callback API, so that nothing of a call is read
// before it is known to be allowed: the method and the token are checked on the call's initial
// metadata, and a call refused there is finished without its message ever being read (HTTP/2's
// flow control leaves the rest of it with the client). An allowed call's message is read, its
// size checked, and the work handed to the front's own threads (the callback threads never
// wait for the runtime).
class dispatcher final : public ::grpc::CallbackGenericService {
 public:
  dispatcher(service& s, const front_options& options)
      : service_(s), options_(options), methods_(methods(options)), workers_(options.threads) {}

  ::grpc::ServerGenericBidiReactor* CreateReactor(
      ::grpc::GenericCallbackServerContext* ctx) override {
    return new call(*this, ctx);
  }

  // Calls admitted and not yet finished (running or waiting for a thread).
  std::size_t in_flight() const { return in_flight_.load(); }

 private:
  // One call, from its initial metadata to its end. Deletes itself when gRPC is done with it.
  class call final : public ::grpc::ServerGenericBidiReactor {
   public:
    call(dispatcher& d, ::grpc::GenericCallbackServerContext* ctx) : d_(d), ctx_(*ctx) {
      auto found = d_.methods_.find(ctx->method());
      if (found == d_.methods_.end()) {
        Finish(Status(StatusCode::UNIMPLEMENTED, "no method " + ctx->method()));
        return;
      }
      method_ = &found->second;
      if (method_->authenticated)
        if (auto denied = d_.service_.authorize(ctx_)) {
          Finish(*denied);
          return;
        }
      if (method_->reads_request) {
        StartRead(&request_);
        return;
      }
      run();
    }

    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(invalid("the call carried no request message"));
        return;
      }
      if (request_.Length() > method_->max_bytes) {
        Finish(Status(StatusCode::RESOURCE_EXHAUSTED, "the request takes " +
                                                          std::to_string(request_.Length()) +
                                                          " bytes; this method takes at most " +
                                                          std::to_string(method_->max_bytes)));
        return;
      }
      run();
    }

    void OnDone() override { delete this; }

   private:
    // Hands the call to a front thread, unless as many calls as the front takes are in flight.
    void run() {
      const auto limit = std::size_t{d_.options_.threads} + d_.options_.queued_calls;
      if (d_.in_flight_.fetch_add(1) >= limit) {
        d_.in_flight_.fetch_sub(1);
        Finish(Status(StatusCode::RESOURCE_EXHAUSTED,
                      "the server is busy: " + std::to_string(limit) + " calls are in progress"));
        return;
      }
      d_.workers_.submit([this] {
        auto status = method_->run(d_.service_, ctx_, request_, response_);
        d_.in_flight_.fetch_sub(1);
        if (status.ok())
          StartWriteAndFinish(&response_, ::grpc::WriteOptions(), status);
        else
          Finish(status);
      });
    }

    dispatcher& d_;
    ::grpc::GenericCallbackServerContext& ctx_;
    const method* method_ = nullptr;
    ::grpc::ByteBuffer request_;
    ::grpc::ByteBuffer response_;
  };

  service& service_;
  const front_options& options_;
  const std::map<std::string, method, std::less<>> methods_;
  std::atomic<std::size_t> in_flight_{0};
  executor workers_;  // last: joined first, while everything its tasks use is alive
};

}  // namespace

struct front::impl {
  front_options options;
  std::unique_ptr<service> handler;
  std::unique_ptr<fd_acceptor> acceptor;
  std::unique_ptr<dispatcher> calls;
  std::unique_ptr<::grpc::Server> server;
  bool serving_tls = false;
  bool stopped = false;
};

front::front(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

front::~front() {
  stop();
}

void front::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  impl_->acceptor->stop();
  impl_->server->Shutdown(std::chrono::system_clock::now() + impl_->options.request_timeout);
  impl_->server->Wait();
}

expected<void> front::set_tls(std::shared_ptr<const net::tls_material> tls) {
  if (!impl_->options.unix_path.empty()) return {};
  if (!tls && impl_->serving_tls)
    return make_error(errc::invalid_argument, "TLS cannot be turned off while serving");
  if (tls && !impl_->serving_tls)
    return make_error(errc::invalid_argument, "TLS cannot be turned on while serving");
  if (!tls) return {};
  auto context = net::ssl_server::make(*tls, "h2");
  if (!context) return context.error();
  impl_->acceptor->set_tls(std::move(*context));
  return {};
}

std::uint16_t front::port() const {
  return impl_->acceptor->port();
}

std::size_t front::open_connections() {
  return impl_->acceptor->open_connections();
}

std::string front::address() const {
  if (!impl_->options.unix_path.empty()) return "unix:" + impl_->options.unix_path;
  const auto& host = impl_->options.host;
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port());
}

expected<std::unique_ptr<front>> front::start(runtime& rt, front_options options) {
  if (options.threads == 0)
    return make_error(errc::invalid_argument, "the gRPC front needs at least one thread");
  if (auto problem = net::access_problem(options, "gRPC"); !problem.empty())
    return make_error(errc::invalid_argument, problem);
  auto i = std::make_unique<impl>();
  i->options = std::move(options);
  acceptor_options listening;
  listening.host = i->options.host;
  listening.port = i->options.port;
  listening.unix_path = i->options.unix_path;
  listening.max_connections = i->options.max_connections;
  listening.log = i->options.log;
  if (i->options.unix_path.empty() && i->options.tls) {
    auto context =
        net::ssl_server::make(*i->options.tls, "h2");  // gRPC clients ask for HTTP/2 by ALPN
    if (!context) return make_error(errc::invalid_argument, "gRPC: " + context.error().message);
    listening.tls = std::move(*context);
    listening.handshake_timeout = i->options.idle_timeout;
    i->serving_tls = true;
  }
  auto acceptor = fd_acceptor::listen(std::move(listening));
  if (!acceptor) return make_error(errc::unavailable, "gRPC: " + acceptor.error().message);
  i->acceptor = std::move(*acceptor);
  i->handler = std::make_unique<service>(rt, i->options, *i->acceptor);
  i->calls = std::make_unique<dispatcher>(*i->handler, i->options);
  ::grpc::ServerBuilder builder;  // no listening port: warm's acceptor hands it the connections
  builder.RegisterCallbackGenericService(i->calls.get());
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<std::uint64_t>(i->options.max_request_bytes, INT32_MAX)));
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(std::clamp<std::int64_t>(i->options.idle_timeout.count(), 1, INT32_MAX)));
  // Streams a connection may open at once: each may hold up to a flow-control window of data
  // before it is read.
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONCURRENT_STREAMS,
      static_cast<int>(std::clamp<std::uint32_t>(i->options.threads, 1, 1024)));
  i->server = builder.BuildAndStart();
  if (!i->server) return make_error(errc::unavailable, "cannot start the gRPC server");
  auto* server = i->server.get();
  i->acceptor->serve([server](int fd) { ::grpc::AddInsecureChannelFromFd(server, fd); });
  return std::unique_ptr<front>(new front(std::move(i)));
}

}  // namespace warm::grpc_front
