#!/usr/bin/env python3
"""prdma between two "hosts" of usertools/prdma-testbed (network namespaces joined by a bridge):
prdma-perf's WRITE, READ, SEND and atomics, verified byte for byte, on net_af_packet and
net_af_xdp over the same veth; the examples (rc_pingpong, write_read) across the hosts; and the
same under loss, with tc netem where the kernel has it and swroce's fault devargs where not.
Needs root; builds the test-bed itself and takes it down at the end."""
import os
import re
import subprocess
import sys
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TESTBED = os.path.join(TOP, 'usertools', 'prdma-testbed')
PERF = os.environ.get('PRDMA_PERF', '')
EXAMPLES = os.environ.get('PRDMA_EXAMPLES', '')
BW_ROW = re.compile(r'^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$', re.M)
LAT_ROW = re.compile(r'^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+', re.M)
PORTS = iter(range(19500, 19999))


def testbed(*args):
    return subprocess.run([TESTBED] + list(args), capture_output=True, text=True, timeout=120)


def eal(host, core, pmd, devargs=''):
    port = f'net_{pmd}0'
    return ['-l', str(core), '--no-telemetry', '--log-level=lib.eal:error',
            '--log-level=pmd.net.af_xdp:error', '--log-level=prdma.*:warning',
            f'--vdev={port},iface=data0', f'--vdev=rdma_swroce0,port={port},ip=10.100.0.{host}'
            f'{devargs}', '--']


def in_host(host, argv):
    return ['ip', 'netns', 'exec', f'prdma-h{host}'] + argv


def run_across(server_argv, client_argv, timeout=120):
    """Server on host 1 (core 0), client on host 2 (core 1); (rc, out, err) of each."""
    server = subprocess.Popen(in_host(1, server_argv), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    client = subprocess.Popen(in_host(2, client_argv), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        c_out, c_err = client.communicate(timeout=timeout)
        s_out, s_err = server.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        client.kill()
        server.kill()
        c_out, c_err = client.communicate()
        s_out, s_err = server.communicate()
        raise AssertionError(f'timed out\nclient:\n{c_out}{c_err}\nserver:\n{s_out}{s_err}')
    return (client.returncode, c_out, c_err), (server.returncode, s_out, s_err)


def perf(test, pmd, args, devargs=('', '')):
    port = str(next(PORTS))
    server = [PERF, test] + eal(1, 0, pmd, devargs[0]) + list(args) + ['-p', port]
    client = [PERF, test] + eal(2, 1, pmd, devargs[1]) + list(args) + ['-p', port,
                                                                        '192.168.100.1']
    return run_across(server, client)


class MultiHost(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest('the test-bed needs root')
        up = testbed('up', '--hosts', '2')
        if up.returncode != 0:
            raise AssertionError(f'prdma-testbed up failed:\n{up.stdout}{up.stderr}')

    @classmethod
    def tearDownClass(cls):
        testbed('down')

    def check(self, result, what):
        (rc_c, out_c, err_c), (rc_s, out_s, err_s) = result
        detail = f'{what}\nclient:\n{out_c}{err_c}\nserver:\n{out_s}{err_s}'
        self.assertEqual((rc_c, rc_s), (0, 0), detail)
        return out_c, out_s, detail

    def verified_tests(self, pmd):
        for test, args in (('write_lat', ['-n', '300', '-s', '64']),
                           ('write_bw', ['-n', '2000', '-s', '4096']),
                           ('read_bw', ['-n', '1000', '-s', '8192']),
                           ('send_bw', ['-n', '1000', '-s', '1500']),
                           ('atomic_bw', ['-n', '500']),
                           ('read_lat', ['-n', '300', '-s', '2048'])):
            with self.subTest(pmd=pmd, test=test):
                out_c, out_s, detail = self.check(perf(test, pmd, args + ['--verify']),
                                                  f'{test} on {pmd}')
                self.assertIn('Data verif', out_c + out_s, detail)
                self.assertNotIn('FAILED', out_c + out_s, detail)
                self.assertTrue(BW_ROW.search(out_c) or LAT_ROW.search(out_c), detail)

    def test_af_packet(self):
        self.verified_tests('af_packet')

    def test_af_xdp(self):
        self.verified_tests('af_xdp')

    def test_an_ib_mtu_the_port_cannot_carry_is_named(self):
        # DPDK 22.11's af_packet takes frames of at most 1518 bytes whatever the veth's MTU;
        # configure used to refuse mtu=2048 with a bare "Invalid argument".
        out = subprocess.run(in_host(1, [PERF, 'write_bw'] +
                                     eal(1, 0, 'af_packet', ',mtu=2048') + ['-n', '10']),
                             capture_output=True, text=True, timeout=60)
        self.assertNotEqual(out.returncode, 0, out.stdout)
        self.assertIn('ethdev net_af_packet0 (net_af_packet) carries an Ethernet MTU of at most '
                      '1500; IB MTU 2048 needs 2132', out.stderr)

    def test_examples_across_hosts(self):
        for pmd in ('af_packet', 'af_xdp'):
            for example, args in (('rc_pingpong', ['-s', '4096', '-n', '200']),
                                  ('write_read', ['-s', '10000', '-n', '3'])):
                with self.subTest(example=example, pmd=pmd):
                    binary = os.path.join(EXAMPLES, example)
                    port = str(next(PORTS))
                    server = [binary] + eal(1, 0, pmd) + args + ['-p', port]
                    client = [binary] + eal(2, 1, pmd) + args + ['-p', port, '192.168.100.1']
                    self.check(run_across(server, client), f'{example} on {pmd}')

    def test_under_loss(self):
        """1 % of frames lost at each receiver (swroce's devargs; this kernel may lack netem):
        every byte still arrives, and the loss was recovered by retransmission."""
        loss = ',rx_drop=0.01,seed=7'
        for test, args in (('write_bw', ['-n', '2000', '-s', '8192']),
                           ('read_bw', ['-n', '1000', '-s', '8192']),
                           ('send_bw', ['-n', '1000', '-s', '4096'])):
            with self.subTest(test=test):
                result = perf(test, 'af_packet', args + ['--verify', '--stats'], (loss, loss))
                out_c, out_s, detail = self.check(result, f'{test} under loss')
                self.assertNotIn('FAILED', out_c + out_s, detail)
                stats = result[0][2] + result[1][2]  # --stats: both sides' counters on stderr
                dropped = sum(int(n) for n in re.findall(r'rx_dropped_injected=(\d+)', stats))
                resent = sum(int(n) for n in re.findall(r'retransmissions=(\d+)', stats))
                self.assertGreater(dropped, 0, detail)
                self.assertGreater(resent, 0, detail)

    def test_under_netem_loss(self):
        probe = subprocess.run(['ip', 'netns', 'exec', 'prdma-sw', 'tc', 'qdisc', 'replace',
                                'dev', 'd1', 'root', 'netem', 'loss', '1%'],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            self.skipTest(f'no tc netem on this kernel ({probe.stderr.strip()}); '
                          'test_under_loss uses swroce\'s fault devargs instead')
        try:
            subprocess.run(['ip', 'netns', 'exec', 'prdma-sw', 'tc', 'qdisc', 'replace', 'dev',
                            'd2', 'root', 'netem', 'loss', '1%'], check=True)
            out_c, out_s, detail = self.check(
                perf('write_bw', 'af_packet', ['-n', '2000', '-s', '8192', '--verify']),
                'write_bw under netem loss')
            self.assertNotIn('FAILED', out_c + out_s, detail)
        finally:
            for dev in ('d1', 'd2'):
                subprocess.run(['ip', 'netns', 'exec', 'prdma-sw', 'tc', 'qdisc', 'del', 'dev',
                                dev, 'root'], capture_output=True)


if __name__ == '__main__':
    if not PERF or not EXAMPLES:
        sys.exit('PRDMA_PERF and PRDMA_EXAMPLES must name the build\'s prdma-perf and examples/')
    unittest.main()
