#!/usr/bin/env python3
"""Counts, on an interface (test-bed host 2's data0), the frames dma_map_test sends: those that
carry its data (broadcast, EtherType 0x88b5, bytes 14..63 = 14..63) and the other non-IP, non-ARP
frames (anything the NIC might send for reads the IOMMU refused: QEMU 7.2 sends nothing). Runs until STOPFILE exists; writes
"data N other M" to OUTFILE.
    capture.py IFACE STOPFILE OUTFILE"""
import os
import select
import socket
import sys

iface, stop, out = sys.argv[1:4]
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
# The guest sends its 1024 frames in a burst while this process may be off its core: a default
# receive buffer (~200 KiB) overflows and the count comes up short. Root may force 32 MiB.
SO_RCVBUFFORCE = getattr(socket, 'SO_RCVBUFFORCE', 33)
sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)
sock.bind((iface, 0))
payload = bytes(range(14, 64))
data = other = 0
while not os.path.exists(stop):
    if not select.select([sock], [], [], 0.2)[0]:
        continue
    frame = sock.recv(65536)
    kind = frame[12:14]
    if kind == b'\x88\xb5' and frame[:6] == b'\xff' * 6 and frame[14:64] == payload:
        data += 1
    elif kind not in (b'\x08\x00', b'\x08\x06', b'\x86\xdd'):
        other += 1
with open(out, 'w', encoding='ascii') as f:
    f.write(f'data {data} other {other}\n')
