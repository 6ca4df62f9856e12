#!/usr/bin/env python3
"""bench/compare's transport floor, prdma-memif-floor: a latency and a rate run between two
processes over net_memif each print their JSON lines on stdout and nothing on stderr, neither
leaves its runtime directory (/var/run/dpdk/memif_floor_<pid>) behind, both sides close their ports
cleanly even when they close at the same moment on a busy machine, and a wrong option stops it
with a message naming the option and the value instead of running with a number it misread."""
import json
import os
import subprocess
import tempfile
import time
import unittest

FLOOR = os.environ.get('PRDMA_MEMIF_FLOOR', '')


def runtime_dir(pid):
    base = '/var/run' if os.geteuid() == 0 else os.environ.get('XDG_RUNTIME_DIR', '/tmp')
    return f'{base}/dpdk/memif_floor_{pid}'


class MemifFloorTest(unittest.TestCase):
    def run_pair(self, tmp, mode, extra):
        sock = f'{tmp}/floor.sock'
        common = ['--socket', sock, '--mode', mode, '--sizes', '64,4096'] + extra
        client = None
        server = subprocess.Popen([FLOOR, '--role', 'server', '--core', '0'] + common,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 20
            while not os.path.exists(sock) and time.monotonic() < deadline:
                time.sleep(0.01)
            client = subprocess.Popen([FLOOR, '--role', 'client', '--core', '1'] + common,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            c_out, c_err = client.communicate(timeout=60)
            s_out, s_err = server.communicate(timeout=60)
        finally:
            for p in (server, client):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
        self.assertEqual(client.returncode, 0, c_out + c_err)
        self.assertEqual(server.returncode, 0, s_out + s_err)
        # EAL logs errors only; a clean run has none ("EAL: Error: Invalid memory" was memif's
        # teardown running twice at once).
        self.assertEqual(c_err, '', 'client')
        self.assertEqual(s_err, '', 'server')
        for pid in (server.pid, client.pid):
            self.assertFalse(os.path.lexists(runtime_dir(pid)), f'{runtime_dir(pid)} is left')
        return c_out, s_out

    def test_latency_and_rate_leave_nothing_behind(self):
        with tempfile.TemporaryDirectory(prefix='prdma-floor-') as tmp:
            out, _ = self.run_pair(tmp, 'latency', ['--iterations', '2000'])
            rows = [json.loads(line) for line in out.splitlines()]
            self.assertEqual([r['bytes'] for r in rows], [64, 4096])
            self.assertTrue(all(r['iterations'] == 2000 and r['rtt_median_us'] > 0 for r in rows))
        with tempfile.TemporaryDirectory(prefix='prdma-floor-') as tmp:
            _, out = self.run_pair(tmp, 'rate', ['--seconds', '0.3'])
            rows = [json.loads(line) for line in out.splitlines()]
            self.assertEqual([r['bytes'] for r in rows], [64, 4096])
            self.assertTrue(all(r['messages'] > 0 for r in rows), out)

    def test_both_sides_close_cleanly_on_a_busy_machine(self):
        # Both sides close within microseconds of each other. DPDK 22.11's memif handles the
        # peer's disconnect on the interrupt thread; a stop on the main thread at that moment ran
        # the same teardown twice. Busy CPUs stretch that window: before the fix about one pair
        # in four failed this way with two CPU hogs, so ten pairs catch it almost always.
        hogs = [subprocess.Popen(['python3', '-c', 'while True: pass']) for _ in range(2)]
        try:
            for _ in range(10):
                with tempfile.TemporaryDirectory(prefix='prdma-floor-') as tmp:
                    out, _ = self.run_pair(tmp, 'latency', ['--iterations', '2000'])
                    self.assertEqual([json.loads(line)['bytes'] for line in out.splitlines()],
                                     [64, 4096])
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()

    def test_wrong_options_stop_with_a_message(self):
        cases = (
            (['--role', 'x'], "--role is server or client, not 'x'"),
            (['--sizes', '8,,16'], "--sizes needs a whole number 1..8388608, not ''"),
            (['--sizes', '99999999'], '--sizes needs a whole number 1..8388608'),
            (['--iterations', '12x'], "--iterations needs a whole number 1..1000000000, not '12x'"),
            (['--seconds', '-1'], "--seconds needs a duration in (0, 3600], not '-1'"),
            (['--core', '9999'], '--core needs a whole number 0..'),
            (['--bogus', '1'], 'unknown option --bogus'),
            (['--mode'], 'option --mode needs a value'),
        )
        for options, message in cases:
            with self.subTest(options=options):
                out = subprocess.run([FLOOR, '--socket', '/nonexistent/floor.sock'] + options,
                                     capture_output=True, text=True, timeout=30)
                self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
                self.assertIn(f'prdma-memif-floor: {message}', out.stderr)


if __name__ == '__main__':
    unittest.main(verbosity=2)
