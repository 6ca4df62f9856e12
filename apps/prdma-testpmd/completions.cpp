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

// A message that arrived in `buffer`, counted and checked against the pattern. A datagram's
// receive holds the GRH first: the message is what follows it (one shorter than a GRH cannot be
// what udsend sent).
void count_received(Stream& stream, const std::uint8_t* buffer, std::uint32_t byte_len) {
    ++stream.stats.rx_ops;
    const std::uint32_t grh = stream.ud ? std::min(byte_len, ud_grh_bytes) : 0;
    stream.stats.rx_bytes += byte_len - grh;
    if ((stream.ud && byte_len < ud_grh_bytes) || !matches_pattern(buffer + grh, byte_len - grh)) {
        ++stream.stats.rx_verify_errors;
    }
}

void on_received(FwdLcore& lc, Stream& stream, unsigned index, const rdma::WorkCompletion& wc) {
    const std::uint32_t slot = wr_value(wc.wr_id);
    --stream.recvs_posted;
    count_received(stream, stream.buffer + rx_offset + std::size_t{slot} * max_message,
                   wc.byte_len);
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

// ---- --srq: the lcore's receive slots, shared by its streams ----

std::uint8_t* srq_slot(const FwdLcore& lc, std::uint32_t slot) {
    return lc.srq_buffer + std::size_t{slot} * max_message;
}

// A refusal is counted against the stream the slot served, when it has one.
bool post_srq_slot(FwdLcore& lc, Stream* stream, std::uint32_t slot) {
    const rdma::RecvWr wr = rdma::recv_wr(
        make_wr_id(0, WrKind::srq_recv, 0, slot),
        {reinterpret_cast<std::uint64_t>(srq_slot(lc, slot)), max_message, lc.srq_lkey});
    if (rdma::post_srq_recv(lc.srq, {&wr, 1}) == 1) {
        return true;
    }
    if (stream != nullptr) {
        ++stream->stats.post_refused;
    }
    return false;
}

// The stream of the QP a receive completion names (an SRQ's completions say which QP took it);
// the newest first, as a destroyed stream keeps its slot and its number.
Stream* stream_of_qpn(FwdLcore& lc, std::uint32_t qpn, unsigned& index) {
    for (unsigned i = lc.stream_count; i-- > 0;) {
        if (lc.streams[i].qpn == qpn) {
            index = i;
            return &lc.streams[i];
        }
    }
    return nullptr;
}

void on_srq_received(FwdLcore& lc, const rdma::WorkCompletion& wc) {
    const std::uint32_t slot = wr_value(wc.wr_id);
    unsigned index = 0;
    Stream* stream = stream_of_qpn(lc, wc.qpn, index);
    // The slot is the lcore's, not the QP's: it goes back whatever became of the QP (a flush
    // included: the QP held it for a SEND it will never finish).
    if (stream == nullptr || wc.status != rdma::WcStatus::success) {
        if (stream != nullptr) {
            ++stream->stats.wc_errors[std::min<std::size_t>(static_cast<std::size_t>(wc.status),
                                                            wc_status_count - 1)];
        }
        (void)post_srq_slot(lc, stream, slot);
        return;
    }
    count_received(*stream, srq_slot(lc, slot), wc.byte_len);
    if (!lc.echo || !stream->enabled) {
        (void)post_srq_slot(lc, stream, slot);
        return;
    }
    const rdma::SendWr wr = rdma::send_wr(
        make_wr_id(index, WrKind::srq_echo_send, 1, slot),
        {reinterpret_cast<std::uint64_t>(srq_slot(lc, slot)), wc.byte_len, lc.srq_lkey});
    if (rdma::post_send(stream->qp, {&wr, 1}) == 1) {
        ++stream->outstanding;
    } else {
        ++stream->stats.post_refused;
        (void)post_srq_slot(lc, stream, slot);
    }
}

void on_completion(FwdLcore& lc, const rdma::WorkCompletion& wc) {
    const WrKind kind = wr_kind(wc.wr_id);
    if (kind == WrKind::srq_recv) {
        on_srq_received(lc, wc);
        return;
    }
    const unsigned index = wr_slot(wc.wr_id);
    if (index >= lc.stream_count) {
        return;
    }
    Stream& stream = lc.streams[index];
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
        if (kind == WrKind::srq_echo_send) {
            (void)post_srq_slot(lc, &stream, wr_value(wc.wr_id)); // the slot comes back either way
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
    case WrKind::srq_echo_send:
        retire(stream, 1);
        ++stream.stats.echoed;
        (void)post_srq_slot(lc, &stream, wr_value(wc.wr_id));
        break;
    case WrKind::control:
    case WrKind::srq_recv:
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
        if (lc.use_srq) {
            // The first stream connected fills the SRQ once; the others share what it holds (and
            // the next connect goes on with what it refused).
            while (stream.enabled && lc.srq_fill_next < srq_slots &&
                   post_srq_slot(lc, &stream, lc.srq_fill_next)) {
                ++lc.srq_fill_next;
            }
            continue;
        }
        if (!stream.enabled || stream.recvs_posted != 0) {
            continue;
        }
        for (std::uint32_t slot = 0; slot < recv_slots; ++slot) {
            post_recv_slot(stream, index, slot);
        }
    }
}

} // namespace prdma::testpmd
