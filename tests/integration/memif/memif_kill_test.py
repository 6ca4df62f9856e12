#!/usr/bin/env python3
"""A peer that dies: two prdma-perf write_bw processes over net_memif, and one of them is killed
with SIGKILL while the transfer runs, 20 times with the client killed and 20 times with the server
killed. The survivor must not hang (still running HANG_SECONDS after the kill), must not crash
while it tears its device down, must not hit EAL heap errors (memif freeing its regions twice),
and must end on its own with a non-zero status and a prdma-perf message that says what happened.

DPDK 22.11's memif unmaps the shared rings from the EAL interrupt thread when the peer's socket
closes, under any burst an lcore has begun: swroce's burst gate keeps memif's callbacks out of
every burst under way, so a survivor that dies by a signal before its teardown starts (swroce
logs "closing" when it starts) is a 'burst-crash' and fails the test like any other crash
(PRDMA_KILL_MAX_BURST_CRASHES raises the tolerance, to measure an ungated build).

Every run cleans up its memif socket directory and the EAL runtime directories the processes
leave under /var/run/dpdk. PRDMA_KILL_RUNS (default 20) sets the kills per side; PRDMA_KILL_SEED
repeats a run's delays."""
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

PERF = os.environ.get('PRDMA_PERF', '')
PEER = os.environ.get('PRDMA_MEMIF_PEER', '')
RUNS = int(os.environ.get('PRDMA_KILL_RUNS', '20'))
SEED = int(os.environ.get('PRDMA_KILL_SEED', str(int(time.time()) % 100000)))
MAX_BURST_CRASHES = int(os.environ.get('PRDMA_KILL_MAX_BURST_CRASHES', '0'))
# The survivor's device fails its outstanding WRITEs after the QP's retries (timeout 12: 16.8 ms,
# 7 retries, so about 135 ms), or sees the TCP connection close: a few seconds is plenty even on a
# loaded machine; prdma-perf's own watchdog (10 s without progress) must not be what ends it.
HANG_SECONDS = 8.0
# How long either side may take to start and reach the transfer before the run is given up.
START_SECONDS = 20.0
DPDK_RUN_DIR = '/var/run/dpdk'
# swroce's log line when the device starts closing its port (prdma.swroce at info).
TEARDOWN_MARK = 'closing (port net_memif0)'


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Side:
    """One prdma-perf process; a thread collects its output and notes when the transfer began."""

    def __init__(self, role, sock, tcp_port, prefix, core):
        ip = '10.0.0.1' if role == 'server' else '10.0.0.2'
        self.prefix = prefix
        args = [PERF, 'write_bw', '-l', str(core), '--no-telemetry', f'--file-prefix={prefix}',
                '--log-level=lib.eal:error', '--log-level=pmd.net.memif:error',
                '--log-level=prdma.*:warning', '--log-level=prdma.swroce:info',
                f'--vdev=net_memif0,role={role},socket={sock},socket-abstract=no,id=0',
                f'--vdev=rdma_swroce0,port=net_memif0,ip={ip}', '--',
                '-F', '-p', str(tcp_port), '-n', '10000000', '-u', '12']
        if role == 'client':
            args.append('127.0.0.1')
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines = []
        self.transferring = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip('\n'))
            # perftest prints the table header just before the measured loop starts.
            if line.startswith(' #bytes'):
                self.transferring.set()

    def output(self):
        self.reader.join(5)
        return '\n'.join(self.lines)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        remove_runtime_dir(self.prefix)


def remove_runtime_dir(prefix):
    shutil.rmtree(os.path.join(DPDK_RUN_DIR, prefix), ignore_errors=True)


def kill_once(victim_role, delay, tag):
    """Starts a pair, kills `victim_role` `delay` s into the transfer and returns
    (outcome, detail): outcome is 'clean', 'burst-crash', 'teardown-crash', 'heap-error', 'hang',
    'unclear', 'finished' or 'no-start'."""
    with tempfile.TemporaryDirectory(prefix='prdma-kill-') as tmp:
        sock = os.path.join(tmp, 'memif.sock')
        port = free_port()
        server = Side('server', sock, port, f'prdma_kill_{tag}_s', 0)
        client = None
        try:
            # DPDK 22.11's memif client fails to start if the server's socket is not there yet.
            deadline = time.monotonic() + START_SECONDS
            while not os.path.exists(sock) and server.proc.poll() is None:
                if time.monotonic() > deadline:
                    return 'no-start', 'server socket never appeared:\n' + server.output()
                time.sleep(0.01)
            client = Side('client', sock, port, f'prdma_kill_{tag}_c', 1)
            if not client.transferring.wait(START_SECONDS):
                return 'no-start', ('the transfer did not start:\nclient:\n' + client.output() +
                                    '\nserver:\n' + server.output())
            time.sleep(delay)
            victim, survivor = (client, server) if victim_role == 'client' else (server, client)
            if victim.proc.poll() is not None or survivor.proc.poll() is not None:
                return 'finished', 'a side ended before the kill:\n' + survivor.output()
            victim.proc.kill()
            victim.proc.wait()
            try:
                rc = survivor.proc.wait(HANG_SECONDS)
            except subprocess.TimeoutExpired:
                survivor.stop()
                return 'hang', survivor.output()
            out = survivor.output()
            if rc < 0:
                where = 'teardown-crash' if TEARDOWN_MARK in out else 'burst-crash'
                return where, f'signal {-rc}:\n{out}'
            if 'Invalid memory' in out:
                return 'heap-error', out
            messages = [line for line in out.splitlines() if line.startswith('prdma-perf: ')]
            if rc != 0 and messages:
                return 'clean', messages[-1]
            return 'unclear', f'exit {rc} without a prdma-perf message:\n{out}'
        finally:
            for side in (client, server):
                if side is not None:
                    side.stop()


class PeerKilledMidTransfer(unittest.TestCase):
    def kill_many(self, victim_role):
        rng = random.Random(SEED + (1 if victim_role == 'server' else 0))
        counts = {}
        messages = {}
        failures = []
        for i in range(RUNS):
            delay = rng.uniform(0.05, 0.4)
            outcome, detail = kill_once(victim_role, delay, f'{os.getpid()}_{victim_role}{i}')
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome == 'clean':
                message = re.sub(r'\d+', 'N', detail)
                messages[message] = messages.get(message, 0) + 1
            elif outcome != 'burst-crash':
                failures.append(f'run {i} (kill after {delay:.3f} s): {outcome}\n{detail}')
                if len(failures) == 3:
                    break  # each may have cost HANG_SECONDS: enough to show what is wrong
        crashes = counts.get('burst-crash', 0) + counts.get('teardown-crash', 0)
        runs = sum(counts.values())
        known = crashes + sum(counts.get(k, 0) for k in ('hang', 'clean', 'heap-error'))
        summary = (f'{victim_role} killed {runs} times (seed {SEED}): crashes {crashes} '
                   f'({counts.get("burst-crash", 0)} in a memif burst, '
                   f'{counts.get("teardown-crash", 0)} in teardown), hangs '
                   f'{counts.get("hang", 0)}, clean {counts.get("clean", 0)}, heap errors '
                   f'{counts.get("heap-error", 0)}, other {runs - known}')
        print(summary, flush=True)
        for message, n in sorted(messages.items()):
            print(f'  {n} x {message}', flush=True)
        self.assertEqual(failures, [], summary)
        self.assertLessEqual(counts.get('burst-crash', 0), MAX_BURST_CRASHES,
                             summary + ': the survivor crashed inside a memif burst')

    def test_client_killed_server_survives(self):
        self.kill_many('client')

    def test_server_killed_client_survives(self):
        self.kill_many('server')


class TeardownByEalCleanup(unittest.TestCase):
    """swroce-memif-peer leaves its rdma device to prdma::Eal's cleanup, as many applications
    will: the device must close before its memif port, so the port is stopped when its driver
    closes it, and neither side's interrupt thread frees the shared regions twice."""

    def test_devices_close_before_the_ports_they_use(self):
        with tempfile.TemporaryDirectory(prefix='prdma-kill-') as tmp:
            sock = os.path.join(tmp, 'memif.sock')
            common = ['--socket', sock, '--oob-port', str(free_port()), '--mode', 'errors']
            server = subprocess.Popen([PEER, '--role', 'server', '--core', '0'] + common,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            deadline = time.monotonic() + START_SECONDS
            while not os.path.exists(sock) and server.poll() is None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            client = subprocess.Popen([PEER, '--role', 'client', '--core', '1'] + common,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                out_c, _ = client.communicate(timeout=60)
                out_s, _ = server.communicate(timeout=30)
            finally:
                for proc in (client, server):
                    if proc.poll() is None:
                        proc.kill()
                        proc.communicate()
                    remove_runtime_dir(f'prdma_{proc.pid}')  # prdma::Eal's default prefix
        both = f'client:\n{out_c}\nserver:\n{out_s}'
        self.assertEqual((client.returncode, server.returncode), (0, 0), both)
        self.assertNotIn('Cannot close started device', both)
        self.assertNotIn('Invalid memory', both)


if __name__ == '__main__':
    missing = [name for name, path in (('PRDMA_PERF', PERF), ('PRDMA_MEMIF_PEER', PEER))
               if not path or not os.access(path, os.X_OK)]
    if missing:
        print(' and '.join(missing) + ' must name the prdma-perf and swroce-memif-peer binaries',
              file=sys.stderr)
        sys.exit(2)
    unittest.main()
