#!/usr/bin/env python3
"""libprdma-verbs under Debian's own rdma-core binaries: ibv_devices and ibv_devinfo -v list and
describe prdma devices created from PRDMA_EAL_ARGS, as they would a kernel RDMA device; without
the variable they say there is no device and the shim says what to set; nothing crashes and no
runtime directory is left in /var/run/dpdk."""
import os
import re
import shutil
import subprocess
import unittest

SHIM = os.environ.get('PRDMA_VERBS_SHIM', '')
EAL = ('-l 0 --log-level=*:error --no-huge -m 256 --vdev=net_ring0 --vdev=net_ring1 '
       '--vdev=rdma_swroce0,port=net_ring0,ip=10.0.0.1 '
       '--vdev=rdma_swroce1,port=net_ring1,ip=10.0.0.2,mtu=4096')


def run(*argv, eal=EAL):
    env = dict(os.environ, LD_PRELOAD=SHIM)
    env.pop('PRDMA_EAL_ARGS', None)
    if eal is not None:
        env['PRDMA_EAL_ARGS'] = eal
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=env)


def runtime_dirs():
    try:
        return {d for d in os.listdir('/var/run/dpdk') if d.startswith('prdma_')}
    except FileNotFoundError:
        return set()


class VerbsShimTest(unittest.TestCase):
    def setUp(self):
        self.dirs_before = runtime_dirs()

    def tearDown(self):
        self.assertEqual(runtime_dirs() - self.dirs_before, set(), 'runtime directories left')

    def test_ibv_devices_lists_every_device_with_its_guid(self):
        out = run('ibv_devices')
        self.assertEqual(out.returncode, 0, out.stderr)
        listed = re.findall(r'^\s+(rdma_swroce\d)\s+[0-9a-f]{16}$', out.stdout, re.M)
        self.assertEqual(listed, ['rdma_swroce0', 'rdma_swroce1'], out.stdout)

    def test_ibv_devinfo_verbose_describes_a_roce_v2_device(self):
        out = run('ibv_devinfo', '-v', '-d', 'rdma_swroce1')
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(re.findall(r'^hca_id:\t(\S+)$', out.stdout, re.M), ['rdma_swroce1'])
        text = out.stdout
        self.assertIn('\ttransport:\t\t\tInfiniBand (0)', text)
        self.assertRegex(text, r'\tnode_guid:\t+[0-9a-f]{4}(:[0-9a-f]{4}){3}\n')
        self.assertRegex(text, r'\tmax_qp:\t+[1-9]\d*\n')
        self.assertRegex(text, r'\tmax_qp_rd_atom:\t+[1-9]\d*\n')
        self.assertIn('\tatomic_cap:\t\t\tATOMIC_HCA (1)', text)
        self.assertIn('MEM_MGT_EXTENSIONS', text)
        self.assertRegex(text, r'\t\t\tstate:\t+PORT_ACTIVE \(4\)')
        self.assertRegex(text, r'\t\t\tactive_mtu:\t+4096 \(5\)')
        self.assertRegex(text, r'\t\t\tlink_layer:\t+Ethernet')
        self.assertRegex(text, r'\t\t\tGID\[  0\]:\t+::ffff:10\.0\.0\.2, RoCE v2')

    def test_ibv_devinfo_lists_and_picks_ports_as_on_a_kernel_device(self):
        out = run('ibv_devinfo', '-l')
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.rstrip('\n'), '2 HCAs found:\n\trdma_swroce0\n\trdma_swroce1')
        out = run('ibv_devinfo', '-d', 'rdma_swroce0', '-i', '1')
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn('\t\tport:\t1\n', out.stdout)
        self.assertRegex(out.stdout, r'\t\t\tactive_mtu:\t+1024 \(3\)')

    def test_without_the_environment_there_is_no_device_and_the_shim_says_why(self):
        out = run('ibv_devinfo', eal=None)
        self.assertIn('No IB devices found', out.stdout + out.stderr)
        self.assertIn('libprdma-verbs: PRDMA_EAL_ARGS is not set', out.stderr)
        self.assertGreaterEqual(out.returncode, 0, 'killed by a signal')

    @unittest.skipUnless(shutil.which('ib_write_lat'), 'perftest is not installed')
    def test_rdma_cm_is_refused_in_one_clear_line(self):
        out = run('ib_write_lat', '-R', '-d', 'rdma_swroce0', '127.0.0.1')
        self.assertNotEqual(out.returncode, 0)
        self.assertGreater(out.returncode, 0, 'killed by a signal')
        self.assertIn('libprdma-verbs: rdma_create_event_channel: rdma_cm is not supported',
                      out.stderr)

    def test_bad_eal_arguments_are_reported_not_fatal(self):
        out = run('ibv_devinfo', eal='--vdev=rdma_swroce0,port=net_nope0,ip=10.0.0.1 -l 0 '
                                     '--no-huge -m 256')
        self.assertIn('No IB devices found', out.stdout + out.stderr)
        self.assertIn('libprdma-verbs: ', out.stderr)
        self.assertGreaterEqual(out.returncode, 0, 'killed by a signal')


if __name__ == '__main__':
    unittest.main(verbosity=2)
