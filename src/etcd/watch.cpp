// warm::etcd::client::watch and its watcher (client.hpp has the contracts): gRPC's asynchronous
// API on the watcher's own thread and completion queue.
#include "etcd/client_impl.hpp"

namespace warm::etcd {

// A watch's state, shared by the watcher and its thread (which holds it alive while it runs, so
// that a watcher destroyed from its own callback can let the thread finish alone).
struct watcher::impl {
  // Set by client::watch before the thread starts; read-only afterwards.
  struct member {
    std::string name;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::Watch::Stub> stub;
    std::unique_ptr<pb::Auth::Stub> auth;
  };
  std::vector<member> members;
  std::size_t first = 0;                // the client's preferred endpoint when the watch began
  std::shared_ptr<authenticator> auth;  // the client's, with options::user
  bool tls = false;                     // the endpoints are https
  pb::WatchCreateRequest create;
  std::string what;  // "watch 'prefix'", for messages
  milliseconds timeout{0};
  watch_callback callback;
  std::promise<expected<void>> confirmed;  // set once: the watch is confirmed, or given up

  std::thread thread;
  std::atomic<bool> ended{false};

  // The destructor's signal: `stopping` set and the open call (if any) cancelled, under `m`.
  std::mutex m;
  bool stopping = false;
  grpc::ClientContext* open = nullptr;

  // The thread: confirms the watch (or gives up), then reads the stream until it ends.
  void run();
  // Called by the watcher's destructor.
  void stop();

 private:
  using stream_t = grpc::ClientAsyncReaderWriter<pb::WatchRequest, pb::WatchResponse>;
  enum tag : std::intptr_t { start_tag = 1, write_tag, read_tag, finish_tag };

  // One Watch call on the thread's completion queue, and which of its operations are in flight.
  struct call {
    grpc::ClientContext ctx;
    std::unique_ptr<stream_t> stream;
    bool starting = false, writing = false, reading = false;
    pb::WatchResponse response;
    bool busy() const { return starting || writing || reading; }
  };

  // How opening a watch ended: confirmed; not reached; sent and not confirmed in time; refused
  // by etcd; refused for what may be its token (a fresh one may do); its TLS handshake failed.
  enum class outcome { confirmed, unreachable, late, refused, token_refused, tls };

  bool is_stopping() {
    std::lock_guard<std::mutex> lock(m);
    return stopping;
  }
  void set_open(grpc::ClientContext* ctx) {
    std::lock_guard<std::mutex> lock(m);
    open = ctx;
  }
  // The next completion on `cq` (of `c`'s operations) before `until` (steady::time_point::max():
  // no limit); false when `until` passed first.
  bool next(grpc::CompletionQueue& cq, call& c, steady::time_point until, tag* t, bool* ok);
  // Ends `c`: cancels it unless it failed already, waits for its operations, returns its status.
  grpc::Status finish(grpc::CompletionQueue& cq, call& c, bool cancel);
  // Opens a call on `at` with `token` (none when empty), sends the create request and waits
  // (until `until`) for etcd to confirm it. `confirmed`: the call is open; otherwise it is
  // finished, with `failure` (unreachable, late, tls) or `refusal` (refused, token_refused)
  // saying why.
  outcome open_call(grpc::CompletionQueue& cq, call& c, const member& at, steady::time_point until,
                    bool wait_for_ready, const std::string& token, std::string* failure,
                    warm::error* refusal);
  // One try at `at`: gets a token when the watch needs one, opens the call and, once it is
  // confirmed, reads it to its end. What it found is added to the arguments; given_up is set
  // when there is nothing more to try.
  void attempt(grpc::CompletionQueue& cq, std::size_t at, steady::time_point until, bool wait,
               std::optional<expected<void>>* given_up, bool* answered_late, bool* failed_tls,
               std::string* failure);
  // Reads the confirmed call until it ends, delivering updates; the last one has an error unless
  // the watcher is being destroyed.
  void read(grpc::CompletionQueue& cq, call& c, const member& at);
  void deliver_end(errc code, std::string message, std::int64_t compact_revision);
};

bool watcher::impl::next(grpc::CompletionQueue& cq, call& c, steady::time_point until, tag* t,
                         bool* ok) {
  void* got = nullptr;
  if (until == steady::time_point::max()) {
    if (!cq.Next(&got, ok)) return false;  // not before the thread shuts the queue down
  } else if (cq.AsyncNext(&got, ok, to_system(until)) != grpc::CompletionQueue::GOT_EVENT) {
    return false;
  }
  *t = static_cast<tag>(reinterpret_cast<std::intptr_t>(got));
  if (*t == start_tag) c.starting = false;
  if (*t == write_tag) c.writing = false;
  if (*t == read_tag) c.reading = false;
  return true;
}

grpc::Status watcher::impl::finish(grpc::CompletionQueue& cq, call& c, bool cancel) {
  if (cancel) c.ctx.TryCancel();
  tag t = start_tag;
  bool ok = false;
  while (c.busy())
    next(cq, c, steady::time_point::max(), &t, &ok);
  grpc::Status status;
  c.stream->Finish(&status, reinterpret_cast<void*>(finish_tag));
  do {
    next(cq, c, steady::time_point::max(), &t, &ok);
  } while (t != finish_tag);
  set_open(nullptr);
  return status;
}

watcher::impl::outcome watcher::impl::open_call(grpc::CompletionQueue& cq, call& c,
                                                const member& at, steady::time_point until,
                                                bool wait_for_ready, const std::string& token,
                                                std::string* failure, warm::error* refusal) {
  // With this, etcd ends the stream when its member loses the leader, instead of leaving it
  // silent while the rest of the cluster goes on.
  c.ctx.AddMetadata("hasleader", "true");
  if (!token.empty()) c.ctx.AddMetadata("token", token);
  c.ctx.set_wait_for_ready(wait_for_ready);  // as in client::impl::invoke
  set_open(&c.ctx);
  c.stream = at.stub->PrepareAsyncWatch(&c.ctx, &cq);
  c.stream->StartCall(reinterpret_cast<void*>(start_tag));
  c.starting = true;
  for (;;) {
    tag t = start_tag;
    bool ok = false;
    if (!next(cq, c, until, &t, &ok)) {
      finish(cq, c, true);
      if (at.channel->GetState(false) != GRPC_CHANNEL_READY) {
        if (failure->empty()) *failure = "no connection in time";
        return outcome::unreachable;
      }
      *failure = "no confirmation in time";
      return outcome::late;
    }
    if (!ok) {  // the call failed; its status says why
      auto s = finish(cq, c, false);
      if (auto why = detail::tls_failure(s, tls)) {
        *failure = std::move(*why);
        return outcome::tls;
      }
      switch (classify(s, *at.channel)) {
        case failed::unreachable:
          *failure = s.error_message();
          return outcome::unreachable;
        case failed::late:
          *failure = s.error_message();
          return outcome::late;
        case failed::final:
          break;
      }
      *refusal = status_error(what, at.name, s);
      return detail::token_refused(s.error_message()) ? outcome::token_refused : outcome::refused;
    }
    if (t == start_tag) {
      pb::WatchRequest req;
      *req.mutable_create_request() = create;
      c.stream->Write(req, reinterpret_cast<void*>(write_tag));
      c.writing = true;
      c.stream->Read(&c.response, reinterpret_cast<void*>(read_tag));
      c.reading = true;
    } else if (t == read_tag) {
      if (c.response.created() && !c.response.canceled()) return outcome::confirmed;
      if (c.response.canceled()) {
        std::string reason = c.response.cancel_reason();
        finish(cq, c, true);
        *refusal = make_error(errc::invalid_argument,
                              "etcd " + what + " at " + at.name + ": refused: " + reason);
        // etcd 3.4 gives an expired token's watch "permission denied", as it does a user's.
        const bool token =
            detail::token_refused(reason) || reason.find("permission denied") != std::string::npos;
        return token ? outcome::token_refused : outcome::refused;
      }
      c.stream->Read(&c.response, reinterpret_cast<void*>(read_tag));  // not the answer yet
      c.reading = true;
    }
  }
}

void watcher::impl::read(grpc::CompletionQueue& cq, call& c, const member& at) {
  c.stream->Read(&c.response, reinterpret_cast<void*>(read_tag));
  c.reading = true;
  for (;;) {
    tag t = start_tag;
    bool ok = false;
    next(cq, c, steady::time_point::max(), &t, &ok);
    if (t != read_tag) continue;  // the create request's write completing
    if (!ok) {
      auto s = finish(cq, c, false);
      if (!is_stopping())
        deliver_end(errc::unavailable,
                    "etcd " + what + " at " + at.name + ": the stream ended: " +
                        (s.ok() ? std::string("closed by etcd") : s.error_message()),
                    0);
      return;
    }
    const pb::WatchResponse& r = c.response;
    if (r.canceled()) {
      const auto compacted = r.compact_revision();
      std::string reason = r.cancel_reason();
      finish(cq, c, true);
      if (compacted > 0)
        deliver_end(errc::not_found,
                    "etcd " + what + ": revision " + std::to_string(create.start_revision()) +
                        " is compacted (the oldest kept is " + std::to_string(compacted) +
                        "): list again and watch from the listing's revision + 1",
                    compacted);
      else
        deliver_end(errc::internal,
                    "etcd " + what + " at " + at.name + ": cancelled by etcd: " +
                        (reason.empty() ? std::string("no reason given") : reason),
                    0);
      return;
    }
    if (r.events_size() > 0 && !is_stopping()) {
      watch_update u;
      u.revision = r.header().revision();
      u.events.reserve(static_cast<std::size_t>(r.events_size()));
      for (const auto& e : r.events()) {
        watch_event out;
        out.type =
            e.type() == ::mvccpb::Event::DELETE ? watch_event::kind::erase : watch_event::kind::put;
        out.kv = from_pb(e.kv());
        u.events.push_back(std::move(out));
      }
      callback(u);
    }
    if (is_stopping()) {
      finish(cq, c, true);
      return;
    }
    c.stream->Read(&c.response, reinterpret_cast<void*>(read_tag));
    c.reading = true;
  }
}

void watcher::impl::deliver_end(errc code, std::string message, std::int64_t compact_revision) {
  ended = true;
  if (is_stopping()) return;
  watch_update u;
  u.error = make_error(code, std::move(message));
  u.compact_revision = compact_revision;
  callback(u);
}

void watcher::impl::attempt(grpc::CompletionQueue& cq, std::size_t at, steady::time_point until,
                            bool wait, std::optional<expected<void>>* given_up, bool* answered_late,
                            bool* failed_tls, std::string* failure) {
  const member& mb = members[at];
  bool renewed = false;  // a token etcd refused was replaced once already
  for (;;) {
    authenticator::ticket ticket;
    if (auth) {
      const grpc::Status s = auth->get(*mb.auth, until, wait, &ticket);
      if (!s.ok()) {
        *failure = s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? "no connection in time"
                                                                         : s.error_message();
        if (auto why = detail::tls_failure(s, tls)) {
          *failure = std::move(*why);
          *failed_tls = true;
        } else if (classify(s, *mb.channel) == failed::final) {
          *given_up = expected<void>(detail::authentication_error(*auth, what, mb.name, s));
        }
        return;
      }
    }
    call c;
    warm::error refusal;
    switch (open_call(cq, c, mb, until, wait, ticket.token, failure, &refusal)) {
      case outcome::confirmed:
        confirmed.set_value({});
        read(cq, c, mb);
        *given_up = expected<void>();  // the watch ran; nothing more to try
        return;
      case outcome::token_refused:
        if (auth && !renewed) {
          renewed = true;
          auth->drop(ticket.generation);
          continue;
        }
        *given_up = expected<void>(std::move(refusal));
        return;
      case outcome::refused:
        *given_up = expected<void>(std::move(refusal));
        return;
      case outcome::late:
        *answered_late = true;
        return;
      case outcome::tls:
        *failed_tls = true;
        return;
      case outcome::unreachable:
        return;
    }
  }
}

void watcher::impl::run() {
  grpc::CompletionQueue cq;
  const auto deadline = steady::now() + timeout;
  const std::size_t n = members.size();
  std::vector<std::string> failures(n);
  std::vector<bool> tls_refused(n);  // its TLS handshake failed: not tried again
  std::size_t tls_refusals = 0;
  bool answered_late = false;
  milliseconds pause = first_pause;
  std::optional<expected<void>> given_up;
  std::vector<std::string> names;
  for (const auto& mb : members)
    names.push_back(mb.name);
  for (int round = 0; !given_up; ++round) {
    for (std::size_t i = 0; i < n && !given_up; ++i) {
      const std::size_t at = (first + i) % n;
      if (tls_refused[at]) continue;
      const auto now = steady::now();
      if (now >= deadline) break;
      bool tls = false;
      attempt(cq, at, share(now, deadline, n - i), round > 0, &given_up, &answered_late, &tls,
              &failures[at]);
      if (tls) {
        tls_refused[at] = true;
        if (++tls_refusals == n) given_up = expected<void>(tls_failed(what, names, failures));
      }
    }
    if (given_up) break;
    const auto now = steady::now();
    if (now >= deadline) {
      given_up = gave_up(what, names, failures, answered_late, timeout);
      break;
    }
    std::this_thread::sleep_for(std::min<steady::duration>(pause, deadline - now));
    pause = std::min(pause * 2, last_pause);
    for (auto& mb : members)
      reconnect_now(*mb.channel);
  }
  if (!given_up->has_value()) {
    ended = true;
    confirmed.set_value(std::move(*given_up));
  }
  cq.Shutdown();
  void* t = nullptr;
  bool ok = false;
  while (cq.Next(&t, &ok)) {
  }
}

void watcher::impl::stop() {
  std::lock_guard<std::mutex> lock(m);
  stopping = true;
  if (open) open->TryCancel();
}

watcher::watcher(std::shared_ptr<impl> state) : impl_(std::move(state)) {}

watcher::~watcher() {
  impl_->stop();
  if (impl_->thread.get_id() == std::this_thread::get_id())
    impl_->thread.detach();  // destroyed from its own callback: the thread ends by itself
  else if (impl_->thread.joinable())
    impl_->thread.join();
}

bool watcher::stopped() const {
  return impl_->ended.load();
}

expected<std::unique_ptr<watcher>> client::watch(const std::string& prefix,
                                                 std::int64_t start_revision,
                                                 watch_callback callback) {
  const std::string what = "watch " + quoted(prefix);
  if (!callback) return make_error(errc::invalid_argument, "etcd " + what + ": no callback");
  if (start_revision < 0)
    return make_error(errc::invalid_argument, "etcd " + what + ": the start revision is negative");
  auto state = std::make_shared<watcher::impl>();
  for (const auto& e : impl_->endpoints)
    state->members.push_back(
        {e.name, e.channel, pb::Watch::NewStub(e.channel), pb::Auth::NewStub(e.channel)});
  state->first = impl_->preferred.load();
  state->auth = impl_->auth;
  state->tls = impl_->tls;
  std::string key, end;
  set_prefix(prefix, &key, &end);
  state->create.set_key(key);
  state->create.set_range_end(end);
  state->create.set_start_revision(start_revision);
  state->what = what;
  state->timeout = impl_->opts.timeout;
  state->callback = std::move(callback);
  auto confirmed = state->confirmed.get_future();
  state->thread = std::thread([state] { state->run(); });
  auto r = confirmed.get();  // bounded: the thread gives up at the deadline
  if (!r) {
    state->thread.join();
    return std::move(r).error();
  }
  return std::make_unique<watcher>(std::move(state));
}

}  // namespace warm::etcd
