// Headers with every field set to a value of its own, for the builder and parser tests: a frame
// built from them shows any field dropped, swapped or misplaced.
#pragma once

#include <prdma/roce/packet.hpp>

namespace prdma::roce {

inline FrameHeaders sample_headers(Opcode opcode, IpVersion version = IpVersion::ipv4,
                                   bool vlan = false) {
    FrameHeaders h;
    h.eth.dst = {0x02, 0, 0, 0, 0, 0x11};
    h.eth.src = {0x02, 0, 0, 0, 0, 0x12};
    h.eth.vlan = vlan;
    h.eth.vlan_tci = 0x6064;
    h.ip_version = version;
    h.ipv4.tos = make_tos(26, 2);
    h.ipv4.identification = 0x1234;
    h.ipv4.src = 0x0a000001;
    h.ipv4.dst = 0x0a000002;
    h.ipv6.traffic_class = 0x68;
    h.ipv6.flow_label = 0xbeef5;
    h.ipv6.hop_limit = 17;
    h.ipv6.src = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    h.ipv6.dst = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    h.udp_src_port = 0xc0de;
    h.bth.opcode = opcode;
    h.bth.solicited = true;
    h.bth.pkey = 0x8001;
    h.bth.dest_qp = 0x123456;
    h.bth.ack_req = true;
    h.bth.psn = 0xfffffe;
    h.reth = {0x7f0000001000, 0xabcd0102, 5000};
    h.aeth = {rnr_nak_syndrome(14), 0x654321};
    h.atomic_eth = {0x7f0000002008, 0x11223344, 0x0102030405060708, 0x1112131415161718};
    h.atomic_ack_eth = {0xfedcba9876543210};
    h.deth = {0x11111111, 0x000abc};
    h.immediate = 0xcafef00d;
    h.invalidate_rkey = 0x00000954;
    return h;
}

} // namespace prdma::roce
