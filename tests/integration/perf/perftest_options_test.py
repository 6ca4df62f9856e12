#!/usr/bin/env python3
"""prdma-perf's perftest options between two real processes over net_memif: -H and -U sample
lists, -b (both sides post, each prints the sum; send_bw too), -l (post lists), -N, --out_json
and --out_json_file (perftest's layout), --json (the same objects on stdout), --run_infinitely
(a line per interval until the client is stopped; send_bw's receiver prints its own), bundled
short options and -V; and the core each side is placed on when the command line does not
say."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prdma_perf_test import BW_ROW, LAT_ROW, PERF, eal, free_port, rows, run_pair  # noqa: E402

SAMPLE = re.compile(r'^(\d+), ([\d.e+-]+)$')


def sample_lists(out):
    """The "#, usec" lists in `out`, each as a list of (index, value)."""
    lists = []
    for line in out.splitlines():
        if line == '#, usec':
            lists.append([])
        elif lists and SAMPLE.match(line):
            m = SAMPLE.match(line)
            lists[-1].append((int(m.group(1)), float(m.group(2))))
    return lists


class PerftestOptions(unittest.TestCase):
    def run_ok(self, test, args=(), server_args=None, **pair):
        rc_c, out_c, err_c, rc_s, out_s, err_s, _ = run_pair(test, args, server_args=server_args,
                                                             **pair)
        detail = f'client:\n{out_c}{err_c}\nserver:\n{out_s}{err_s}'
        self.assertEqual((rc_c, rc_s), (0, 0), detail)
        return out_c, out_s, detail

    def test_histogram_and_unsorted_samples(self):
        out_c, _, detail = self.run_ok('write_lat', ('-n', '100', '-U', '-H'))
        unsorted, histogram = sample_lists(out_c)
        # -U: every delta between 100 posts; -H: sorted, the largest two dropped.
        self.assertEqual([i for i, _ in unsorted], list(range(1, 100)), detail)
        self.assertEqual([i for i, _ in histogram], list(range(1, 98)), detail)
        values = [v for _, v in histogram]
        self.assertEqual(values, sorted(values))
        self.assertEqual(values, sorted(v for _, v in unsorted)[:97])
        row = rows(out_c, LAT_ROW)
        self.assertEqual(len(row), 1, detail)
        # The row's t_min is the list's first; its t_max, as perftest's, the sample just above
        # the list (the second largest of all).
        everything = sorted(v for _, v in unsorted)
        self.assertAlmostEqual(float(row[0].group(3)), values[0], delta=0.006)
        self.assertAlmostEqual(float(row[0].group(4)), everything[-2], delta=0.006)

    def test_bidirectional_write_bw_sums_both_sides(self):
        out_c, out_s, detail = self.run_ok('write_bw', ('-b', '-n', '2000', '-s', '4096'))
        self.assertIn('RDMA_Write Bidirectional BW Test', out_c)
        self.assertIn(' TX depth        : 128', out_s)  # the server posts too
        client, server = rows(out_c, BW_ROW), rows(out_s, BW_ROW)
        self.assertEqual((len(client), len(server)), (1, 1), detail)
        # Each side prints the sum of both, so the two lines agree.
        self.assertEqual(client[0].group(4), server[0].group(4), detail)
        self.assertEqual(client[0].group(2), '2000')
        self.assertGreater(float(client[0].group(4)), 0)

    def test_bidirectional_read_bw(self):
        out_c, out_s, detail = self.run_ok('read_bw', ('-b', '-n', '1000', '-s', '1024'))
        self.assertEqual(rows(out_c, BW_ROW)[0].group(5), rows(out_s, BW_ROW)[0].group(5), detail)

    def test_post_list_and_no_peak(self):
        out_c, out_s, detail = self.run_ok('write_bw', ('-l', '8', '-n', '800', '-s', '64', '-N'))
        self.assertIn('RDMA_Write Post List BW Test', out_c)
        self.assertIn(' Post List       : 8', out_c)
        self.assertIn(' CQ Moderation   : 8', out_c)  # perftest: one completion per list
        found = rows(out_c, BW_ROW)
        self.assertEqual(found[0].group(2), '800', detail)
        self.assertEqual(found[0].group(3), '0.00', detail)  # -N: no peak
        self.assertGreater(float(found[0].group(4)), 0)

    def test_out_json_file_has_perftests_layout(self):
        with tempfile.TemporaryDirectory(prefix='prdma-json-') as tmp:
            path = os.path.join(tmp, 'client.json')
            self.run_ok('send_lat', ('-n', '200', '--out_json', f'--out_json_file={path}'),
                        server_args=('-n', '200'))
            with open(path, encoding='utf-8') as f:
                data = json.load(f)
        self.assertEqual(list(data), ['test_info', 'results'])
        self.assertEqual(data['test_info']['test'], 'Send_Latency_Test')
        self.assertEqual(data['test_info']['Max_inline_data'], 236)
        self.assertEqual(list(data['results']),
                         ['MsgSize', 'n_iterations', 't_min', 't_max', 't_typical', 't_avg',
                          't_stdev', 'percentile_99', 'percentile_99.9'])
        self.assertEqual((data['results']['MsgSize'], data['results']['n_iterations']), (2, 200))

    def test_out_json_default_name_in_the_working_directory(self):
        with tempfile.TemporaryDirectory(prefix='prdma-json-') as tmp:
            cwd = os.getcwd()
            os.chdir(tmp)
            try:
                self.run_ok('write_bw', ('-n', '500', '--out_json'))
            finally:
                os.chdir(cwd)
            with open(os.path.join(tmp, 'perftest_out.json'), encoding='utf-8') as f:
                data = json.load(f)
        self.assertEqual(data['test_info']['test'], 'RDMA_Write_BW_Test')
        self.assertEqual(list(data['results']),
                         ['MsgSize', 'n_iterations', 'BW_peak', 'BW_average', 'MsgRate'])

    def test_json_on_stdout_one_object_per_size(self):
        out_c, _, detail = self.run_ok('read_lat', ('-n', '100', '--sizes', '8,512', '--json'))
        objects = [json.loads(line) for line in out_c.splitlines() if line.startswith('{')]
        self.assertEqual([o['results']['MsgSize'] for o in objects], [8, 512], detail)
        self.assertNotIn('t_typical[usec]', out_c)  # the objects replace the table

    def test_bundled_short_options(self):
        out_c, _, detail = self.run_ok('write_lat', ('-Fn50', '-s8'))
        self.assertEqual(rows(out_c, LAT_ROW)[0].group(1, 2), ('8', '50'), detail)

    def run_until_stopped(self, test, extra=()):
        """--run_infinitely -D 1 on both sides; the client is stopped with SIGINT after three
        lines. Returns (the client's lines, the server's output, detail)."""
        with tempfile.TemporaryDirectory(prefix='prdma-perf-') as tmp:
            sock = os.path.join(tmp, 'memif.sock')
            port = str(free_port())
            args = ['--run_infinitely', '-D', '1', '-s', '4096', '-p', port, *extra]
            server = subprocess.Popen([PERF, test] + eal('server', sock, '10.0.0.1', 0) +
                                      args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
            deadline = time.monotonic() + 20
            while not os.path.exists(sock) and time.monotonic() < deadline:
                time.sleep(0.01)
            client = subprocess.Popen([PERF, test] + eal('client', sock, '10.0.0.2', 1) +
                                      args + ['127.0.0.1'], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
            lines = []
            deadline = time.monotonic() + 30
            while len(lines) < 3 and time.monotonic() < deadline:
                line = client.stdout.readline()
                if not line:
                    break
                if BW_ROW.match(line):
                    lines.append(BW_ROW.match(line))
            client.send_signal(signal.SIGINT)
            try:
                c_out, c_err = client.communicate(timeout=20)
                s_out, s_err = server.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                client.kill()
                server.kill()
                raise
        detail = f'client:\n{c_out}{c_err}\nserver:\n{s_out}{s_err}'
        self.assertEqual(len(lines), 3, detail)
        for m in lines:
            self.assertEqual(m.group(3), '0.00')  # no peak in a timed run
            self.assertGreater(float(m.group(4)), 0)
        self.assertEqual(server.returncode, 0, detail)
        self.assertIn('The client stopped', s_out)
        return lines, s_out, detail

    def test_run_infinitely_until_stopped(self):
        self.run_until_stopped('write_bw')

    def test_run_infinitely_send_bw(self):
        # The receiver measures its own side: a line per interval of what arrived in it.
        _, s_out, detail = self.run_until_stopped('send_bw')
        received = rows(s_out, BW_ROW)
        self.assertGreaterEqual(len(received), 2, detail)
        self.assertTrue(all(float(m.group(4)) > 0 for m in received[:2]), detail)

    def test_bidirectional_send_bw_sums_both_sides(self):
        out_c, out_s, detail = self.run_ok('send_bw', ('-b', '-n', '3000', '--sizes', '64,4096'))
        self.assertIn('Send Bidirectional BW Test', out_c)
        client, server = rows(out_c, BW_ROW), rows(out_s, BW_ROW)
        self.assertEqual((len(client), len(server)), (2, 2), detail)
        for c, s in zip(client, server):
            self.assertEqual(c.group(2), '3000', detail)
            self.assertEqual(c.group(4), s.group(4), detail)  # each prints the sum of both
            self.assertGreater(float(c.group(4)), 0, detail)

    def test_use_srq_serves_every_qp_from_one_srq(self):
        # 4 QPs whose only receives are the SRQ's 16 (4 each, reposted as they complete): the
        # run finishes only if every QP takes its receives from the SRQ.
        out_c, out_s, detail = self.run_ok(
            'send_bw', ('-q', '4', '--use-srq', '-r', '16', '-n', '2000', '--sizes', '64,4096'))
        for out in (out_c, out_s):
            self.assertIn('Using SRQ      : ON', out, detail)
        client, server = rows(out_c, BW_ROW), rows(out_s, BW_ROW)
        self.assertEqual((len(client), len(server)), (2, 2), detail)
        for row in client + server:
            self.assertEqual(row.group(2), '8000', detail)
            self.assertGreater(float(row.group(4)), 0, detail)
        out_c, _, detail = self.run_ok('send_lat', ('--use-srq', '-n', '500', '--sizes', '8,4096'))
        self.assertIn('Using SRQ      : ON', out_c, detail)
        self.assertEqual(len(rows(out_c, LAT_ROW)), 2, detail)

    def test_ud_send_lat_sends_datagrams_through_address_handles(self):
        # -c UD: each side's QP sends to its peer's through an address handle made from the GID
        # in the key message (its MAC found by ARP); the receives hold the GRH too. 1024 B is the
        # whole MTU of one packet.
        out_c, out_s, detail = self.run_ok('send_lat', ('-c', 'UD', '-n', '500', '--sizes',
                                                        '8,1024'))
        for out in (out_c, out_s):
            self.assertIn('Connection type : UD', out, detail)
            self.assertIn('Max inline data : 188[B]', out, detail)  # perftest's UD default
        self.assertEqual(len(rows(out_c, LAT_ROW)), 2, detail)
        # -a stops at the MTU, as perftest's does; a size beyond it is refused before the run.
        out_c, _, detail = self.run_ok('send_lat', ('-c', 'UD', '-a', '-n', '100'))
        self.assertIn('Max msg size in UD is MTU 1024', out_c, detail)
        self.assertEqual([r.group(1) for r in rows(out_c, LAT_ROW)],
                         [str(1 << i) for i in range(1, 11)], detail)
        rc_c, out_c, err_c, _, _, _, _ = run_pair('send_lat', ('-c', 'UD', '--sizes', '2048'))
        self.assertNotEqual(rc_c, 0, out_c)
        self.assertIn('messages of at most the MTU (1024 B)', err_c)
        # At a 4096 B MTU a 4096 B datagram's receive is 4136 B: the slot holds it.
        out_c, _, detail = self.run_ok(
            'send_lat', ('-c', 'UD', '-n', '200', '--sizes', '4096'),
            memif=',bsize=4224', devargs=(',mtu=4096', ',mtu=4096'))
        self.assertEqual(len(rows(out_c, LAT_ROW)), 1, detail)

    def test_ud_send_bw_server_counts_lost_datagrams(self):
        # The server drops a tenth of what arrives (rx_drop): it must not wait for those, but
        # stop once the client has moved on, report what arrived and count the rest as lost.
        # A receive for every datagram is posted up front, so the path is all that loses them,
        # and the receive queue holds exactly that many: the next size must post only what the
        # lost datagrams' receives, still posted, leave room for.
        args = ('-c', 'UD', '-n', '2048', '-r', '2048', '--sizes', '64,1024')
        out_c, out_s, detail = self.run_ok('send_bw', args, server_args=args + ('--stats',),
                                           devargs=(',rx_drop=0.1,seed=5', ''))
        for out in (out_c, out_s):
            self.assertIn('Connection type : UD', out, detail)
        client, server = rows(out_c, BW_ROW), rows(out_s, BW_ROW)
        self.assertEqual((len(client), len(server)), (2, 2), detail)
        self.assertEqual([r.group(2) for r in client], ['2048', '2048'], detail)
        losses = re.findall(r'^ Datagrams: (\d+) of (\d+) arrived, (\d+) lost', out_s, re.M)
        self.assertEqual(len(losses), 2, detail)
        for row, (arrived, sent, lost) in zip(server, losses):
            self.assertEqual((row.group(2), sent), (arrived, '2048'), detail)
            self.assertGreater(int(lost), 100, detail)  # about 205 of 2048
            self.assertLess(int(lost), 310, detail)
        # What was lost is what the fault dropped (an ARP frame or two may be among those), and
        # no datagram found its receive queue empty.
        # --stats (on the server's stderr) prints the counters that are not zero.
        stats = dict(re.findall(r'^  (\w+)=(\d+)$', detail, re.M))
        injected = int(stats.get('rx_dropped_injected', 0))
        self.assertEqual(int(stats.get('rx_ud_dropped', 0)), 0, detail)
        self.assertLessEqual(sum(int(lost) for _, _, lost in losses), injected, detail)
        self.assertGreaterEqual(sum(int(lost) for _, _, lost in losses), injected - 4, detail)
        # Four UD QPs on one SRQ of 16, two sizes: what finds it empty is lost, and the device
        # counts it (a straggler counted lost in one size may still land in the next); the
        # receives those left posted carry over through the SRQ.
        args = ('-c', 'UD', '--use-srq', '-q', '4', '-r', '16', '-n', '2000', '--sizes',
                '64,1024')
        _, out_s, detail = self.run_ok('send_bw', args, server_args=args + ('--stats',))
        self.assertIn('Using SRQ      : ON', out_s, detail)
        losses = re.findall(r'^ Datagrams: (\d+) of 8000 arrived, (\d+) lost', out_s, re.M)
        self.assertEqual(len(losses), 2, detail)
        lost = sum(int(n) for _, n in losses)
        dropped = int(dict(re.findall(r'^  (\w+)=(\d+)$', detail, re.M)).get('rx_ud_dropped', 0))
        self.assertGreater(sum(int(n) for n, _ in losses), 0, detail)
        self.assertLessEqual(dropped, lost, detail)
        self.assertLessEqual(lost - dropped, 16, detail)
        out_c, _, detail = self.run_ok('send_lat', ('-c', 'UD', '--use-srq', '-n', '200',
                                                    '--sizes', '8,1024'))
        self.assertEqual(len(rows(out_c, LAT_ROW)), 2, detail)
        # A lossless path and receives enough for every datagram: nothing lost, as JSON too.
        _, out_s, detail = self.run_ok('send_bw', ('-c', 'UD', '-n', '200', '-s', '64',
                                                   '--json'))
        result = json.loads(next(line for line in out_s.splitlines()
                                 if line.startswith('{')))['results']
        self.assertEqual((result['n_iterations'], result['lost']), (200, 0), detail)

    def test_version_names_both(self):
        out = subprocess.run([PERF, 'write_bw', '-V'], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0)
        self.assertTrue(out.stdout.startswith('Version: 6.06\n'), out.stdout)
        self.assertIn('prdma-perf 0.', out.stdout)

    def test_bad_combinations_are_refused(self):
        for test, args, says in (
                ('write_lat', ['-b'], 'bandwidth tests only'),
                ('write_bw', ['-H'], 'latency tests'),
                ('write_bw', ['-l', '8', '-Q', '3'], 'multiple of the CQ moderation'),
                ('write_bw', ['-l', '7', '-n', '100'], 'multiple of the post list'),
                ('write_bw', ['-n', '10', '-n', '20'], 'given twice'),
                ('write_bw', ['--run_infinitely', '-n', '100'], 'cannot be combined with -n'),
                ('write_bw', ['-Fz'], "unknown option '-z' in '-Fz'"),
                ('write_bw', ['--out'], 'ambiguous'),
                ('write_bw', ['--use-srq'], 'send_lat and send_bw only'),
                ('send_bw', ['--use-srq', '--verify'], 'cannot be combined'),
                ('write_bw', ['-c', 'UD'], 'a datagram is a SEND'),
                ('send_bw', ['-c', 'UD', '-b'], '-c UD with -b is not supported'),
                ('send_lat', ['-c', 'UD', '--verify'], '-c UD with --verify is not supported'),
                ('send_lat', ['-c', 'UC'], "connection type 'UC' is not supported")):
            out = subprocess.run([PERF, test] + args, capture_output=True, text=True, timeout=30)
            self.assertEqual(out.returncode, 1, (args, out.stderr))
            self.assertIn(says, out.stderr, args)


def placed_core(pid):
    """The CPUs the process's EAL main thread may run on."""
    with open(f'/proc/{pid}/status', encoding='utf-8') as f:
        for line in f:
            if line.startswith('Cpus_allowed_list:'):
                return line.split(':')[1].strip()
    return ''


class Placement(unittest.TestCase):
    def test_sides_on_different_cores_without_l(self):
        """No -l: each side is pinned near its port, the two on different cores."""
        if os.cpu_count() < 2:
            self.skipTest('one CPU')
        port = str(free_port())
        sock = f'/tmp/prdma-perf-{port}.sock'
        server = subprocess.Popen([PERF, 'write_bw', '-p', port, '-D', '3'],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        client = None
        try:
            deadline = time.monotonic() + 20
            while not os.path.exists(sock) and time.monotonic() < deadline:
                time.sleep(0.01)
            client = subprocess.Popen([PERF, 'write_bw', '-p', port, '-D', '3', '127.0.0.1'],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1.5)  # both in the timed run
            cores = (placed_core(server.pid), placed_core(client.pid))
            c_out, c_err = client.communicate(timeout=60)
        finally:
            if client is not None and client.poll() is None:
                client.kill()
            s_out, s_err = server.communicate(timeout=30)
        self.assertEqual((client.returncode, server.returncode), (0, 0), c_err + s_err)
        self.assertRegex(cores[0], r'^\d+$')
        self.assertRegex(cores[1], r'^\d+$')
        self.assertNotEqual(cores[0], cores[1])


if __name__ == '__main__':
    unittest.main()
