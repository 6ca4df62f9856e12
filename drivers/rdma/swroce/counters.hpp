// What a queue group counted (written by its polling thread only) and why frames or requests
// were refused. One table names every counter, so the stats query, the sum over groups and
// telemetry cannot drift apart.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "fault_injection.hpp"

namespace prdma::swroce {

// Why the responder refused a request: each reason is counted, and each answers with the IBTA NAK
// named beside it (or none, for a gap already NAKed).
enum class ResponderError : std::uint8_t {
    psn_sequence,       // a PSN past the expected one: sequence-error NAK
    receiver_not_ready, // SEND / WRITE_WITH_IMM with no receive posted: RNR NAK
    op_sequence,        // MIDDLE/LAST without FIRST, FIRST inside a message, class mismatch
    length,             // FIRST/MIDDLE not one MTU, LAST/ONLY beyond it or not ending the RETH
    opcode,             // an opcode an RC responder does not take
    misaligned_atomic,  // atomics are 8-byte aligned
    remote_access,      // rkey, PD, access, bounds or connection refused (remote-access NAK)
    qp_access,          // the QP does not grant the remote access asked for
    receive_too_short,  // the SEND is longer than the posted receive (local length error)
    invalidate,         // SEND_WITH_INV of a key that is not ours to invalidate
    region_gone,        // the region of a WRITE/READ in progress was deregistered or invalidated
    bad_duplicate,      // a duplicate READ/atomic that does not repeat its request: dropped
    count_,
};
inline constexpr std::size_t responder_error_count =
    static_cast<std::size_t>(ResponderError::count_);

struct SwroceCounters {
    std::uint64_t rx_packets = 0;
    std::uint64_t tx_packets = 0;
    std::uint64_t rx_bad_frame = 0; // failed lib/roce parsing (bad ICRC included)
    std::uint64_t rx_bad_icrc = 0;
    std::uint64_t rx_unknown_qp = 0;
    std::uint64_t rx_wrong_transport = 0; // UD opcodes to an RC QP, or RC ones to a UD QP
    std::uint64_t rx_wrong_source = 0;    // not from the QP's connected peer
    std::uint64_t rx_qkey_violations = 0; // UD SENDs whose Q_Key is not the QP's: dropped
    std::uint64_t rx_ud_dropped = 0;      // UD SENDs with no receive posted, or to a QP in ERR
    std::uint64_t rx_ud_too_long = 0;     // UD SENDs longer than the receive (local length error)
    std::uint64_t rx_bad_ack = 0;         // an ACK/response for a PSN never sent
    std::uint64_t duplicates = 0;
    std::uint64_t kept_past_gap = 0; // requests kept behind a missing one instead of dropped
    std::uint64_t naks_sent = 0;
    std::uint64_t naks_received = 0;
    std::uint64_t retransmissions = 0; // go-back-N restarts, whatever the cause
    std::uint64_t timeouts = 0;        // of them, transport timer expiries
    std::uint64_t probes = 0;          // of them, stalls resent before the transport timer
    // Not restarts: packets a selective-repeat peer NAKed, resent alone.
    std::uint64_t selective_resends = 0;
    // Not restarts: lost READ responses and atomic ACKs asked for again by themselves.
    std::uint64_t read_repairs = 0;
    std::uint64_t tx_no_mbuf = 0;
    FaultCounters rx_faults; // what the fault devargs did to received frames
    FaultCounters tx_faults; // ... and to transmitted ones
    std::uint64_t arp_requests_sent = 0;
    std::uint64_t arp_replies_sent = 0;
    std::uint64_t arp_resolved = 0;
    std::uint64_t arp_failed = 0;
    std::array<std::uint64_t, 8> arp_errors{}; // by ArpError
    std::uint64_t nd_solicitations_sent = 0;
    std::uint64_t nd_advertisements_sent = 0;
    std::uint64_t nd_resolved = 0;
    std::uint64_t nd_failed = 0;
    // Another host claims our address: an ARP from another MAC with our IP, a DAD probe for it.
    std::uint64_t address_conflicts = 0;
    std::array<std::uint64_t, 16> nd_errors{}; // by NdError
    std::uint64_t rx_not_handled = 0;          // frames neither ARP, ND nor RoCE
    std::uint64_t tx_dropped = 0;              // frames the port did not take, lost
    std::uint64_t tx_deferred = 0;             // ... kept in the backlog for the next progress
    std::uint64_t steering_misses = 0;         // frames for another group's QP, handed over
    std::uint64_t handover_dropped = 0;        // ... when that group's handover ring was full
    std::uint64_t events_dropped = 0;          // QP events lost to a full event ring
    std::array<std::uint64_t, responder_error_count> responder_errors{};

    [[nodiscard]] std::uint64_t& responder(ResponderError reason) noexcept {
        return responder_errors[static_cast<std::size_t>(reason)];
    }
};

// Calls `visit(name, c.member...)` for every counter, the same member of each of `c...` side by
// side (one set to list, two to add up), in the order the stats query lists them.
template <typename Visit, typename... Counters>
void for_each_counter(Visit&& visit, Counters&... c) {
    visit("rx_packets", c.rx_packets...);
    visit("tx_packets", c.tx_packets...);
    visit("rx_bad_frame", c.rx_bad_frame...);
    visit("rx_bad_icrc", c.rx_bad_icrc...);
    visit("rx_unknown_qp", c.rx_unknown_qp...);
    visit("rx_wrong_transport", c.rx_wrong_transport...);
    visit("rx_wrong_source", c.rx_wrong_source...);
    visit("rx_qkey_violations", c.rx_qkey_violations...);
    visit("rx_ud_dropped", c.rx_ud_dropped...);
    visit("rx_ud_too_long", c.rx_ud_too_long...);
    visit("rx_bad_ack", c.rx_bad_ack...);
    visit("rx_not_handled", c.rx_not_handled...);
    visit("rx_dropped_injected", c.rx_faults.dropped...);
    visit("rx_reordered_injected", c.rx_faults.reordered...);
    visit("rx_duplicated_injected", c.rx_faults.duplicated...);
    visit("rx_corrupted_injected", c.rx_faults.corrupted...);
    visit("rx_delayed_injected", c.rx_faults.delayed...);
    visit("tx_dropped_injected", c.tx_faults.dropped...);
    visit("tx_reordered_injected", c.tx_faults.reordered...);
    visit("tx_duplicated_injected", c.tx_faults.duplicated...);
    visit("tx_corrupted_injected", c.tx_faults.corrupted...);
    visit("tx_delayed_injected", c.tx_faults.delayed...);
    visit("duplicates", c.duplicates...);
    visit("kept_past_gap", c.kept_past_gap...);
    visit("naks_sent", c.naks_sent...);
    visit("naks_received", c.naks_received...);
    visit("retransmissions", c.retransmissions...);
    visit("timeouts", c.timeouts...);
    visit("probes", c.probes...);
    visit("selective_resends", c.selective_resends...);
    visit("read_repairs", c.read_repairs...);
    visit("tx_no_mbuf", c.tx_no_mbuf...);
    visit("tx_dropped", c.tx_dropped...);
    visit("tx_deferred", c.tx_deferred...);
    visit("steering_misses", c.steering_misses...);
    visit("handover_dropped", c.handover_dropped...);
    visit("events_dropped", c.events_dropped...);
    visit("arp_requests_sent", c.arp_requests_sent...);
    visit("arp_replies_sent", c.arp_replies_sent...);
    visit("arp_resolved", c.arp_resolved...);
    visit("arp_failed", c.arp_failed...);
    visit("nd_solicitations_sent", c.nd_solicitations_sent...);
    visit("nd_advertisements_sent", c.nd_advertisements_sent...);
    visit("nd_resolved", c.nd_resolved...);
    visit("nd_failed", c.nd_failed...);
    visit("address_conflicts", c.address_conflicts...);
    // Frames the resolvers dropped, by reason (ArpError, NdError, index 0 being ok; "not ARP" and
    // "not ND" frames go on to the RoCE parser and are counted there), and the responder's
    // refusals by ResponderError: one counter per named reason.
    const auto by_reason = [&](const auto& names, auto member) {
        for (std::size_t i = 0; i < names.size(); ++i) {
            if (!names[i].empty()) {
                visit(names[i], (c.*member)[i]...);
            }
        }
    };
    static constexpr std::array<std::string_view, 8> arp_errors = {"",
                                                                   "arp_rx_too_short",
                                                                   "",
                                                                   "arp_rx_bad_hardware_type",
                                                                   "arp_rx_bad_protocol_type",
                                                                   "arp_rx_bad_address_length",
                                                                   "arp_rx_unknown_op",
                                                                   "arp_rx_bad_sender_mac"};
    by_reason(arp_errors, &SwroceCounters::arp_errors);
    static constexpr std::array<std::string_view, 12> nd_errors = {"",
                                                                   "nd_rx_too_short",
                                                                   "",
                                                                   "nd_rx_bad_hop_limit",
                                                                   "nd_rx_bad_code",
                                                                   "nd_rx_bad_length",
                                                                   "nd_rx_bad_checksum",
                                                                   "nd_rx_bad_target",
                                                                   "nd_rx_bad_option",
                                                                   "nd_rx_bad_source",
                                                                   "nd_rx_bad_link_address",
                                                                   "nd_rx_solicited_to_multicast"};
    by_reason(nd_errors, &SwroceCounters::nd_errors);
    static constexpr std::array<std::string_view, responder_error_count> reasons = {
        "resp_psn_sequence",
        "resp_receiver_not_ready",
        "resp_op_sequence",
        "resp_length",
        "resp_opcode",
        "resp_misaligned_atomic",
        "resp_remote_access",
        "resp_qp_access",
        "resp_receive_too_short",
        "resp_invalidate",
        "resp_region_gone",
        "resp_bad_duplicate"};
    by_reason(reasons, &SwroceCounters::responder_errors);
}

} // namespace prdma::swroce
