// One QP as a forwarding lcore drives it (testpmd's fwd_stream): its queue, its buffer and the
// peer's, its send-window bookkeeping and its counters. Everything here is written by the lcore
// that owns the stream; the main lcore writes a stream only while that lcore is parked.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <prdma/rdmadev/queue_handle.hpp>
#include <prdma/rdmadev/work_request.hpp>

namespace prdma::testpmd {

// The largest message `set size` accepts, and the layout of every QP's buffer: the bytes SENDs
// and WRITEs go out from, the area the peer's WRITEs, READs and atomics use, then the receive
// slots (one message each).
inline constexpr std::uint32_t max_message = 64 * 1024;
inline constexpr std::uint32_t recv_slots = 64;
inline constexpr std::size_t tx_offset = 0;
inline constexpr std::size_t rdma_offset = max_message;
inline constexpr std::size_t atomic_result_offset = rdma_offset + max_message - 8;
inline constexpr std::size_t rx_offset = 2 * std::size_t{max_message};
inline constexpr std::size_t qp_buffer_size = rx_offset + recv_slots * std::size_t{max_message};
// With --srq, the receive slots are the lcore's, one buffer for every QP on its SRQ.
inline constexpr std::uint32_t srq_slots = 128;
inline constexpr std::size_t srq_buffer_size = srq_slots * std::size_t{max_message};

enum class EngineKind : std::uint8_t { write, read, send, atomic, echo, rxonly, mixed, udsend };

// --qp-type ud: the Q_Key every UD QP of both sides has and its datagrams carry (perftest's), and
// the GRH a UD receive holds ahead of the message.
inline constexpr std::uint32_t ud_qkey = 0x11111111;
inline constexpr std::uint32_t ud_grh_bytes = 40;

// What each completion is about, carried in its wr_id with the stream's slot (see make_wr_id).
// srq_recv and srq_echo_send name a slot of the lcore's SRQ buffer, not of the stream's.
enum class WrKind : std::uint8_t { tx, recv, echo_send, control, srq_recv, srq_echo_send };

// wr_id = slot (16 bits) | kind (8) | count (20) | value (20): a tx completion covers `count`
// WRs of `value` bytes each (unsignaled ones before it included); a receive names its slot.
constexpr std::uint64_t make_wr_id(unsigned stream_index, WrKind kind, std::uint32_t count,
                                   std::uint32_t value) noexcept {
    return (std::uint64_t{stream_index} << 48) |
           (std::uint64_t{static_cast<std::uint8_t>(kind)} << 40) |
           (std::uint64_t{count & 0xfffffU} << 20) | (value & 0xfffffU);
}
constexpr unsigned wr_slot(std::uint64_t id) noexcept {
    return static_cast<unsigned>(id >> 48);
}
constexpr WrKind wr_kind(std::uint64_t id) noexcept {
    return static_cast<WrKind>((id >> 40) & 0xffU);
}
constexpr std::uint32_t wr_count(std::uint64_t id) noexcept {
    return static_cast<std::uint32_t>((id >> 20) & 0xfffffU);
}
constexpr std::uint32_t wr_value(std::uint64_t id) noexcept {
    return static_cast<std::uint32_t>(id & 0xfffffU);
}

inline constexpr std::size_t wc_status_count = 14; // WcStatus::success .. general_error

struct StreamStats {
    std::uint64_t tx_posted = 0;
    std::uint64_t tx_bytes = 0;
    std::uint64_t tx_completed = 0;
    std::uint64_t tx_bytes_completed = 0;
    std::uint64_t rx_ops = 0;
    std::uint64_t rx_bytes = 0;
    std::uint64_t rx_verify_errors = 0;
    std::uint64_t echoed = 0;
    std::uint64_t post_refused = 0; // WRs the QP did not take (post_error says why)
    std::array<std::uint64_t, wc_status_count> wc_errors{};
    // The device's counts for the QP (QueuePair::query_status), which the session reads; the
    // lcore never writes them.
    std::uint64_t retransmissions = 0;
    std::uint64_t timeouts = 0;

    StreamStats& operator-=(const StreamStats& base) noexcept;
    StreamStats& operator+=(const StreamStats& more) noexcept;
    [[nodiscard]] std::uint64_t errors() const noexcept;
};

// The data-path handles, default-constructible (rdmadev's are only copied from a QueuePair or
// CompletionQueue) so streams and lcores can sit in fixed arrays.
template <typename Queue>
struct QueueSlot : Queue {
    QueueSlot() = default;
    QueueSlot& operator=(const Queue& queue) {
        Queue::operator=(queue);
        return *this;
    }
};
using StreamQp = QueueSlot<rdma::QpQueue>;
using LcoreCq = QueueSlot<rdma::CqQueue>;
using LcoreSrq = QueueSlot<rdma::SrqQueue>;

struct Stream {
    StreamQp qp;
    std::uint32_t qpn = 0; // what its receive completions name (the SRQ's are the lcore's)
    unsigned qp_index = 0; // the session's QP number (`show qp N`)
    std::uint8_t* buffer = nullptr;
    std::uint32_t lkey = 0;
    std::uint64_t remote_addr = 0; // the peer's buffer, as its descriptor gave it
    std::uint32_t rkey = 0;
    EngineKind kind = EngineKind::write; // what the QP does under `mixed`
    bool enabled = false;                // connected and not being destroyed
    bool ud = false;                     // a UD QP: udsend and rxonly only
    std::uint32_t next_dest = 0;         // udsend: the lcore's destination its next SEND goes to
    std::uint32_t send_depth = 0;
    std::uint32_t outstanding = 0; // send WRs posted and not yet covered by a completion
    std::uint32_t unsignaled = 0;  // posted since the last signaled one
    std::uint32_t recvs_posted = 0;
    StreamStats stats;
};

} // namespace prdma::testpmd
