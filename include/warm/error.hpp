// Errors as values: the project's error codes, an error with a message, and expected<T>.
//
// Every fallible function in warm returns expected<T> (or expected<void>) instead of throwing.
// Errors are created where the fault is detected, with a message that names the object and what
// is wrong, and are translated once at an edge (CLI exit status, RPC status, HTTP code).
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace warm {

// The project's error codes. Stable: later layers map them to RPC and HTTP statuses.
enum class errc {
  not_found,           // no such model, file, device or id
  invalid_argument,    // the caller's input is malformed or inconsistent
  model_too_large,     // the model can never fit on the device, whatever is evicted
  capacity_exhausted,  // the device has no room now; freeing memory may help
  load_failed,         // reading or uploading a model failed
  unavailable,         // a resource (e.g. a CUDA device) is not usable on this machine
  timeout,             // a deadline passed
  internal,            // a bug in warm; never the caller's fault
};

// The code's stable lower-case name, e.g. "model_too_large".
std::string_view to_string(errc code) noexcept;

// An error: a code and a human-readable message (no trailing period, no newline).
struct error {
  errc code = errc::internal;
  std::string message;

  // "code: message", for logs and CLI output.
  std::string to_string() const;
};

inline error make_error(errc code, std::string message) {
  return error{code, std::move(message)};
}
// The error for bad input (a malformed file, a value out of range): invalid_argument.
inline error invalid_input(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

// The result of an operation that yields a T or fails with an error. Small and C++17-only; it
// mirrors the parts of std::expected that warm uses. Accessing value() of an error (or error()
// of a value) is a programming bug and asserts.
template <class T>
class [[nodiscard]] expected {
 public:
  expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  expected(warm::error err) : state_(std::in_place_index<1>, std::move(err)) {}

  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & {
    assert(has_value());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(has_value());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const warm::error& error() const& {
    assert(!has_value());
    return std::get<1>(state_);
  }
  warm::error&& error() && {
    assert(!has_value());
    return std::get<1>(std::move(state_));
  }

 private:
  std::variant<T, warm::error> state_;
};

// expected<void>: success carries nothing.
template <>
class [[nodiscard]] expected<void> {
 public:
  expected() = default;
  expected(warm::error err) : error_(std::move(err)), ok_(false) {}

  bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }

  const warm::error& error() const& {
    assert(!ok_);
    return error_;
  }
  warm::error&& error() && {
    assert(!ok_);
    return std::move(error_);
  }

 private:
  warm::error error_;
  bool ok_ = true;
};

}  // namespace warm
