// Running work on the EAL interrupt thread, where drivers run their callbacks (memif handles its
// peer's disconnect there). Internal to prdma's libraries and tools.
#pragma once

#include <chrono>
#include <functional>

#include <prdma/status.hpp>

namespace prdma {

// Runs `action` on the EAL interrupt thread and waits for it, so that it never overlaps a driver
// callback there: DPDK 22.11's memif tears a connection down on that thread when its peer leaves,
// and its stop and close run the same teardown on the caller's thread (overlapping, they free its
// memory twice or fault). A one-shot alarm is the public way in. Runs `action` right here when
// this is that thread. Also runs it here, and says why in an error, when no alarm can be set or
// the thread stays busy longer than `wait` (a callback that never returns would hang us).
Status run_on_interrupt_thread(const std::function<void()>& action, std::chrono::milliseconds wait);

} // namespace prdma
