// QPs: created on the lcores round-robin (QP n on lcore n % lcores, its CQ and queue group),
// connected over the peer channel or from a pasted descriptor, destroyed. The lcore learns of a
// stream while parked; its QP's control requests go through that lcore's queue group, so the
// lcore keeps polling while the main lcore waits for them.
#include <cstdio>
#include <cstring>

#include <prdma/format.hpp>

#include "pattern.hpp"
#include "session.hpp"

namespace prdma::testpmd {

namespace {

constexpr std::uint32_t kind_qp = 1;
constexpr std::uint32_t kind_sync = 2;
constexpr std::uint32_t kind_ud_qp = 3; // a peer of the other QP type fails the exchange
constexpr std::uint32_t send_depth = 256;

std::string to_hex(std::span<const std::uint8_t> bytes) {
    std::string hex;
    for (const std::uint8_t b : bytes) {
        hex += strformat("%02x", b);
    }
    return hex;
}

Result<std::vector<std::uint8_t>> from_hex(std::string_view hex) {
    if (hex.size() % 2 != 0) {
        return Error(StatusCode::invalid_parameter, "a descriptor is an even number of hex digits");
    }
    const auto digit = [](char c) -> int {
        if (c >= '0' && c <= '9') {
            return c - '0';
        }
        if (c >= 'a' && c <= 'f') {
            return c - 'a' + 10;
        }
        return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    };
    std::vector<std::uint8_t> bytes;
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        const int high = digit(hex[i]);
        const int low = digit(hex[i + 1]);
        if (high < 0 || low < 0) {
            return Error(StatusCode::invalid_parameter,
                         strformat("'%.*s' is not hex (paste what `show qp N descriptor` printed)",
                                   2, hex.data() + i));
        }
        bytes.push_back(static_cast<std::uint8_t>(high * 16 + low));
    }
    return bytes;
}

} // namespace

Status Session::create_qp() {
    if (Status stopped = check_stopped("create qp"); !stopped) {
        return stopped;
    }
    const auto index = static_cast<unsigned>(qps_.size());
    const unsigned lcore_index = index % static_cast<unsigned>(lcores_.size());
    FwdLcore& lcore = *lcores_[lcore_index];
    if (lcore.stream_count == max_streams_per_lcore) {
        return Error(StatusCode::no_resources, strformat("lcore %u has %u QPs, its most",
                                                         lcore.lcore_id, max_streams_per_lcore));
    }
    auto entry = std::make_unique<QpEntry>();
    rdma::QpInitAttr init{.pd = &pd_, .send_cq = &cqs_[lcore_index], .recv_cq = &cqs_[lcore_index]};
    init.type = config_.ud ? rdma::QpType::ud : rdma::QpType::rc;
    init.caps.max_send_wr = send_depth + 8; // room for the mailbox's WRs
    init.caps.max_recv_wr = recv_slots;
    init.caps.max_inline_data = max_inline_;
    if (!srqs_.empty()) {
        // Receives come from the lcore's SRQ: the QP has no receive queue of its own.
        init.srq = &srqs_[lcore_index];
    }
    const std::uint64_t id = next_request();
    Result<rdma::QueuePair> qp = context_->create_qp(init, id);
    if (!qp) {
        return qp.error();
    }
    entry->qp = std::move(qp.value());
    if (!entry->qp.ready()) {
        if (Status created = await(id); !created) {
            return created;
        }
    }
    Result<mem::DmaBuffer> buffer = mem::DmaBuffer::allocate(qp_buffer_size, 4096);
    if (!buffer) {
        return buffer.error();
    }
    entry->buffer.emplace(std::move(buffer.value()));
    std::memcpy(entry->buffer->data(), message_pattern().data(), max_message);
    Result<rdma::MemoryRegionHandle> mr =
        pd_.register_memory(entry->buffer->data(), entry->buffer->size(),
                            mem::access_local_write | mem::access_remote_write |
                                mem::access_remote_read | mem::access_remote_atomic);
    if (!mr) {
        return mr.error();
    }
    entry->mr = std::move(mr.value());
    entry->lcore = lcore_index;
    if (Status parked = park(lcore); !parked) {
        return parked;
    }
    entry->slot = lcore.stream_count;
    Stream& stream = lcore.streams[entry->slot];
    stream = Stream{};
    stream.qp = entry->qp;
    stream.qpn = entry->qp.qpn();
    stream.qp_index = index;
    stream.buffer = static_cast<std::uint8_t*>(entry->buffer->data());
    stream.lkey = entry->mr.lkey();
    stream.kind = mix_[index % mix_.size()];
    stream.send_depth = send_depth;
    stream.ud = config_.ud;
    ++lcore.stream_count;
    resume(lcore);
    std::printf("QP %u created: qpn 0x%06x on lcore %u (queue group %u)\n", index, entry->qp.qpn(),
                lcore.lcore_id, lcore.group);
    qps_.push_back(std::move(entry));
    return {};
}

Status Session::set_qps(unsigned count) {
    if (Status stopped = check_stopped("set qps"); !stopped) {
        return stopped;
    }
    unsigned live = 0;
    for (const auto& qp : qps_) {
        live += qp ? 1 : 0;
    }
    for (; live < count; ++live) {
        if (Status made = create_qp(); !made) {
            return made;
        }
    }
    for (std::size_t i = qps_.size(); i > 0 && live > count; --i) {
        if (qps_[i - 1]) {
            if (Status gone = destroy_qp(static_cast<unsigned>(i - 1)); !gone) {
                return gone;
            }
            --live;
        }
    }
    return {};
}

Status Session::connect_with(unsigned index, const rdma::ConnectionDescriptor& peer) {
    QpEntry& entry = *qps_[index];
    if (entry.qp.state() != rdma::QpState::reset) {
        return Error(StatusCode::invalid_parameter,
                     "the QP is connected already (`destroy qp N` and `create qp` for a new one)");
    }
    std::array<std::uint8_t, sizeof(rdma::ConnectionDescriptor)> bytes{};
    auto length = static_cast<std::uint32_t>(bytes.size());
    if (Status ok = entry.qp.export_connection(nullptr, bytes.data(), &length); !ok) {
        return ok;
    }
    Result<rdma::ConnectionDescriptor> mine = rdma::import_connection(bytes.data(), length);
    if (!mine) {
        return mine.error();
    }
    if (!config_.ud) {
        if (Status up = bring_up(entry, peer, mine->psn); !up) {
            return up;
        }
    } else {
        // The address first: a QP in RTS that could not be given its destination would be
        // neither usable nor connectable again.
        Result<void*> ah = ah_for(peer);
        if (!ah) {
            return ah.error();
        }
        if (Status up = bring_up_ud(entry, mine->psn); !up) {
            return up;
        }
        if (Status added = add_ud_dest(*ah, peer.qpn); !added) {
            return added;
        }
    }
    entry.peer = peer;
    FwdLcore& lcore = *lcores_[entry.lcore];
    if (Status parked = park(lcore); !parked) {
        return parked;
    }
    Stream& stream = lcore.streams[entry.slot];
    stream.remote_addr = peer.address;
    stream.rkey = peer.rkey;
    stream.enabled = true;
    lcore.needs_recvs = true;
    resume(lcore);
    std::printf("QP %u connected: qpn 0x%06x <-> peer qpn 0x%06x, peer buffer 0x%llx rkey 0x%08x\n",
                index, entry.qp.qpn(), peer.qpn, static_cast<unsigned long long>(peer.address),
                peer.rkey);
    return {};
}

Result<std::string> Session::qp_descriptor(unsigned index) const {
    if (Status known = check_qp(index, false); !known) {
        return known.error();
    }
    std::array<std::uint8_t, sizeof(rdma::ConnectionDescriptor)> bytes{};
    auto length = static_cast<std::uint32_t>(bytes.size());
    if (Status exported =
            qps_[index]->qp.export_connection(&qps_[index]->mr, bytes.data(), &length);
        !exported) {
        return exported.error();
    }
    return to_hex({bytes.data(), length});
}

Status Session::connect_qp(unsigned index) {
    if (Status ok = check_stopped("connect qp"); !ok) {
        return ok;
    }
    if (Status ok = check_qp(index, false); !ok) {
        return ok;
    }
    std::array<std::uint8_t, sizeof(rdma::ConnectionDescriptor)> mine{};
    std::array<std::uint8_t, sizeof(rdma::ConnectionDescriptor)> theirs{};
    auto length = static_cast<std::uint32_t>(mine.size());
    if (Status ok = qps_[index]->qp.export_connection(&qps_[index]->mr, mine.data(), &length);
        !ok) {
        return ok;
    }
    if (!peer_->connected()) {
        std::printf("Peer channel: %s\n", peer_->describe().c_str());
    }
    if (Status ok = peer_->exchange(config_.ud ? kind_ud_qp : kind_qp, index, {mine.data(), length},
                                    {theirs.data(), length});
        !ok) {
        return ok;
    }
    Result<rdma::ConnectionDescriptor> peer = rdma::import_connection(theirs.data(), length);
    if (!peer) {
        return peer.error();
    }
    return connect_with(index, *peer);
}

Status Session::connect_all() {
    for (std::size_t i = 0; i < qps_.size(); ++i) {
        if (qps_[i] && !qps_[i]->peer) {
            if (Status ok = connect_qp(static_cast<unsigned>(i)); !ok) {
                return ok;
            }
        }
    }
    return {};
}

Status Session::connect_qp_from(unsigned index, std::string_view hex) {
    if (Status ok = check_stopped("connect qp"); !ok) {
        return ok;
    }
    if (Status ok = check_qp(index, false); !ok) {
        return ok;
    }
    Result<std::vector<std::uint8_t>> bytes = from_hex(hex);
    if (!bytes) {
        return bytes.error();
    }
    Result<rdma::ConnectionDescriptor> peer =
        rdma::import_connection(bytes->data(), static_cast<std::uint32_t>(bytes->size()));
    if (!peer) {
        return peer.error();
    }
    return connect_with(index, *peer);
}

Status Session::destroy_qp(unsigned index) {
    if (Status ok = check_stopped("destroy qp"); !ok) {
        return ok;
    }
    if (Status ok = check_qp(index, false); !ok) {
        return ok;
    }
    QpEntry& entry = *qps_[index];
    FwdLcore& lcore = *lcores_[entry.lcore];
    // The lcore stops posting to it before it goes; flushed completions are still counted.
    if (Status parked = park(lcore); !parked) {
        return parked;
    }
    lcore.streams[entry.slot].enabled = false;
    resume(lcore);
    const std::uint64_t id = next_request();
    if (Status gone = await_if_pending(entry.qp.destroy(id), id); !gone) {
        return gone;
    }
    // Its stream slot stays, disabled, with its counters: completions still in the CQ are
    // counted there, and a disabled stream never touches its QP again.
    const std::uint64_t mr_id = next_request();
    (void)await_if_pending(entry.mr.deregister(mr_id), mr_id);
    qps_[index].reset();
    std::printf("QP %u destroyed\n", index);
    return {};
}

Status Session::sync_peer() {
    std::array<std::uint8_t, 1> mine{'s'};
    std::array<std::uint8_t, 1> theirs{};
    return peer_->exchange(kind_sync, 0, mine, theirs);
}

} // namespace prdma::testpmd
