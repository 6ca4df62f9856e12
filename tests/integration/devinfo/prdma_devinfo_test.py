#!/usr/bin/env python3
"""prdma-devinfo end to end: ibv_devinfo's -d, -i, -l and -v on swroce devices created from the
EAL command line, its own --help, clear errors for bad options, and the exit path with devices
alive at EAL cleanup run 100 times without a crash, a teardown complaint or a runtime directory
left in /var/run/dpdk."""
import os
import re
import subprocess
import tempfile
import unittest

DEVINFO = os.environ.get('PRDMA_DEVINFO', '')
EAL = ['-l', '0', '--log-level=*:error', '--vdev=net_ring0', '--vdev=net_ring1',
       '--vdev=rdma_swroce0,port=net_ring0,ip=10.0.0.1',
       '--vdev=rdma_swroce1,port=net_ring1,ip=10.0.0.2,mtu=4096']
TEARDOWN_TROUBLE = re.compile(r'not ready port|Invalid port_id|Cannot close|Segmentation|Aborted')


def devinfo(*options, eal=EAL):
    args = [DEVINFO] + eal + (['--'] + list(options) if options else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def runtime_dirs():
    try:
        return {d for d in os.listdir('/var/run/dpdk') if d.startswith('prdma_')}
    except FileNotFoundError:
        return set()


class DevinfoTest(unittest.TestCase):
    def test_help_without_double_dash(self):
        for args in (['--help'], ['-h'], ['-l', '0', '--', '--help']):
            out = subprocess.run([DEVINFO] + args, capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertTrue(out.stdout.startswith('Usage: prdma-devinfo'), out.stdout)
            self.assertIn('--ib-dev', out.stdout)

    def test_every_device_as_ibv_devinfo_prints_it(self):
        out = devinfo()
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(re.findall(r'^hca_id:\t(\S+)$', out.stdout, re.M),
                         ['rdma_swroce0', 'rdma_swroce1'])
        self.assertEqual(len(re.findall(r'^\tnode_guid:\t+[0-9a-f]{4}(:[0-9a-f]{4}){3}$',
                                        out.stdout, re.M)), 2)
        self.assertIn('\ttransport:\t\t\tInfiniBand (0)', out.stdout)
        self.assertRegex(out.stdout, r'\tethdev:\t+net_ring0 \(port \d+, driver net_ring\)')
        self.assertRegex(out.stdout, r'\t\t\tstate:\t+PORT_ACTIVE \(4\)')
        self.assertRegex(out.stdout, r'\t\t\tactive_mtu:\t+4096 \(5\)')
        self.assertRegex(out.stdout, r'\t\t\tlink_layer:\t+Ethernet')
        self.assertNotIn('GID[', out.stdout)  # GIDs with -v, as ibv_devinfo

    def test_one_device_verbose_with_its_gids(self):
        out = devinfo('-d', 'rdma_swroce1', '-v')
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(re.findall(r'^hca_id:\t(\S+)$', out.stdout, re.M), ['rdma_swroce1'])
        self.assertRegex(out.stdout, r'\tmax_qp:\t+\d+')
        self.assertRegex(out.stdout, r'\tmax_srq:\t+[1-9]\d*\n\tmax_srq_wr:\t+[1-9]')
        self.assertRegex(out.stdout, r'\t\t\tGID\[  0\]:\t+::ffff:10\.0\.0\.2, RoCE v2')

    def test_list_and_bundled_options(self):
        out = devinfo('-lv')
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, '2 HCAs found:\n\trdma_swroce0\n\trdma_swroce1\n')
        out = devinfo('--ib-dev=rdma_swroce0', '--ib-port=1')
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn('\t\tport:\t1\n', out.stdout)

    def test_no_device(self):
        out = devinfo(eal=['-l', '0', '--log-level=*:error'])
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, 'No IB devices found\n')

    def test_bad_options_say_what_is_wrong(self):
        cases = [
            (['-d', 'rdma_nope0'], 1, "no rdma device named 'rdma_nope0'"),
            (['-d', 'rdma_swroce0', '-i', '2'], 1, 'there is no port 2'),
            (['-i', 'x'], 2, "-i needs a port number 1..255, not 'x'"),
            (['-i'], 2, "option '-i' needs a value"),
            (['-lx'], 2, "unknown option '-x'"),
            (['--bogus'], 2, "unknown option '--bogus'"),
            (['extra'], 2, "unexpected argument 'extra'"),
        ]
        for options, rc, message in cases:
            with self.subTest(options=options):
                out = devinfo(*options)
                self.assertEqual(out.returncode, rc, out.stdout + out.stderr)
                self.assertIn(message, out.stderr)
                self.assertNotIn('hca_id', out.stdout)

    def test_bad_options_are_said_before_the_eal_starts(self):
        # An EAL that cannot start (its device's port does not exist) must not hide the mistake in
        # prdma-devinfo's own options, nor run first: the option is checked, exit 2.
        broken = ['-l', '0', '--log-level=*:error',
                  '--vdev=rdma_swroce0,port=net_nope0,ip=10.0.0.1']
        for options, message in ((['-x'], "unknown option '-x' (try --help)"),
                                 (['-i', '0'], "-i needs a port number 1..255, not '0'")):
            with self.subTest(options=options):
                out = devinfo(*options, eal=broken)
                self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
                self.assertEqual(out.stderr, f'prdma-devinfo: {message}\n')

    def test_exit_with_live_devices_100_times(self):
        """The README's command once ended in a stack trace at EAL cleanup; here it runs 100
        times, on ring ports and on an unconnected memif port, and each run exits 0 with nothing
        said about teardown and its runtime directory gone."""
        before = runtime_dirs()
        with tempfile.TemporaryDirectory(prefix='prdma-devinfo-') as tmp:
            memif = ['-l', '0', '--log-level=*:error',
                     f'--vdev=net_memif0,role=server,socket={tmp}/m.sock,socket-abstract=no',
                     '--vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.1']
            for i in range(100):
                out = devinfo(eal=memif if i % 2 else EAL)
                self.assertEqual(out.returncode, 0, f'run {i}: {out.stderr}')
                self.assertIsNone(TEARDOWN_TROUBLE.search(out.stderr), f'run {i}: {out.stderr}')
                self.assertIn('hca_id:\trdma_swroce0', out.stdout)
        self.assertEqual(runtime_dirs() - before, set())


if __name__ == '__main__':
    unittest.main(verbosity=2)
