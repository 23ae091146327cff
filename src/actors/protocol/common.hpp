// What every actor protocol shares: how a registration is named, and how a warm::error travels
// between actors.
//
// Two kinds of answers:
// - At the runtime's edge (the messages warm::runtime sends in, whose answers go back to client
//   code) the answer is a callback (warm::callback, or a std::function named `done`) carried in
//   the message and called once, on the answering actor's thread.
// - Between actors an answer is a CAF response: the asking actor uses
//   `self->request(dest, caf::infinite, m).then(...)`, the answering one returns the value or a
//   `caf::error` (or a response promise when it answers later). A warm::error travels as a
//   caf::error of category "warm" (to_caf_error / from_caf_error below).
//
// Messages never cross a process boundary, so each protocol header registers its messages as
// CAF's "unsafe" (local only) message types instead of carrying serialization code.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>

#include <cstdint>
#include <string>

#include "actors/protocol/forward.hpp"
#include "warm/error.hpp"

namespace warm {

namespace msg {

// A registration: a model id and the generation the registry gave this registration of it. The
// registry bumps the generation on every (re)registration of an id, so a message of an earlier
// registration of the same id is recognised as stale by comparing generations.
struct registration {
  std::string id;
  std::uint64_t generation = 0;
  friend bool operator==(const registration& a, const registration& b) {
    return a.generation == b.generation && a.id == b.id;
  }
  friend bool operator!=(const registration& a, const registration& b) { return !(a == b); }
};

}  // namespace msg

// A warm::error as a caf::error (category "warm"; CAF reserves code 0 for "no error").
inline caf::error to_caf_error(const warm::error& e) {
  return caf::error(static_cast<std::uint8_t>(static_cast<int>(e.code) + 1), caf::atom("warm"),
                    caf::make_message(e.message));
}

// Back again. Any other caf::error (the answering actor stopped, a broken promise) can only
// happen while the runtime stops: `unavailable`.
inline warm::error from_caf_error(const caf::error& e) {
  if (e.category() == caf::atom("warm") && e.code() > 0) {
    std::string message;
    if (e.context().match_elements<std::string>()) message = e.context().get_as<std::string>(0);
    return make_error(static_cast<errc>(e.code() - 1), std::move(message));
  }
  return make_error(errc::unavailable, "the runtime is shutting down (" + caf::to_string(e) + ")");
}

}  // namespace warm
