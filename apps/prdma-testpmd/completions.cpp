// What a forwarding lcore does with each completion: count it against its stream, verify what
// arrived, and give the receive slot back (or, echoing, send the message back first). Errors are
// counted by status; a failed WR still retires the WRs its wr_id covers, so `stop` can drain.
#include <algorithm>

#include <prdma/rdmadev/fastpath.hpp>

#include "fwd_lcore.hpp"
#include "pattern.hpp"

namespace prdma::testpmd {

namespace {

rdma::Sge slot_sge(const Stream& stream, std::uint32_t slot, std::uint32_t length) {
    return {reinterpret_cast<std::uint64_t>(stream.buffer + rx_offset +
                                            std::size_t{slot} * max_message),
            length, stream.lkey};
}

void post_recv_slot(Stream& stream, unsigned index, std::uint32_t slot) {
    const rdma::RecvWr wr = rdma::recv_wr(make_wr_id(index, WrKind::recv, 0, slot),
                                          slot_sge(stream, slot, max_message));
    if (rdma::post_recv(stream.qp, {&wr, 1}) == 1) {
        ++stream.recvs_posted;
    } else {
        ++stream.stats.post_refused;
    }
}

// The message goes back from the slot it arrived in; the slot is posted again once it has gone.
void echo_back(Stream& stream, unsigned index, std::uint32_t slot, std::uint32_t length) {
    const rdma::SendWr wr = rdma::send_wr(make_wr_id(index, WrKind::echo_send, 1, slot),
                                          slot_sge(stream, slot, length));
    if (rdma::post_send(stream.qp, {&wr, 1}) == 1) {
        ++stream.outstanding;
    } else {
        ++stream.stats.post_refused;
        post_recv_slot(stream, index, slot);
    }
}

void on_received(FwdLcore& lc, Stream& stream, unsigned index, const rdma::WorkCompletion& wc) {
    const std::uint32_t slot = wr_value(wc.wr_id);
    --stream.recvs_posted;
    ++stream.stats.rx_ops;
    stream.stats.rx_bytes += wc.byte_len;
    if (!matches_pattern(stream.buffer + rx_offset + std::size_t{slot} * max_message,
                         wc.byte_len)) {
        ++stream.stats.rx_verify_errors;
    }
    if (!stream.enabled) {
        return; // being destroyed: its QP may be gone
    }
    if (lc.echo) {
        echo_back(stream, index, slot, wc.byte_len);
    } else {
        post_recv_slot(stream, index, slot);
    }
}

void retire(Stream& stream, std::uint32_t count) {
    stream.outstanding -= std::min(stream.outstanding, count);
}

void on_completion(FwdLcore& lc, const rdma::WorkCompletion& wc) {
    const unsigned index = wr_slot(wc.wr_id);
    if (index >= lc.stream_count) {
        return;
    }
    Stream& stream = lc.streams[index];
    const WrKind kind = wr_kind(wc.wr_id);
    if (kind == WrKind::control) {
        lc.mailbox.status = wc.status;
        lc.mailbox.state.store(Mailbox::State::done, std::memory_order_release);
        return;
    }
    if (wc.status != rdma::WcStatus::success) {
        ++stream.stats.wc_errors[std::min<std::size_t>(static_cast<std::size_t>(wc.status),
                                                       wc_status_count - 1)];
        if (kind == WrKind::recv) {
            --stream.recvs_posted;
        } else {
            retire(stream, wr_count(wc.wr_id));
        }
        return;
    }
    switch (kind) {
    case WrKind::tx:
        retire(stream, wr_count(wc.wr_id));
        stream.stats.tx_completed += wr_count(wc.wr_id);
        stream.stats.tx_bytes_completed += std::uint64_t{wr_count(wc.wr_id)} * wr_value(wc.wr_id);
        break;
    case WrKind::recv:
        on_received(lc, stream, index, wc);
        break;
    case WrKind::echo_send:
        retire(stream, 1);
        ++stream.stats.echoed;
        if (stream.enabled) {
            post_recv_slot(stream, index, wr_value(wc.wr_id));
        }
        break;
    case WrKind::control:
        break;
    }
}

} // namespace

std::uint16_t poll_completions(FwdLcore& lc) {
    const std::uint16_t count = rdma::poll_cq(lc.cq, lc.wcs);
    for (std::uint16_t i = 0; i < count; ++i) {
        on_completion(lc, lc.wcs[i]);
    }
    return count;
}

void post_missing_recvs(FwdLcore& lc) {
    lc.needs_recvs = false;
    for (unsigned index = 0; index < lc.stream_count; ++index) {
        Stream& stream = lc.streams[index];
        if (!stream.enabled || stream.recvs_posted != 0) {
            continue;
        }
        for (std::uint32_t slot = 0; slot < recv_slots; ++slot) {
            post_recv_slot(stream, index, slot);
        }
    }
}

} // namespace prdma::testpmd
