#!/usr/bin/env python3
"""examples/rc_pingpong between two processes over net_memif: descriptors exchanged over TCP,
SENDs bounced both ways, each side's report; then the mistakes a user makes (bad size, no
server) each end with a message and a non-zero exit, never a hang."""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import late_switch

PINGPONG = os.environ.get('PRDMA_RC_PINGPONG', '')
REPORT = re.compile(r'^(\d+) iters in [\d.]+ seconds = [\d.]+ usec/iter$', re.M)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def eal(role, sock, ip, core):
    return ['-l', str(core), '--log-level=*:error',
            f'--vdev=net_memif0,role={role},socket={sock},socket-abstract=no',
            f'--vdev=rdma_swroce0,port=net_memif0,ip={ip}', '--']


def pingpong(binary, size, iters, tmp):
    """Runs a server and a client; returns both results."""
    sock, port = f'{tmp}/pp.sock', str(free_port())
    options = ['-p', port, '-s', str(size), '-n', str(iters)]
    server = subprocess.Popen([binary] + eal('server', sock, '10.0.0.1', 0) + options,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 20  # the client's memif connects to the server's socket
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.02)
        client = subprocess.run([binary] + eal('client', sock, '10.0.0.2', 1) + options +
                                ['127.0.0.1'], capture_output=True, text=True, timeout=120)
        if client.returncode != 0:
            server.kill()  # it waits for a client that is gone, as ibv_rc_pingpong's server does
        s_out, _ = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return client, server.returncode, s_out


class RcPingpongTest(unittest.TestCase):
    def test_two_processes_bounce_sends(self):
        for size, iters in ((64, 5000), (4096, 1000), (65536, 200)):
            with self.subTest(size=size), tempfile.TemporaryDirectory(prefix='prdma-pp-') as tmp:
                client, s_rc, s_out = pingpong(PINGPONG, size, iters, tmp)
                self.assertEqual(client.returncode, 0, client.stdout + client.stderr)
                self.assertEqual(s_rc, 0, s_out)
                for out in (client.stdout, s_out):
                    self.assertEqual(REPORT.search(out).group(1), str(iters), out)
                    self.assertIn(f'{2 * size * iters} bytes in', out)

    def test_links_that_come_up_after_the_exchange(self):
        # The switch between the two memif ports starts after the descriptors and the "receive
        # posted" byte have crossed: each side waits for its port before its first SEND.
        with tempfile.TemporaryDirectory(prefix='prdma-pp-') as tmp:
            options = ['-s', '4096', '-n', '500']
            client, s_rc, s_out, t_log = late_switch.run_pair(PINGPONG, tmp, options, options)
            both = f'client:\n{client.stdout}{client.stderr}\nserver:\n{s_out}\nswitch:\n{t_log}'
            self.assertEqual(client.returncode, 0, both)
            self.assertEqual(s_rc, 0, both)
            for out in (client.stdout, s_out):
                self.assertEqual(REPORT.search(out).group(1), '500', both)

    def test_mistakes_end_with_a_message(self):
        with tempfile.TemporaryDirectory(prefix='prdma-pp-') as tmp:
            for args, message in ((['-s', '0'], "-s needs a number 1..1073741824, not '0'"),
                                  (['-n', '12x'], "-n needs a number 1..1000000000, not '12x'"),
                                  (['-p', '70000'], "-p needs a number 1..65535, not '70000'"),
                                  (['--bogus'], "unknown option '--bogus'"),
                                  (['a', 'b'], "unexpected argument 'b'")):
                out = subprocess.run([PINGPONG] + eal('server', f'{tmp}/a.sock', '10.0.0.1', 0) +
                                     args, capture_output=True, text=True, timeout=60)
                self.assertEqual(out.returncode, 2, out.stderr)
                self.assertIn(f'rc_pingpong: {message} (try --help)', out.stderr)
            for argv in (['--help'], ['-l', '0', '--', '-h']):
                out = subprocess.run([PINGPONG] + argv, capture_output=True, text=True, timeout=60)
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertIn('Usage: rc_pingpong [EAL options] --', out.stdout)
            # A client whose server never comes: its memif port never links, and it says so.
            start = time.monotonic()
            out = subprocess.run([PINGPONG] + eal('client', f'{tmp}/b.sock', '10.0.0.2', 1) +
                                 ['-p', str(free_port()), '127.0.0.1'], capture_output=True,
                                 text=True, timeout=120)
            self.assertNotEqual(out.returncode, 0)
            self.assertIn('rc_pingpong:', out.stderr)
            self.assertLess(time.monotonic() - start, 60)


if __name__ == '__main__':
    unittest.main(verbosity=2)
