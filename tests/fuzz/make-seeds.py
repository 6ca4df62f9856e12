#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses from packet captures.

    make-seeds.py OUT_DIR CAPTURE...

CAPTURE is a pcap or pcapng file of RoCEv2 frames: the reference captures in
tests/data/roce-pcaps (Linux rxe), and captures of prdma's own frames (swroce's pcap= devarg;
tests/fuzz/README.md says how they were made). For each capture it writes

  OUT_DIR/frame_parser/<capture>-<opcode>   the first frame of each opcode, as captured (once
                                            over rxe's captures, once per capture of prdma's)
  OUT_DIR/responder/<capture>-requests      its requests (SEND, WRITE, READ, atomics), receives
                                            posted, as one responder input
  OUT_DIR/responder/<capture>-responses     its ACKs and responses, with the harness's requester
                                            work outstanding (responder_rig.cpp)

A responder input is the configuration byte and length-prefixed frames (responder_input.hpp).
Its frames are normalised to what the harness rewrites relative to: PSNs count from the first
frame's, RETH/AtomicETH addresses are offsets
from the lowest one (16 bits at most), R_Keys are 0 (the read-write
region). Captures whose name starts with "swroce" (prdma's own) also get the whole conversation,
and their requests polled after every frame and arriving on the second queue group.

Made here and added: requests aimed at the edges of the harness's regions (EDGES, one per input),
an ARP request and reply (the device answers requests for its address), and an IPv6 neighbour
solicitation and advertisement.
"""

import os
import struct
import sys

ROCE_PORT = 4791
RETH_OPCODES = {0x06, 0x0A, 0x0B, 0x0C}  # WRITE first / only / only+imm, READ request
ATOMIC_OPCODES = {0x13, 0x14}
# Configuration bytes (responder_input.hpp): PSN base 1000, MTU 1024, and
REQUESTS_CONFIG = 0x08  # receives posted: the capture's requests go to the responder
RESPONSES_CONFIG = 0x0C  # and requester work outstanding: its ACKs and responses to the completer
POLL_EACH = 0x40
SECOND_QUEUE = 0x20  # frame flag: arrives on queue group 1, handed over to the QP's group 0
RESPONSE_OPCODES = set(range(0x0D, 0x13))  # READ responses, ACK, atomic ACK
MAX_FRAMES = 24


def read_pcap(data):
    magic = struct.unpack_from("<I", data)[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    at = 24
    while at + 16 <= len(data):
        incl = struct.unpack_from(endian + "I", data, at + 8)[0]
        yield data[at + 16 : at + 16 + incl]
        at += 16 + incl


def read_pcapng(data):
    at = 0
    endian = "<"
    while at + 12 <= len(data):
        block_type = struct.unpack_from(endian + "I", data, at)[0]
        if block_type == 0x0A0D0D0A:
            endian = "<" if data[at + 8 : at + 12] == b"\x4d\x3c\x2b\x1a" else ">"
        length = struct.unpack_from(endian + "I", data, at + 4)[0]
        if length < 12:
            break
        if block_type == 6:  # enhanced packet block
            captured = struct.unpack_from(endian + "I", data, at + 20)[0]
            yield data[at + 28 : at + 28 + captured]
        at += length


def frames_of(path):
    with open(path, "rb") as f:
        data = f.read()
    reader = read_pcapng if data[:4] == b"\x0a\x0d\x0d\x0a" else read_pcap
    return [bytes(frame) for frame in reader(data)]


def bth_offset(frame):
    """Offset of the BTH of a RoCEv2 frame, or None."""
    at = 12
    ether_type = struct.unpack_from(">H", frame, at)[0] if len(frame) >= 14 else 0
    if ether_type == 0x8100 and len(frame) >= 18:
        at += 4
        ether_type = struct.unpack_from(">H", frame, at)[0]
    at += 2
    if ether_type == 0x0800 and len(frame) >= at + 20:
        protocol = frame[at + 9]
        at += (frame[at] & 0x0F) * 4
    elif ether_type == 0x86DD and len(frame) >= at + 40:
        protocol = frame[at + 6]
        at += 40
    else:
        return None
    if protocol != 17 or len(frame) < at + 8 + 12:
        return None
    if struct.unpack_from(">H", frame, at + 2)[0] != ROCE_PORT:
        return None
    return at + 8


def va_offset(frame):
    """(offset of the RETH/AtomicETH VA, VA) of a frame that has one, else None."""
    bth = bth_offset(frame)
    if bth is None or frame[bth] not in RETH_OPCODES | ATOMIC_OPCODES:
        return None
    if len(frame) < bth + 12 + 12:
        return None
    return bth + 12, int.from_bytes(frame[bth + 12 : bth + 20], "big")


def normalise(frames):
    """PSNs from the first frame's; VAs as offsets from the lowest VA (folded into 16 KiB, inside
    the harness's read-write region); R_Keys 0."""
    vas = [found[1] for found in map(va_offset, frames) if found is not None]
    lowest = min(vas) if vas else 0
    first_psn = None
    out = []
    for frame in frames:
        frame = bytearray(frame)
        bth = bth_offset(frame)
        if bth is not None:
            psn = int.from_bytes(frame[bth + 9 : bth + 12], "big")
            first_psn = psn if first_psn is None else first_psn
            frame[bth + 9 : bth + 12] = ((psn - first_psn) & 0xFFFFFF).to_bytes(3, "big")
        found = va_offset(frame)
        if found is not None:
            at, va = found
            frame[at : at + 8] = ((va - lowest) % 16384).to_bytes(8, "big")
            frame[at + 8 : at + 12] = bytes(4)
        out.append(bytes(frame))
    return out


def responder_input(frames, config, flags=0):
    out = bytearray([config])
    for frame in normalise(frames[:MAX_FRAMES]):
        out += struct.pack("<BH", flags, len(frame)) + frame
    return bytes(out)


# The harness's regions (responder_rig.cpp): R_Key & 3 picks one, and their lengths.
REGION_RW, REGION_RO, REGION_WO = 0, 1, 2
REGION_LENGTH = {REGION_RW: 20000, REGION_RO: 4096, REGION_WO: 4096}
# Requests at the edges of the regions, one per input (a refused one takes the QP to ERR): the
# first frame of `opcode` in the captures, aimed at (region, offset from its start).
EDGES = [
    ("read-ro-before-start", 0x0C, REGION_RO, -8),
    ("read-ro-past-end", 0x0C, REGION_RO, REGION_LENGTH[REGION_RO] - 56),
    ("write-wo-past-end", 0x0A, REGION_WO, REGION_LENGTH[REGION_WO] - 56),
    ("write-rw-before-start", 0x0A, REGION_RW, -8),
    ("fetch-add-rw-last-word", 0x14, REGION_RW, REGION_LENGTH[REGION_RW] - 8),
]


def edge_seeds(frames):
    """{name: responder input} for EDGES, from the first frame of each opcode in `frames`."""
    first = {}
    for frame in frames:
        bth = bth_offset(frame)
        if bth is not None and frame[bth] not in first:
            first[frame[bth]] = frame
    seeds = {}
    for name, opcode, region, offset in EDGES:
        if opcode not in first:
            continue
        frame = bytearray(normalise([first[opcode]])[0])
        at = bth_offset(frame) + 12
        frame[at : at + 8] = (offset & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")
        frame[at + 8 : at + 12] = region.to_bytes(4, "big")
        seeds["edge-" + name] = bytes([REQUESTS_CONFIG]) + struct.pack("<BH", 0, len(frame)) + frame
    return seeds


def arp_frame(op, sender_mac, sender_ip, target_mac, target_ip):
    eth_dst = b"\xff" * 6 if op == 1 else target_mac
    frame = eth_dst + sender_mac + b"\x08\x06"
    frame += struct.pack(">HHBBH", 1, 0x0800, 6, 4, op)
    frame += sender_mac + bytes(sender_ip) + target_mac + bytes(target_ip)
    return frame + bytes(60 - len(frame))


def icmpv6_checksum(src, dst, message):
    data = src + dst + struct.pack(">IxxxB", len(message), 58) + message
    data += bytes(len(data) % 2)
    total = sum(struct.unpack(">%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def nd_frame(kind, sender_mac, src, dst, target, eth_dst):
    """A neighbour solicitation (135) or solicited advertisement (136) with its MAC option."""
    flags = 0 if kind == 135 else 0x60
    option = 1 if kind == 135 else 2
    message = bytearray(struct.pack(">BBHB3x", kind, 0, 0, flags) + target +
                        bytes([option, 1]) + sender_mac)
    message[2:4] = struct.pack(">H", icmpv6_checksum(src, dst, bytes(message)))
    ip = struct.pack(">IHBB", 6 << 28, len(message), 58, 255) + src + dst
    return eth_dst + sender_mac + b"\x86\xdd" + ip + bytes(message)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    for harness in ("frame_parser", "responder"):
        os.makedirs(os.path.join(out, harness), exist_ok=True)
    everything = []
    seen = set()  # (family, opcode): one parser seed each
    for path in sys.argv[2:]:
        name = os.path.splitext(os.path.basename(path))[0]
        frames = frames_of(path)
        everything += frames
        family = name if name.startswith("swroce") else "rxe"  # prdma's: per IP version
        for frame in frames:
            bth = bth_offset(frame)
            opcode = frame[bth] if bth is not None else None
            if (family, opcode) in seen:
                continue
            seen.add((family, opcode))
            label = "%02x" % opcode if opcode is not None else "other"
            write(os.path.join(out, "frame_parser", "%s-%s" % (name, label)), frame)
        requests, responses = [], []
        for frame in frames:
            bth = bth_offset(frame)
            is_response = bth is not None and frame[bth] in RESPONSE_OPCODES
            (responses if is_response else requests).append(frame)
        for kind, subset, config in (("requests", requests, REQUESTS_CONFIG),
                                     ("responses", responses, RESPONSES_CONFIG)):
            if subset:
                write(os.path.join(out, "responder", "%s-%s" % (name, kind)),
                      responder_input(subset, config))
        if name.startswith("swroce"):
            # prdma's own conversation as it happened, its requests polled one by one, and its
            # requests arriving on the other queue group.
            write(os.path.join(out, "responder", name), responder_input(frames, RESPONSES_CONFIG))
            write(os.path.join(out, "responder", name + "-requests-each"),
                  responder_input(requests, REQUESTS_CONFIG | POLL_EACH))
            write(os.path.join(out, "responder", name + "-requests-queue1"),
                  responder_input(requests, REQUESTS_CONFIG, SECOND_QUEUE))
    for name, data in edge_seeds(everything).items():
        write(os.path.join(out, "responder", name), data)
    mac_a = bytes([0x02, 0, 0, 0, 0, 0x01])
    mac_b = bytes([0x02, 0, 0, 0, 0, 0x02])
    request = arp_frame(1, mac_a, [10, 0, 0, 1], bytes(6), [10, 0, 0, 2])
    write(os.path.join(out, "frame_parser", "arp-request"), request)
    write(os.path.join(out, "responder", "arp-request"),
          responder_input([request], REQUESTS_CONFIG))
    write(os.path.join(out, "frame_parser", "arp-reply"),
          arp_frame(2, mac_b, [10, 0, 0, 2], mac_a, [10, 0, 0, 1]))
    ip_a = bytes.fromhex("fd000000000000000000000000000001")
    ip_b = bytes.fromhex("fd000000000000000000000000000002")
    group_b = bytes.fromhex("ff0200000000000000000001ff000002")
    write(os.path.join(out, "frame_parser", "nd-solicitation"),
          nd_frame(135, mac_a, ip_a, group_b, ip_b, bytes([0x33, 0x33]) + group_b[12:]))
    write(os.path.join(out, "frame_parser", "nd-advertisement"),
          nd_frame(136, mac_b, ip_b, ip_a, ip_b, mac_a))


if __name__ == "__main__":
    main()
