// Which threads run actors, so that work that must never run there can be caught. Freeing a
// model's weights unmaps memory, frees device memory or waits for a model runtime's answer (up to
// seconds): on a thread of the actor system's scheduler it would stall every actor that thread
// serves. The runtime marks each thread the actor system starts (a CAF thread hook), and a resident
// model's destructor counts a freeing on a marked thread; tests assert the count stays 0, and
// warmd's `inspect` shows it. Lock-free; any thread.
#pragma once

#include <cstdint>

namespace warm::actor_threads {

// The calling thread runs actors from now on / no longer.
void enter() noexcept;
void leave() noexcept;

// Whether the calling thread runs actors.
bool current() noexcept;

// Counts weights freed on the calling thread when it runs actors (resident_model's destructor).
void note_weights_freed() noexcept;

// Weights freed on actor threads since the process started.
std::uint64_t weights_freed() noexcept;

}  // namespace warm::actor_threads
