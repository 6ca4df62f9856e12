// post_tx: the send side every generator engine shares (write, read, send, atomic, mixed, udsend).
// A burst never outgrows the send queue's room, so the queue never refuses for being full; every
// `signal_every`-th WR and the last of each burst is signaled, and its completion covers the
// unsignaled ones before it (a send queue completes in order, RC's and UD's alike).
#include <algorithm>

#include <prdma/rdmadev/fastpath.hpp>

#include "fwd_lcore.hpp"

namespace prdma::testpmd {

namespace {

// udsend: the stream's next destination, round-robin over every peer QP the lcore knows.
void address(rdma::SendWr& wr, const FwdLcore& lc, Stream& stream) {
    const UdDest& dest = lc.ud_dests[stream.next_dest];
    stream.next_dest = stream.next_dest + 1 >= lc.ud_dest_count ? 0 : stream.next_dest + 1;
    wr.ud = {.ah = dest.ah, .remote_qpn = dest.qpn, .remote_qkey = ud_qkey};
}

void fill(rdma::SendWr& wr, const Stream& stream, rdma::WrOpcode opcode, std::uint32_t size,
          std::uint32_t inline_size) {
    wr.opcode = opcode;
    wr.num_sge = 1;
    wr.flags = {};
    wr.sg_list = nullptr;
    const bool atomic = opcode == rdma::WrOpcode::atomic_fetch_add;
    const std::size_t local = opcode == rdma::WrOpcode::rdma_read ? rdma_offset
                              : atomic                            ? atomic_result_offset
                                                                  : tx_offset;
    wr.sge = {reinterpret_cast<std::uint64_t>(stream.buffer + local), size, stream.lkey};
    if (atomic) {
        wr.atomic = {.remote_addr = stream.remote_addr + rdma_offset,
                     .compare_add = 1,
                     .swap = 0,
                     .rkey = stream.rkey};
    } else if (opcode != rdma::WrOpcode::send) {
        wr.rdma = {.remote_addr = stream.remote_addr + rdma_offset, .rkey = stream.rkey};
    }
    if (opcode != rdma::WrOpcode::rdma_read && !atomic && size <= inline_size) {
        wr.flags |= rdma::send_inline;
    }
}

// After a partial post: the taken WRs after the last taken signaled one are still to be covered.
std::uint32_t unsignaled_tail(const FwdLcore& lc, std::uint16_t taken, std::uint32_t before) {
    std::uint32_t tail = before;
    for (std::uint16_t i = 0; i < taken; ++i) {
        tail = lc.wrs[i].flags.has(rdma::SendFlag::signaled) ? 0 : tail + 1;
    }
    return tail;
}

} // namespace

void post_tx(FwdLcore& lc, Stream& stream, rdma::WrOpcode opcode) {
    const FwdConfig& config = lc.config;
    const std::uint32_t room = stream.send_depth - std::min(stream.send_depth, stream.outstanding);
    const auto count = static_cast<std::uint16_t>(std::min({room, config.burst, max_burst}));
    if (count == 0) {
        return;
    }
    const std::uint32_t size = opcode == rdma::WrOpcode::atomic_fetch_add ? 8 : config.size;
    const std::uint32_t before = stream.unsignaled;
    const auto slot = static_cast<unsigned>(&stream - lc.streams.data());
    for (std::uint16_t i = 0; i < count; ++i) {
        rdma::SendWr& wr = lc.wrs[i];
        fill(wr, stream, opcode, size, config.inline_size);
        ++stream.unsignaled;
        if (stream.unsignaled >= config.signal_every || i + 1 == count) {
            wr.flags |= rdma::send_signaled;
            wr.wr_id = make_wr_id(slot, WrKind::tx, stream.unsignaled, size);
            stream.unsignaled = 0;
        } else {
            wr.wr_id = make_wr_id(slot, WrKind::tx, 0, size);
        }
    }
    if (stream.ud) {
        for (std::uint16_t i = 0; i < count; ++i) {
            address(lc.wrs[i], lc, stream);
        }
    }
    const std::uint16_t taken = rdma::post_send(stream.qp, {lc.wrs.data(), count});
    if (taken < count) {
        stream.stats.post_refused += count - taken;
        stream.unsignaled = unsignaled_tail(lc, taken, before);
    }
    stream.outstanding += taken;
    stream.stats.tx_posted += taken;
    stream.stats.tx_bytes += std::uint64_t{taken} * size;
}

} // namespace prdma::testpmd
