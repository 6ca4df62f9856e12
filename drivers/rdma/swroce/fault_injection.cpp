#include "fault_injection.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>

#include <rte_mbuf.h>

#include <prdma/roce/headers.hpp>

namespace prdma::swroce {

namespace {

constexpr std::uint64_t default_seed = 0x9e3779b97f4a7c15ULL;
// Samples are 53-bit (a double's mantissa): a rate of 1 or more is a threshold above them all.
constexpr std::uint64_t sample_range = std::uint64_t{1} << 53;
// BTH byte 4 (FECN, BECN, reserved) is masked out of the ICRC: a flip there would go unseen.
constexpr std::uint32_t bth_masked_byte = 4;

std::uint64_t threshold_of(double rate) noexcept {
    if (!(rate > 0.0)) { // NaN too
        return 0;
    }
    if (rate >= 1.0) {
        return sample_range;
    }
    return static_cast<std::uint64_t>(std::ceil(rate * static_cast<double>(sample_range)));
}

std::uint64_t deadline_after(std::uint64_t now, std::uint64_t cycles) noexcept {
    return cycles > std::numeric_limits<std::uint64_t>::max() - now
               ? std::numeric_limits<std::uint64_t>::max()
               : now + cycles;
}

// The bytes a flipped bit must land in for the receiver's ICRC check to catch it: the BTH
// through the last byte of the ICRC, as the IP length says (not the frame length, which may
// carry Ethernet padding).
struct IcrcCovered {
    std::uint32_t bth_offset = 0;
    std::uint32_t end = 0;
};

// Headers are read from the first segment only; a frame whose headers do not fit there, or
// that is not IPv4/IPv6 UDP to port 4791, is not RoCEv2 and is never corrupted.
std::optional<IcrcCovered> icrc_covered_bytes(const rte_mbuf* frame) noexcept {
    const std::span<const std::uint8_t> head(rte_pktmbuf_mtod(frame, const std::uint8_t*),
                                             rte_pktmbuf_data_len(frame));
    roce::EthernetHeader eth;
    if (roce::decode_ethernet(head, eth) != roce::HeaderError::ok) {
        return std::nullopt;
    }
    const std::span<const std::uint8_t> ip = head.subspan(eth.size());
    std::size_t ip_header_size = 0;
    std::size_t ip_length = 0;
    if (eth.ether_type == roce::ethertype_ipv4) {
        roce::Ipv4Header v4;
        if (roce::decode_ipv4(ip, v4, false) != roce::HeaderError::ok ||
            v4.protocol != roce::ip_protocol_udp || v4.more_fragments || v4.fragment_offset != 0) {
            return std::nullopt;
        }
        ip_header_size = v4.header_length;
        ip_length = v4.total_length;
    } else if (eth.ether_type == roce::ethertype_ipv6) {
        roce::Ipv6Header v6;
        if (roce::decode_ipv6(ip, v6) != roce::HeaderError::ok ||
            v6.next_header != roce::ip_protocol_udp) {
            return std::nullopt;
        }
        ip_header_size = roce::ipv6_header_size;
        ip_length = roce::ipv6_header_size + v6.payload_length;
    } else {
        return std::nullopt;
    }
    roce::UdpHeader udp;
    if (roce::decode_udp(ip.subspan(ip_header_size), udp) != roce::HeaderError::ok ||
        udp.dst_port != roce::roce_udp_port) {
        return std::nullopt;
    }
    const std::size_t bth_offset = eth.size() + ip_header_size + roce::udp_header_size;
    const std::size_t end = eth.size() + ip_length;
    if (end > rte_pktmbuf_pkt_len(frame) || end < bth_offset + roce::bth_size + roce::icrc_size) {
        return std::nullopt;
    }
    return IcrcCovered{static_cast<std::uint32_t>(bth_offset), static_cast<std::uint32_t>(end)};
}

// The segment holding byte `offset` of the frame (which must be below its pkt_len), and the
// offset within it.
rte_mbuf* segment_of(rte_mbuf* frame, std::uint32_t& offset) noexcept {
    rte_mbuf* segment = frame;
    while (segment->next != nullptr && offset >= segment->data_len) {
        offset -= segment->data_len;
        segment = segment->next;
    }
    return segment;
}

// Writing into a clone, an external buffer or a frame someone else still references (a
// requester keeping it for retransmission) would corrupt their copy too.
bool writable(const rte_mbuf* frame, const rte_mbuf* segment) noexcept {
    return RTE_MBUF_DIRECT(segment) && rte_mbuf_refcnt_read(frame) == 1 &&
           rte_mbuf_refcnt_read(segment) == 1;
}

rte_mbuf* copy_of(rte_mbuf* frame, rte_mempool* pool) noexcept {
    return pool == nullptr
               ? nullptr
               : rte_pktmbuf_copy(frame, pool, 0, std::numeric_limits<std::uint32_t>::max());
}

} // namespace

struct FaultInjector::Output {
    rte_mbuf** frames = nullptr;
    std::uint32_t written = 0;
    std::uint32_t room_end = 0; // slots [written, room_end) of frames may be written

    [[nodiscard]] bool room() const noexcept { return written < room_end; }
    void put(rte_mbuf* frame) noexcept { frames[written++] = frame; }
};

bool FaultRates::any() const noexcept {
    return drop > 0 || reorder > 0 || duplicate > 0 || corrupt > 0 || delay > 0;
}

std::uint64_t injector_seed(std::uint64_t device_seed, unsigned group,
                            FaultDirection direction) noexcept {
    // splitmix64 of the device seed, stepped once per (group, direction): neighbouring streams
    // share nothing visible.
    std::uint64_t z = device_seed + default_seed * (1 + (std::uint64_t{group} << 1U) +
                                                    static_cast<std::uint64_t>(direction));
    z = (z ^ (z >> 30U)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27U)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31U);
}

void FaultInjector::HeldQueue::push(const HeldFrame& frame) noexcept {
    entries_[(head_ + count_) % max_held] = frame;
    ++count_;
}

rte_mbuf* FaultInjector::HeldQueue::pop() noexcept {
    rte_mbuf* frame = entries_[head_].mbuf;
    head_ = (head_ + 1) % max_held;
    --count_;
    return frame;
}

FaultInjector::~FaultInjector() {
    release_all();
}

void FaultInjector::configure(const FaultRates& rates, unsigned reorder_depth,
                              std::uint64_t delay_cycles, std::uint64_t seed) noexcept {
    release_all();
    drop_threshold_ = threshold_of(rates.drop);
    corrupt_threshold_ = threshold_of(rates.corrupt);
    duplicate_threshold_ = threshold_of(rates.duplicate);
    reorder_threshold_ = threshold_of(rates.reorder);
    delay_threshold_ = threshold_of(rates.delay);
    active_ = (drop_threshold_ | corrupt_threshold_ | duplicate_threshold_ | reorder_threshold_ |
               delay_threshold_) != 0;
    reorder_depth_ = std::max(reorder_depth, 1U);
    delay_cycles_ = delay_cycles;
    random_state_ = seed != 0 ? seed : default_seed;
    passed_ = 0;
}

void FaultInjector::release_all() noexcept {
    for (HeldQueue* queue : {&reordered_, &delayed_, &spilled_}) {
        while (!queue->empty()) {
            rte_pktmbuf_free(queue->pop());
        }
    }
}

// xorshift64*: fast, a full 2^64 - 1 period from any non-zero state, and good enough for
// choosing frames.
std::uint64_t FaultInjector::next_random() noexcept {
    std::uint64_t x = random_state_;
    x ^= x >> 12U;
    x ^= x << 25U;
    x ^= x >> 27U;
    random_state_ = x;
    return x * 0x2545f4914f6cdd1dULL;
}

// A zero rate draws nothing: a fault that is off costs one compare per frame.
bool FaultInjector::chance(std::uint64_t threshold) noexcept {
    return threshold != 0 && (next_random() >> 11U) < threshold;
}

std::uint16_t FaultInjector::apply(rte_mbuf** frames, std::uint16_t count, std::uint16_t capacity,
                                   std::uint64_t now, rte_mempool* pool,
                                   FaultCounters& counters) noexcept {
    // The new frames move to the end of the array and the output grows from its start: the
    // output can then never overwrite a frame not yet read, and extras use the spare room first.
    const std::uint32_t spare = capacity > count ? capacity - count : 0;
    if (spare > 0) {
        std::copy_backward(frames, frames + count, frames + spare + count); // ranges overlap
    }
    Output out{frames, 0, spare};
    release_due(out, now); // older than anything in this burst
    for (std::uint32_t i = 0; i < count; ++i) {
        rte_mbuf* frame = frames[spare + i];
        ++out.room_end; // its slot is free now
        inject(out, frame, now, pool, counters);
    }
    release_due(out, now);
    return static_cast<std::uint16_t>(out.written);
}

void FaultInjector::inject(Output& out, rte_mbuf* frame, std::uint64_t now, rte_mempool* pool,
                           FaultCounters& counters) noexcept {
    if (chance(drop_threshold_)) {
        rte_pktmbuf_free(frame);
        ++counters.dropped;
        return;
    }
    if (chance(corrupt_threshold_)) {
        frame = corrupt(frame, pool, counters);
    }
    const bool duplicate = chance(duplicate_threshold_);
    const bool reorder = chance(reorder_threshold_);
    const bool delay = !reorder && chance(delay_threshold_);
    // A full store lets the frame through: it is simply not held.
    const bool can_hold = held() < max_held;
    if (reorder && can_hold) {
        reordered_.push({frame, passed_ + reorder_depth_, deadline_after(now, delay_cycles_)});
        ++counters.reordered;
    } else if (delay && can_hold) {
        delayed_.push({frame, 0, deadline_after(now, delay_cycles_)});
        ++counters.delayed;
    } else {
        out.put(frame); // always fits: it takes the slot it was read from, at the latest
        ++passed_;
    }
    if (duplicate) {
        place_duplicate(out, frame, pool, counters);
    }
    release_passed(out);
}

// Flips one bit of a RoCEv2 frame where the ICRC covers it. Returns the frame to go on with:
// `frame` itself, or a private copy when its bytes are shared (then `frame` is released).
rte_mbuf* FaultInjector::corrupt(rte_mbuf* frame, rte_mempool* pool,
                                 FaultCounters& counters) noexcept {
    const std::optional<IcrcCovered> covered = icrc_covered_bytes(frame);
    if (!covered) {
        return frame;
    }
    const std::uint64_t random = next_random();
    const std::uint64_t choices = covered->end - covered->bth_offset - 1; // all but byte 4
    std::uint64_t index = ((random >> 32U) * choices) >> 32U;
    if (index >= bth_masked_byte) {
        ++index;
    }
    const auto offset = static_cast<std::uint32_t>(covered->bth_offset + index);
    std::uint32_t within = offset;
    rte_mbuf* segment = segment_of(frame, within);
    if (!writable(frame, segment)) {
        rte_mbuf* copy = copy_of(frame, pool);
        if (copy == nullptr) {
            ++counters.corrupt_no_mbuf;
            return frame;
        }
        rte_pktmbuf_free(frame);
        frame = copy;
        within = offset;
        segment = segment_of(frame, within);
    }
    *rte_pktmbuf_mtod_offset(segment, std::uint8_t*, within) ^=
        static_cast<std::uint8_t>(1U << (random & 7U));
    ++counters.corrupted;
    return frame;
}

// The copy goes right after the original when the array has room, else it waits in the store;
// with no room in either it is not made at all (nothing to lose, nothing counted).
void FaultInjector::place_duplicate(Output& out, rte_mbuf* frame, rte_mempool* pool,
                                    FaultCounters& counters) noexcept {
    const bool fits = out.room();
    if (!fits && held() >= max_held) {
        return;
    }
    rte_mbuf* copy = copy_of(frame, pool);
    if (copy == nullptr) {
        ++counters.duplicate_no_mbuf;
        return;
    }
    ++counters.duplicated;
    if (fits) {
        out.put(copy);
    } else {
        spilled_.push({copy, 0, 0});
    }
}

void FaultInjector::release_passed(Output& out) noexcept {
    while (!reordered_.empty() && out.room() && reordered_.front().due_pass <= passed_) {
        out.put(reordered_.pop());
    }
}

void FaultInjector::release_due(Output& out, std::uint64_t now) noexcept {
    while (!spilled_.empty() && out.room()) {
        out.put(spilled_.pop());
    }
    while (!reordered_.empty() && out.room() &&
           (reordered_.front().due_pass <= passed_ || reordered_.front().deadline <= now)) {
        out.put(reordered_.pop());
    }
    while (!delayed_.empty() && out.room() && delayed_.front().deadline <= now) {
        out.put(delayed_.pop());
    }
}

} // namespace prdma::swroce
