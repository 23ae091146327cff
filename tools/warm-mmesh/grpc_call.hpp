// One unary gRPC call made with gRPC's callback API and answered on the kj event loop that made
// it: the call runs on gRPC's own threads, which only fulfil a cross-thread fulfiller (and run an
// optional `digest` of the answer, so heavy decoding stays off the loop). The event loop never
// blocks on the runtime.
//
// Dropping the returned promise cancels the call (ClientContext::TryCancel). The call's state is
// shared by the loop and gRPC's callback, so either may outlive the other.
#pragma once

#include <grpcpp/grpcpp.h>
#include <kj/async.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace warm::mmesh {

// What a call answered: its status, and the response (meaningful when the status is OK).
template <typename Response>
struct answer {
  grpc::Status status;
  Response response;
};

// A call's context, request and response, alive until both sides are done with them.
template <typename Request, typename Response>
struct call_state {
  grpc::ClientContext context;
  Request request;
  Response response;
};

// Starts `start(context*, request*, response*, done)` (a stub's async() method bound to its stub)
// with `request`, a deadline `deadline` from now (0: none) and `model_id` as the `mm-model-id`
// header (none when empty). The promise resolves on the calling loop with `digest(status,
// response)` (run on gRPC's thread).
template <typename Result, typename Request, typename Response, typename Start, typename Digest>
kj::Promise<Result> call(Start start, Request request, std::chrono::milliseconds deadline,
                         const std::string& model_id, Digest digest) {
  auto state = std::make_shared<call_state<Request, Response>>();
  state->request = std::move(request);
  if (deadline.count() > 0)
    state->context.set_deadline(std::chrono::system_clock::now() + deadline);
  if (!model_id.empty()) state->context.AddMetadata("mm-model-id", model_id);
  auto paf = kj::newPromiseAndCrossThreadFulfiller<Result>();
  auto fulfiller =
      std::make_shared<kj::Own<kj::CrossThreadPromiseFulfiller<Result>>>(kj::mv(paf.fulfiller));
  start(&state->context, &state->request, &state->response,
        [state, fulfiller, digest = std::move(digest)](grpc::Status status) mutable {
          (*fulfiller)->fulfill(digest(std::move(status), std::move(state->response)));
        });
  return paf.promise.attach(kj::defer([state] { state->context.TryCancel(); }));
}

// call() answering the status and response as they are.
template <typename Request, typename Response, typename Start>
kj::Promise<answer<Response>> call(Start start, Request request, std::chrono::milliseconds deadline,
                                   const std::string& model_id = {}) {
  return call<answer<Response>, Request, Response>(
      std::move(start), std::move(request), deadline, model_id,
      [](grpc::Status status, Response response) {
        return answer<Response>{std::move(status), std::move(response)};
      });
}

}  // namespace warm::mmesh
