#include <cassert>
#include <chrono>
#include <cstring>

#include "common/actor_threads.hpp"
#include "gpu/upload_pipeline.hpp"
#include "warm/device.hpp"
#include "warm/units.hpp"

namespace warm {

bool memory_budget::try_acquire(std::uint64_t bytes) {
  std::uint64_t current = used_.load(std::memory_order_relaxed);
  do {
    auto capacity = capacity_.load(std::memory_order_relaxed);
    if (current > capacity || bytes > capacity - current) return false;
  } while (!used_.compare_exchange_weak(current, current + bytes, std::memory_order_acq_rel,
                                        std::memory_order_relaxed));
  return true;
}

void memory_budget::release(std::uint64_t bytes) {
  [[maybe_unused]] auto before = used_.fetch_sub(bytes, std::memory_order_acq_rel);
  assert(before >= bytes && "released more bytes than were acquired");
}

memory_reservation& memory_reservation::operator=(memory_reservation&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void memory_reservation::reset() {
  if (owner_) std::exchange(owner_, nullptr)->release(std::exchange(bytes_, 0));
}

void memory_reservation::shrink_to(std::uint64_t bytes) {
  if (!owner_ || bytes >= bytes_) return;
  owner_->release(bytes_ - bytes);
  bytes_ = bytes;
}

void memory_reservation::absorb(memory_reservation other) {
  if (!other) return;
  if (!owner_) {
    *this = std::move(other);
    return;
  }
  assert(other.owner_ == owner_ && "absorbing another device's reservation");
  bytes_ += std::exchange(other.bytes_, 0);
  other.owner_ = nullptr;
}

resident_model::~resident_model() {
  actor_threads::note_weights_freed();
}

void resident_model::settle(memory_reservation more) {
  // A backend that measures overrides this; one that does not has nothing to settle.
  assert(measured_ == 0 && !more && "a measuring backend must settle its own charge");
  (void)more;
}

model_io dense_io(const dense_spec& spec) {
  model_io io;
  io.batched = true;
  io.inputs.push_back({"input", dtype::f32, {-1, static_cast<std::int64_t>(spec.input_width())}});
  io.outputs.push_back(
      {"output", dtype::f32, {-1, static_cast<std::int64_t>(spec.output_width())}});
  return io;
}

dense_resident::dense_resident(device& owner, dense_spec spec,
                               std::unique_ptr<device_buffer> weights)
    : resident_model(owner, dense_io(spec)),
      device_(&owner),
      spec_(std::move(spec)),
      weights_(std::move(weights)) {}

std::uint64_t dense_resident::max_batch() const {
  return max_activation_elements / spec_.widest();
}

std::uint64_t dense_resident::cost(std::uint64_t batch) const {
  auto parameters = spec_.parameters();
  if (parameters != 0 && batch > UINT64_MAX / parameters) return UINT64_MAX;
  return batch * parameters;
}

expected<std::vector<tensor>> dense_resident::run(const std::vector<tensor>& inputs,
                                                  std::uint64_t batch) const {
  // The request's bytes are copied into floats the BLAS may read aligned; the output is computed
  // into a reused buffer and copied out once.
  thread_local std::vector<float> input, output;
  const auto& data = inputs.front().data;
  input.resize(data.size() / sizeof(float));
  std::memcpy(input.data(), data.data(), data.size());
  if (auto ran = device_->infer(*this, input.data(), input.size(), batch, output); !ran)
    return std::move(ran).error();
  std::vector<tensor> outputs(1);
  auto& out = outputs.front();
  out.name = "output";
  out.type = dtype::f32;
  out.shape = {batch, spec_.output_width()};
  out.data.resize(output.size() * sizeof(float));
  std::memcpy(out.data.data(), output.data(), out.data.size());
  return outputs;
}

expected<memory_reservation> device::reserve(std::uint64_t bytes) {
  if (bytes > capacity())
    return make_error(errc::model_too_large,
                      name_ + ": " + std::to_string(bytes) + " bytes (" + format_bytes(bytes) +
                          ") exceed the device's capacity of " + format_bytes(capacity()));
  if (!budget_.try_acquire(bytes))
    return make_error(errc::capacity_exhausted, name_ + ": " + format_bytes(bytes) +
                                                    " do not fit; " + format_bytes(budget_.free()) +
                                                    " of " + format_bytes(capacity()) + " free");
  return memory_reservation(this, bytes);
}

expected<std::unique_ptr<device_buffer>> device::allocate(memory_reservation reservation) {
  if (reservation.owner() != this)
    return make_error(errc::invalid_argument,
                      name_ + ": the reservation belongs to another device");
  auto buffer = allocate_memory(reservation.bytes());
  if (buffer) {  // the buffer now owns the bytes: its destructor returns them
    reservation.owner_ = nullptr;
    reservation.bytes_ = 0;
  }
  return buffer;
}

expected<std::unique_ptr<device_buffer>> device::allocate(std::uint64_t bytes) {
  auto reservation = reserve(bytes);
  if (!reservation) return std::move(reservation).error();
  return allocate(std::move(*reservation));
}

expected<std::unique_ptr<dense_resident>> device::load(const model_file& file, load_stats* stats) {
  auto reservation = reserve(file.spec.data_bytes);
  if (!reservation) return std::move(reservation).error();
  return load_into(file, std::move(*reservation), stats);
}

expected<std::unique_ptr<dense_resident>> device::load_into(const model_file& file,
                                                            memory_reservation reservation,
                                                            load_stats* stats) {
  auto started = std::chrono::steady_clock::now();
  if (reservation.bytes() < file.spec.data_bytes)
    return make_error(errc::load_failed,
                      file.path + ": the model holds " + format_bytes(file.spec.data_bytes) +
                          " but only " + format_bytes(reservation.bytes()) +
                          " were reserved (the file changed since it was registered?)");
  if (!file.source)
    return make_error(errc::load_failed, file.path + ": the model file is not open");
  const read_file& opened = *file.source;
  // The open file is the one that was validated; a writer may still have changed it in place.
  auto now = opened.current_size();
  if (!now) return make_error(errc::load_failed, now.error().message);
  if (*now != file.header.data_offset + file.header.data_bytes)
    return make_error(errc::load_failed, file.path + ": file changed size since it was validated");
  auto buffer = allocate(std::move(reservation));
  if (!buffer) return std::move(buffer).error();
  auto target = upload_target_for(**buffer);
  if (auto r = upload(opened, file.header.data_offset, file.spec.data_bytes, *target,
                      stats ? stats->copied : nullptr);
      !r)
    return std::move(r).error();
  if (stats) {
    stats->bytes = file.spec.data_bytes;
    stats->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  return std::make_unique<dense_resident>(*this, file.spec, std::move(*buffer));
}

expected<void> device::infer(const dense_resident& model, const float* input,
                             std::uint64_t input_count, std::uint64_t batch,
                             std::vector<float>& output) {
  const auto& spec = model.spec();
  if (&model.owner() != this)
    return make_error(errc::invalid_argument,
                      name_ + ": model is resident on " + model.owner().name());
  if (batch == 0) return make_error(errc::invalid_argument, "batch must be at least 1");
  if (batch > max_activation_elements / spec.widest())
    return make_error(errc::invalid_argument,
                      "batch of " + std::to_string(batch) + " is too large for this model");
  if (input_count != batch * spec.input_width())
    return make_error(errc::invalid_argument, "input has " + std::to_string(input_count) +
                                                  " values; expected [" + std::to_string(batch) +
                                                  ", " + std::to_string(spec.input_width()) + "]");
  output.resize(batch * spec.output_width());
  return run(model, input, batch, output.data());
}

}  // namespace warm
