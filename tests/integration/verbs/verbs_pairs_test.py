#!/usr/bin/env python3
"""Debian's own verbs programs on both ends, each process with libprdma-verbs preloaded and its
own swroce device on one end of a memif link, the engine on an EAL service lcore: rdma-core's
ibv_rc_pingpong and ibv_ud_pingpong (with -g and their own buffer checks) and ibv_srq_pingpong
(many QPs on one SRQ),
perftest's WRITE, READ, SEND and atomic tests, latency and bandwidth, at sizes up to
multi-packet, its UD SEND tests, and ibv_asyncwatch hearing the port come and go. Each pair must exit 0 on both sides, print its results, leave no runtime directory
and crash nowhere."""
import os
import re
import socket
import subprocess
import tempfile
import time
import unittest

SHIM = os.environ.get('PRDMA_VERBS_SHIM', '')


def free_tcp_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def eal(sock, server, devargs=''):
    role, ip = ('server', '10.9.0.1') if server else ('client', '10.9.0.2')
    lcores = '--main-lcore 1 -S 0' if server else '--main-lcore 0 -S 1'
    return (f'-l 0,1 {lcores} --log-level=*:error --no-huge -m 256 '
            f'--vdev=net_memif0,role={role},socket={sock},socket-abstract=no '
            f'--vdev=rdma_swroce0,port=net_memif0,ip={ip},progress=service{devargs}')


def run_pair(program, args, devargs='', extra_env=None):
    """Runs `program args` as server, then as client; returns both CompletedProcess-like tuples.
    `devargs` go to both swroce devices, `extra_env` to both programs."""
    with tempfile.TemporaryDirectory(prefix='prdma-verbs-') as tmp:
        sock = os.path.join(tmp, 'memif.sock')
        port = str(free_tcp_port())
        env = dict(os.environ, LD_PRELOAD=SHIM, **(extra_env or {}))
        server = subprocess.Popen([program, '-p', port] + args,
                                  env=dict(env, PRDMA_EAL_ARGS=eal(sock, True, devargs)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # its memif listener and its TCP port are up
        try:
            # Both links come up when the client's EAL starts, and its program may then reach
            # the server's TCP port before the server's program listens on it: perftest and
            # ibv_rc_pingpong do not retry that connect, so the client is started again, as a
            # user would.
            for _ in range(3):
                client = subprocess.run([program, '-p', port] + args + ['127.0.0.1'],
                                        env=dict(env, PRDMA_EAL_ARGS=eal(sock, False, devargs)),
                                        capture_output=True, text=True, timeout=120)
                if client.returncode == 0 or server.poll() is not None or \
                        not re.search(r"Couldn't connect to \S+:\d+|Unable to open file descriptor",
                                      client.stdout + client.stderr):
                    break
                time.sleep(0.5)
            out, err = server.communicate(timeout=60)
        finally:
            if server.poll() is None:
                server.kill()
                server.communicate()
        return (server.returncode, out, err), (client.returncode, client.stdout, client.stderr)


def runtime_dirs():
    try:
        return {d for d in os.listdir('/var/run/dpdk') if d.startswith('prdma_')}
    except FileNotFoundError:
        return set()


class VerbsPairsTest(unittest.TestCase):
    def setUp(self):
        self.dirs_before = runtime_dirs()

    def tearDown(self):
        self.assertEqual(runtime_dirs() - self.dirs_before, set(), 'runtime directories left')

    def expect_pair(self, program, args, result_line, devargs='', extra_env=None):
        server, client = run_pair(program, args, devargs, extra_env)
        for side, (rc, out, err) in (('server', server), ('client', client)):
            self.assertEqual(rc, 0, f'{program} {side} exited {rc}:\n{out}\n{err}')
            self.assertNotIn('libprdma-verbs:', err, f'{program} {side} met a refusal')
            self.assertNotRegex(out + err, r'(?i)invalid data|failed|couldn\'t',
                                f'{program} {side} reports a failure:\n{out}\n{err}')
        self.assertRegex(client[1], result_line, f'{program} printed no result')
        return server, client

    def test_ibv_rc_pingpong_with_its_own_check(self):
        for size in ('4096', '100'):
            server, client = self.expect_pair(
                'ibv_rc_pingpong', ['-g', '0', '-d', 'rdma_swroce0', '-n', '100', '-s', size,
                                    '-c'], r'100 iters in [0-9.]+ seconds')
            self.assertIn('GID ::ffff:10.9.0.1', client[1] + client[2])

    def test_selective_repeat_through_a_lossy_link(self):
        # PRDMA_SELECTIVE_REPEAT=1 on both (each peer is prdma): every RC QP resends only what
        # its peer NAKs. ibv_rc_pingpong checks its buffers; ib_write_bw streams through drops.
        # PRDMA_STATS=1 prints the devices' counters at exit: the WRITEs' sender resent packets
        # alone (selective_resends), far more often than it went back (retransmissions: the
        # probes after a lost ACK).
        loss = {'PRDMA_SELECTIVE_REPEAT': '1', 'PRDMA_STATS': '1'}
        self.expect_pair('ibv_rc_pingpong', ['-g', '0', '-d', 'rdma_swroce0', '-n', '200', '-s',
                                             '8192', '-c'], r'200 iters in [0-9.]+ seconds',
                         ',rx_drop=0.05,seed=3', loss)
        _, client = self.expect_pair('ib_write_bw', ['-x', '0', '-d', 'rdma_swroce0', '-n', '200',
                                                     '-s', '65536'], r'(?m)^ 65536\s+200\s+[0-9.]+',
                                     ',rx_drop=0.02,seed=3', loss)
        self.assertIn('prdma-verbs: rdma_swroce0 counters at exit:', client[2])
        counters = dict(re.findall(r'(?m)^  (\w+)=(\d+)$', client[2]))
        self.assertGreater(int(counters.get('selective_resends', 0)),
                           4 * int(counters.get('retransmissions', 0)), client[2])

    def test_ibv_srq_pingpong_many_qps_on_one_srq(self):
        # 16 QPs per side take their receives from one SRQ, reposted as it drains; 4096 B is four
        # packets at the 1024 B path MTU, so a receive is held across a multi-packet SEND.
        for size in ('4096', '64'):
            server, client = self.expect_pair(
                'ibv_srq_pingpong', ['-g', '0', '-d', 'rdma_swroce0', '-n', '200', '-q', '16',
                                     '-r', '64', '-s', size], r'200 iters in [0-9.]+ seconds')
            self.assertEqual(len(re.findall(r'remote address: .*QPN', client[1])), 16)

    def test_ibv_ud_pingpong_with_its_own_check(self):
        # UD: an address handle from the peer's GID (its MAC found by ARP), datagrams of up to
        # the 1024 B port MTU behind the 40-byte GRH the program skips, Q_Key 0x11111111.
        for size in ('1024', '100'):
            self.expect_pair('ibv_ud_pingpong', ['-g', '0', '-d', 'rdma_swroce0', '-n', '100',
                                                 '-s', size, '-r', '64', '-c'],
                             r'100 iters in [0-9.]+ seconds')

    def test_perftest_ud_send_latency_and_bandwidth(self):
        # perftest's -c UD: its own address handles, the GRH in every receive, one MTU at most.
        self.expect_pair('ib_send_lat', ['-x', '0', '-d', 'rdma_swroce0', '-n', '100', '-s', '8',
                                         '-c', 'UD'], r'(?m)^ 8\s+100\s+[0-9.]+')
        self.expect_pair('ib_send_bw', ['-x', '0', '-d', 'rdma_swroce0', '-n', '1000', '-s',
                                        '1024', '-c', 'UD'], r'(?m)^ 1024\s+1000\s+[0-9.]+')
        # --use-srq: the server's UD QP takes every datagram's receive from an SRQ.
        server, _ = self.expect_pair('ib_send_bw', ['-x', '0', '-d', 'rdma_swroce0', '-n', '1000',
                                                    '-s', '64', '-c', 'UD', '--use-srq'],
                                     r'(?m)^ 64\s+1000\s+[0-9.]+')
        self.assertIn('Using SRQ      : ON', server[1])

    def test_event_mode_wakes_on_completions(self):
        # -e: the programs sleep in ibv_get_cq_event; the service lcore's completion wakes them.
        self.expect_pair('ibv_rc_pingpong', ['-g', '0', '-d', 'rdma_swroce0', '-n', '200', '-e',
                                             '-c'], r'200 iters in [0-9.]+ seconds')
        self.expect_pair('ib_send_lat', ['-x', '0', '-d', 'rdma_swroce0', '-n', '100', '-e'],
                         r'(?m)^ 2\s+100\s+[0-9.]+')
        self.expect_pair('ib_send_bw', ['-x', '0', '-d', 'rdma_swroce0', '-n', '100', '-e', '-s',
                                        '4096'], r'(?m)^ 4096\s+100\s+[0-9.]+')

    def test_perftest_write_read_send_latency(self):
        for program in ('ib_write_lat', 'ib_read_lat', 'ib_send_lat'):
            self.expect_pair(program, ['-x', '0', '-d', 'rdma_swroce0', '-n', '100', '-s', '8'],
                             r'(?m)^ 8\s+100\s+[0-9.]+')

    def test_perftest_bandwidth_multi_packet(self):
        for program, size in (('ib_write_bw', '65536'), ('ib_read_bw', '4096'),
                              ('ib_send_bw', '4096')):
            self.expect_pair(program, ['-x', '0', '-d', 'rdma_swroce0', '-n', '100', '-s', size],
                             rf'(?m)^ {size}\s+100\s+[0-9.]+')

    def test_perftest_both_atomics(self):
        for kind in ('FETCH_AND_ADD', 'CMP_AND_SWAP'):
            self.expect_pair('ib_atomic_lat', ['-x', '0', '-d', 'rdma_swroce0', '-n', '100',
                                               '-A', kind], r'(?m)^ 8\s+100\s+[0-9.]+')

    def test_ibv_asyncwatch_hears_the_port_come_and_go(self):
        # rdma-core's ibv_asyncwatch on one end of the link prints each async event; a peer
        # (ibv_devinfo on the other end) brings the link up and takes it down as it exits.
        with tempfile.TemporaryDirectory(prefix='prdma-verbs-') as tmp:
            sock = os.path.join(tmp, 'memif.sock')
            env = dict(os.environ, LD_PRELOAD=SHIM)
            watch = subprocess.Popen(
                ['stdbuf', '-oL', 'ibv_asyncwatch', '-d', 'rdma_swroce0'],
                env=dict(env, PRDMA_EAL_ARGS=eal(sock, True), PRDMA_LINK_WAIT='0'),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                time.sleep(1.0)  # its memif listener is up
                peer = subprocess.run(['ibv_devinfo', '-d', 'rdma_swroce0'],
                                      env=dict(env, PRDMA_EAL_ARGS=eal(sock, False)),
                                      capture_output=True, text=True, timeout=60)
                self.assertEqual(peer.returncode, 0, peer.stderr)
                self.assertIn('PORT_ACTIVE', peer.stdout)
                time.sleep(1.0)  # the watcher's control progress sees the link go down
            finally:
                watch.terminate()  # it runs until a signal, as on a kernel device
                out, err = watch.communicate(timeout=30)
        self.assertNotIn('libprdma-verbs:', err)
        self.assertRegex(out, r'event_type IBV_EVENT_PORT_ACTIVE \(9\), port 1\n'
                              r'\s*event_type IBV_EVENT_PORT_ERR \(10\), port 1\n', out + err)


if __name__ == '__main__':
    unittest.main(verbosity=2)
