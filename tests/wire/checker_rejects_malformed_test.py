#!/usr/bin/env python3
"""The wire checker must fail on a frame tshark cannot decode as InfiniBand; otherwise every
wire test that relies on it could pass on garbage."""
import os
import struct
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'check-infiniband-pcap')


def frame(udp_payload):
    eth = bytes.fromhex('020000000002' '020000000001' '0800')
    udp_len = 8 + len(udp_payload)
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + udp_len, 1, 0x4000, 64, 17, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    udp = struct.pack('!HHHH', 49152, 4791, udp_len, 0)
    return eth + ip + udp + udp_payload


def write_pcap(path, frames):
    with open(path, 'wb') as out:
        out.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for data in frames:
            out.write(struct.pack('<IIII', 0, 0, len(data), len(data)) + data)


class CheckerTest(unittest.TestCase):
    def run_checker(self, frames):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'x.pcap')
            write_pcap(path, frames)
            return subprocess.run([sys.executable, CHECKER, path], capture_output=True, text=True)

    def test_truncated_bth_fails(self):
        proc = self.run_checker([frame(b'\x04\x00')])  # 2 bytes of a 12-byte BTH
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn('FAIL', proc.stdout)

    def test_non_roce_frame_fails(self):
        eth = bytes.fromhex('020000000002' '020000000001' '0806') + bytes(28)  # ARP
        proc = self.run_checker([eth])
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn('not InfiniBand', proc.stdout)

    def test_empty_capture_fails(self):
        proc = self.run_checker([])
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)


if __name__ == '__main__':
    unittest.main()
