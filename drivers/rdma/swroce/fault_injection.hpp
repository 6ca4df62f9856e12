// Fault injection for swroce: loses, corrupts, duplicates, reorders and delays frames on one
// direction of one queue group, so loss-recovery tests run on a kernel without sch_netem.
//
// Every decision comes from a small seeded generator, so a run with the same seed and the same
// frames makes the same decisions. Held frames (reordered, delayed, or a duplicate that did not
// fit the caller's array) live in fixed-size queues inside the injector: nothing is allocated
// after configure(), nothing is ever lost, and a full store lets frames pass instead.
//
// The header names DPDK types only as incomplete types, so devargs.hpp (pure) can use
// FaultRates without pulling DPDK in.
#pragma once

#include <array>
#include <cstdint>

struct rte_mbuf;
struct rte_mempool;

namespace prdma::swroce {

// Probabilities per frame. configure() treats NaN and negatives as 0 and values of 1 or more as
// "every frame" (the devargs accept [0, 1) only; tests use 1 to force a fault).
struct FaultRates {
    double drop = 0;
    double reorder = 0;
    double duplicate = 0;
    double corrupt = 0; // RoCEv2 frames only: other frames are never touched
    double delay = 0;   // among the frames not reordered: one frame is held once

    [[nodiscard]] bool any() const noexcept;
};

// One set per direction; the injector only adds to it.
struct FaultCounters {
    std::uint64_t dropped = 0;
    std::uint64_t reordered = 0;
    std::uint64_t duplicated = 0;
    std::uint64_t corrupted = 0;
    std::uint64_t delayed = 0;
    std::uint64_t duplicate_no_mbuf = 0; // a duplicate was due but `pool` had no free mbuf
    // A corrupt was due on a frame whose bytes are shared (a clone, an external buffer, a
    // reference kept for retransmission): it needs a private copy, and `pool` had none.
    std::uint64_t corrupt_no_mbuf = 0;
};

enum class FaultDirection : std::uint8_t { rx, tx };

// An independent generator seed for each queue group and direction of a device with seed=
// `device_seed`: a stream per injector, and still one seed to repeat a whole run.
[[nodiscard]] std::uint64_t injector_seed(std::uint64_t device_seed, unsigned group,
                                          FaultDirection direction) noexcept;

// One per queue group and direction, used only by the lcore that drives the group: no locks,
// no atomics, no allocation. Not copyable or movable: it owns the mbufs it holds, and frees them
// when destroyed, so it must go before the mempools they came from.
class FaultInjector {
public:
    static constexpr unsigned max_held = 256;         // frames held at once, all kinds together
    static constexpr unsigned max_reorder_depth = 64; // what the devargs allow

    FaultInjector() noexcept = default;
    FaultInjector(const FaultInjector&) = delete;
    FaultInjector& operator=(const FaultInjector&) = delete;
    FaultInjector(FaultInjector&&) = delete;
    FaultInjector& operator=(FaultInjector&&) = delete;
    ~FaultInjector();

    // Control path. Frees whatever is still held first. reorder_depth (at least 1): a reordered
    // frame comes out right after that many later frames went straight through. delay_cycles
    // (TSC): how long a delayed frame is held, and also the longest a reordered frame waits for
    // its later frames, so a quiet link does not keep it forever. seed 0 means a fixed non-zero
    // constant.
    void configure(const FaultRates& rates, unsigned reorder_depth, std::uint64_t delay_cycles,
                   std::uint64_t seed) noexcept;
    // false: apply() is never needed (and nothing is held).
    [[nodiscard]] bool active() const noexcept { return active_; }

    // Fast path. Applies the faults to frames[0, count) in order, in place, and returns how many
    // frames the caller now processes or transmits: frames[0, returned). `capacity` (>= count;
    // a smaller value is taken as count) is the array's size: duplicates and released held
    // frames are added up to it, and what does not fit stays held for a later call. Dropped
    // frames are freed here. Held frames come out of a later apply(): the caller calls it every
    // progress, with count == 0 when nothing new arrived, to release what is due at `now`.
    // Duplicates (and private copies of shared frames to corrupt) come from `pool`.
    //
    // Order per frame: drop, corrupt, duplicate (the copy follows the original and is never
    // held itself unless it does not fit), then reorder or delay of the original. Frames due
    // from earlier calls come out before this call's frames when the spare room allows.
    std::uint16_t apply(rte_mbuf** frames, std::uint16_t count, std::uint16_t capacity,
                        std::uint64_t now, rte_mempool* pool, FaultCounters& counters) noexcept;

    // Frames held now (reordered, delayed, and duplicates waiting for room).
    [[nodiscard]] unsigned held() const noexcept {
        return reordered_.size() + delayed_.size() + spilled_.size();
    }
    // Frees every held frame (device close, reconfigure).
    void release_all() noexcept;

private:
    struct HeldFrame {
        rte_mbuf* mbuf = nullptr;
        std::uint64_t due_pass = 0; // reordered: released once passed_ reaches this
        std::uint64_t deadline = 0; // TSC: released once `now` reaches this
    };
    // FIFO of held frames. Each kind is released in the order it was held (a fixed depth and a
    // fixed delay make the due points non-decreasing), so only the front is ever checked.
    class HeldQueue {
    public:
        [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
        [[nodiscard]] unsigned size() const noexcept { return count_; }
        [[nodiscard]] const HeldFrame& front() const noexcept { return entries_[head_]; }
        void push(const HeldFrame& frame) noexcept;
        rte_mbuf* pop() noexcept;

    private:
        std::array<HeldFrame, max_held> entries_{};
        unsigned head_ = 0;
        unsigned count_ = 0;
    };
    struct Output;

    [[nodiscard]] std::uint64_t next_random() noexcept;
    [[nodiscard]] bool chance(std::uint64_t threshold) noexcept;
    void inject(Output& out, rte_mbuf* frame, std::uint64_t now, rte_mempool* pool,
                FaultCounters& counters) noexcept;
    rte_mbuf* corrupt(rte_mbuf* frame, rte_mempool* pool, FaultCounters& counters) noexcept;
    void place_duplicate(Output& out, rte_mbuf* frame, rte_mempool* pool,
                         FaultCounters& counters) noexcept;
    void release_passed(Output& out) noexcept;
    void release_due(Output& out, std::uint64_t now) noexcept;

    bool active_ = false;
    // Each rate as a threshold on a 53-bit uniform sample: a fault happens when sample < it.
    std::uint64_t drop_threshold_ = 0;
    std::uint64_t corrupt_threshold_ = 0;
    std::uint64_t duplicate_threshold_ = 0;
    std::uint64_t reorder_threshold_ = 0;
    std::uint64_t delay_threshold_ = 0;
    unsigned reorder_depth_ = 1;
    std::uint64_t delay_cycles_ = 0;
    std::uint64_t random_state_ = 1;
    std::uint64_t passed_ = 0; // frames that went straight through, the clock of reordering
    HeldQueue reordered_;
    HeldQueue delayed_;
    HeldQueue spilled_; // duplicates that found no room in the caller's array
};

} // namespace prdma::swroce
