#!/usr/bin/env python3
"""examples/write_read between two processes over net_memif: the server fast-registers its
buffer under a new key variant each round, the client WRITEs and READs through it and checks
every byte, the server invalidates the key, and the client's last WRITE through the dead key
fails with remote_access_error. Then the mistakes a user makes (bad options, sides that disagree
on -s, no server) each end with a message and the documented exit code, never a hang."""
import os
import re
import socket
import subprocess
import tempfile
import time
import unittest

import late_switch

WRITE_READ = os.environ.get('PRDMA_WRITE_READ', '')
REGISTERED = re.compile(r'^round (\d+): (\d+) bytes \((\d+) pages\) fast-registered as rkey '
                        r'0x([0-9a-f]{8})$', re.M)
INVALIDATED = re.compile(r'^round (\d+): rkey 0x([0-9a-f]{8}) invalidated$', re.M)
CHECKED = re.compile(r'^round (\d+): (\d+) bytes written and read back through rkey '
                     r'0x([0-9a-f]{8}): ok$', re.M)
DEAD_WRITE = re.compile(r'^WRITE through the invalidated rkey 0x([0-9a-f]{8}): '
                        r'remote_access_error \(expected\)$', re.M)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def eal(role, sock, ip, core):
    return ['-l', str(core), '--log-level=*:error',
            f'--vdev=net_memif0,role={role},socket={sock},socket-abstract=no',
            f'--vdev=rdma_swroce0,port=net_memif0,ip={ip}', '--']


def run_pair(tmp, server_options, client_options):
    """Runs a server and a client; returns the client's result and the server's code and
    output. The server is killed if it outlives its client by a minute or its client failed."""
    sock, port = f'{tmp}/wr.sock', str(free_port())
    server = subprocess.Popen([WRITE_READ] + eal('server', sock, '10.0.0.1', 0) +
                              ['-p', port] + server_options,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 20  # the client's memif connects to the server's socket
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.02)
        client = subprocess.run([WRITE_READ] + eal('client', sock, '10.0.0.2', 1) +
                                ['-p', port] + client_options + ['127.0.0.1'],
                                capture_output=True, text=True, timeout=120)
        try:
            s_out, _ = server.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            s_out, _ = server.communicate()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return client, server.returncode, s_out


class WriteReadTest(unittest.TestCase):
    def test_two_processes_write_read_invalidate(self):
        # One byte short of a page, several pages with a partial last one, 1 MiB; and enough
        # rounds on one region that its 8-bit key variant wraps.
        for size, iters in ((4095, 3), (3 * 4096 + 100, 4), (1 << 20, 2), (64, 300)):
            with self.subTest(size=size, iters=iters), \
                    tempfile.TemporaryDirectory(prefix='prdma-wr-') as tmp:
                options = ['-s', str(size), '-n', str(iters)]
                client, s_rc, s_out = run_pair(tmp, options, options)
                both = f'client:\n{client.stdout}{client.stderr}\nserver:\n{s_out}'
                self.assertEqual(client.returncode, 0, both)
                self.assertEqual(s_rc, 0, both)
                registered = REGISTERED.findall(s_out)
                self.assertEqual([int(r[0]) for r in registered], list(range(1, iters + 1)), s_out)
                pages = (size + 4095) // 4096
                self.assertTrue(all(int(r[1]) == size and int(r[2]) == pages for r in registered))
                keys = [int(r[3], 16) for r in registered]
                # Same region (key index), a new variant every round.
                self.assertEqual(len({k >> 8 for k in keys}), 1, s_out)
                for before, after in zip(keys, keys[1:]):
                    self.assertNotEqual(before, after, s_out)
                self.assertEqual([int(r[1], 16) for r in INVALIDATED.findall(s_out)], keys)
                checked = CHECKED.findall(client.stdout)
                self.assertEqual([(int(r[0]), int(r[1]), int(r[2], 16)) for r in checked],
                                 [(i + 1, size, k) for i, k in enumerate(keys)], client.stdout)
                dead = DEAD_WRITE.search(client.stdout)
                self.assertIsNotNone(dead, client.stdout + client.stderr)
                self.assertEqual(int(dead.group(1), 16), keys[-1])

    def test_links_that_come_up_after_the_exchange(self):
        # The descriptors cross over TCP at once; the switch between the two memif ports starts
        # seconds later. Each side waits for its port: a WRITE posted before would be retried
        # into the dead link until retry_exceeded, which the old example did.
        with tempfile.TemporaryDirectory(prefix='prdma-wr-') as tmp:
            options = ['-s', str(64 * 1024), '-n', '2']
            client, s_rc, s_out, t_log = late_switch.run_pair(WRITE_READ, tmp, options, options)
            both = f'client:\n{client.stdout}{client.stderr}\nserver:\n{s_out}\nswitch:\n{t_log}'
            self.assertEqual(client.returncode, 0, both)
            self.assertEqual(s_rc, 0, both)
            self.assertEqual(len(CHECKED.findall(client.stdout)), 2, both)
            self.assertIsNotNone(DEAD_WRITE.search(client.stdout), both)

    def test_bad_options_exit_2_before_the_eal(self):
        cases = (
            (['-s', '0'], '-s needs a number 1..'),
            (['-s', 'many'], "-s needs a number 1..1073741824, not 'many'"),
            (['-s', str((1 << 30) + 1)], '-s needs a number'),
            (['-n', '0'], '-n needs a number'),
            (['-n', '-3'], '-n needs a number'),
            (['-p', '70000'], '-p needs a number 1..65535'),
            (['-x'], "unknown option '-x'"),
            (['--bogus'], "unknown option '--bogus'"),
            (['-s'], "option '-s' needs a value"),
            (['host-a', 'host-b'], "unexpected argument 'host-b'"),
        )
        for options, message in cases:
            with self.subTest(options=options):
                start = time.monotonic()
                # No EAL arguments needed: the options are read before the EAL starts.
                out = subprocess.run([WRITE_READ, '--'] + options, capture_output=True,
                                     text=True, timeout=30)
                self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
                self.assertIn(message, out.stderr)
                self.assertIn('try --help', out.stderr)
                self.assertLess(time.monotonic() - start, 10)
        for argv in (['--', '--help'], ['--help'], ['-l', '0', '--', '-s', '64', '-h']):
            with self.subTest(argv=argv):
                out = subprocess.run([WRITE_READ] + argv, capture_output=True, text=True,
                                     timeout=30)
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertIn('Usage: write_read [EAL options] --', out.stdout)
                self.assertIn('-s, --size', out.stdout)

    def test_sides_that_disagree_on_the_size(self):
        with tempfile.TemporaryDirectory(prefix='prdma-wr-') as tmp:
            client, s_rc, s_out = run_pair(tmp, ['-s', '8192'], ['-s', '4096'])
            self.assertEqual(client.returncode, 1, client.stdout + client.stderr)
            self.assertIn('the server registered 8192 bytes, not 4096', client.stderr)
            self.assertEqual(s_rc, 1, s_out)
            self.assertIn('write_read: the peer closed the connection', s_out)

    def test_client_with_no_server(self):
        with tempfile.TemporaryDirectory(prefix='prdma-wr-') as tmp:
            # Its memif port never links and no one listens on the TCP port: it says so.
            start = time.monotonic()
            out = subprocess.run([WRITE_READ] + eal('client', f'{tmp}/b.sock', '10.0.0.2', 1) +
                                 ['-p', str(free_port()), '127.0.0.1'], capture_output=True,
                                 text=True, timeout=120)
            self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
            self.assertIn('write_read:', out.stderr)
            self.assertLess(time.monotonic() - start, 60)
            self.assertEqual(os.listdir(tmp), [], 'a memif socket was left behind')


if __name__ == '__main__':
    unittest.main(verbosity=2)
