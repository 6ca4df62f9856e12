#!/usr/bin/env python3
"""Two real processes, each with its own EAL, net_memif port and swroce device, run a session
against each other (memif_peer.cpp). Checks both exit cleanly within a timeout and cleans up the
memif socket whatever happens."""
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

PEER = os.environ.get('PRDMA_MEMIF_PEER', '')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def run_session(mode, timeout=120):
    with tempfile.TemporaryDirectory(prefix='prdma-memif-') as tmp:
        sock = os.path.join(tmp, 'memif.sock')
        port = str(free_port())
        common = ['--socket', sock, '--oob-port', port, '--mode', mode]
        server = subprocess.Popen([PEER, '--role', 'server', '--core', '0'] + common,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # DPDK 22.11's memif client fails to start (EPERM) if the server's socket is not there yet.
        deadline = time.monotonic() + 20
        while not os.path.exists(sock) and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        client = subprocess.Popen([PEER, '--role', 'client', '--core', '1'] + common,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            client_out, _ = client.communicate(timeout=timeout)
            server_out, _ = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            client.kill()
            server.kill()
            client_out, _ = client.communicate()
            server_out, _ = server.communicate()
            raise AssertionError(f'timeout\nclient:\n{client_out}\nserver:\n{server_out}')
        return client.returncode, client_out, server.returncode, server_out


class MemifSession(unittest.TestCase):
    def check(self, mode, expect):
        rc_c, out_c, rc_s, out_s = run_session(mode)
        results = [line for line in out_c.splitlines() if line.startswith('memif-peer client:')]
        print(results[-1] if results else '', flush=True)
        self.assertEqual(rc_c, 0, f'client:\n{out_c}\nserver:\n{out_s}')
        self.assertEqual(rc_s, 0, f'client:\n{out_c}\nserver:\n{out_s}')
        self.assertIn(expect, out_c)

    def test_verify_every_opcode_and_size(self):
        self.check('verify', 'ok')

    def test_imm_send_and_write_with_immediate(self):
        self.check('imm', 'ok')

    def test_inline_sge_inline_data_and_gather_scatter_lists(self):
        self.check('inline-sge', 'ok')

    def test_many_qps_sixteen_pairs_at_once(self):
        self.check('many-qps', 'ok')

    def test_fast_reg_peer_access_then_invalidation(self):
        self.check('fast-reg', 'ok')

    def test_errors_refused_requests_leave_target_memory_alone(self):
        self.check('errors', 'ok')

    def test_a_target_on_a_service_lcore_serves_while_its_thread_sleeps(self):
        self.check('sleeping-target', 'sleeping target ok')


if __name__ == '__main__':
    if not PEER or not os.access(PEER, os.X_OK):
        print('PRDMA_MEMIF_PEER must name the swroce-memif-peer binary', file=sys.stderr)
        sys.exit(2)
    unittest.main()
