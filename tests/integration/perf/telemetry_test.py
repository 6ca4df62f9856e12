#!/usr/bin/env python3
"""Telemetry from a running prdma-perf, read with DPDK's own dpdk-telemetry.py (Debian package
dpdk-dev): /rdmadev/list, info, stats (live: the counters grow between two reads), qp_list and
qp_info, and a malformed parameter answered with null. The run is a timed 64 B write_bw (-D),
which also must end: it used to wait forever for completions of unsignaled WRs."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

PERF = os.environ.get('PRDMA_PERF', '')
TELEMETRY = shutil.which('dpdk-telemetry.py')


def eal(role, sock, ip, core, prefix):
    return ['-l', str(core), f'--file-prefix={prefix}', '--log-level=lib.eal:error',
            '--log-level=pmd.net.memif:error', '--log-level=prdma.*:warning',
            f'--vdev=net_memif0,role={role},socket={sock},socket-abstract=no,id=0',
            f'--vdev=rdma_swroce0,port=net_memif0,ip={ip}', '--']


def query(prefix, *commands):
    """Each command's answer, in order, as dpdk-telemetry.py prints them."""
    out = subprocess.run([TELEMETRY, '-f', prefix], input='\n'.join(commands) + '\n',
                         capture_output=True, text=True, timeout=30)
    # The first object is the greeting (version, pid, max_output_len), then one per command.
    replies = [json.loads(line) for line in out.stdout.splitlines() if line.startswith('{')]
    answers = [r[c.split(',')[0]] for r, c in zip(replies[-len(commands):], commands)]
    return answers + ['missing'] * (len(commands) - len(answers)), out


class TelemetryTest(unittest.TestCase):
    def test_live_counters_from_a_running_prdma_perf(self):
        self.assertIsNotNone(TELEMETRY, 'dpdk-telemetry.py is missing: usertools/prdma-setup '
                                        'deps installs dpdk-dev')
        prefix = f'prdma_tel_{os.getpid()}'
        with tempfile.TemporaryDirectory(prefix='prdma-tel-') as tmp:
            sock = f'{tmp}/memif.sock'
            port = '18' + str(os.getpid() % 1000).zfill(3)
            args = ['write_bw', '-s', '64', '-D', '6', '-p', port]
            server = subprocess.Popen([PERF] + args[:1] + eal('server', sock, '10.0.0.1', 0, prefix)
                                      + args[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True)
            try:
                deadline = time.monotonic() + 20
                while not os.path.exists(sock) and time.monotonic() < deadline:
                    time.sleep(0.05)
                client = subprocess.Popen(
                    [PERF] + args[:1] + eal('client', sock, '10.0.0.2', 1, prefix + '_c')
                    + args[1:] + ['127.0.0.1'], stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True)
                time.sleep(3)  # connected and running
                (ids, info, stats, qps), raw = query(
                    prefix, '/rdmadev/list', '/rdmadev/info,0', '/rdmadev/stats,0',
                    '/rdmadev/qp_list,0')
                self.assertEqual(ids, [0], raw.stdout + raw.stderr)
                self.assertEqual(info['name'], 'rdma_swroce0')
                self.assertEqual(info['devargs'], 'port=net_memif0,ip=10.0.0.1')
                self.assertEqual(info['port1_state'], 'PORT_ACTIVE')
                self.assertGreater(info['max_srq'], 0)
                self.assertRegex(info['node_guid'], r'^[0-9a-f]{4}(:[0-9a-f]{4}){3}$')
                self.assertEqual(len(qps), 1)
                (qp, later, bad, no_qp), raw = query(
                    prefix, f'/rdmadev/qp_info,0,{qps[0]}', '/rdmadev/stats,0',
                    '/rdmadev/info,x', '/rdmadev/qp_info,0,99999')
                self.assertEqual(qp['state'], 'RTS', raw.stdout)
                self.assertEqual(qp['qpn'], qps[0])
                self.assertGreater(qp['expected_psn'], 0)  # the server receives the WRITEs
                self.assertIn('retries_left', qp)
                self.assertGreater(stats['rx_packets'], 0)
                self.assertGreater(later['rx_packets'], stats['rx_packets'])  # live
                self.assertIsNone(bad)
                self.assertIsNone(no_qp)
                c_out, _ = client.communicate(timeout=60)
                s_out, _ = server.communicate(timeout=60)
                self.assertEqual(client.returncode, 0, c_out)
                self.assertEqual(server.returncode, 0, s_out)
            finally:
                for p in (server, locals().get('client')):
                    if p is not None and p.poll() is None:
                        p.kill()
                        p.wait()
                for d in (prefix, prefix + '_c'):
                    shutil.rmtree(f'/var/run/dpdk/{d}', ignore_errors=True)


if __name__ == '__main__':
    unittest.main(verbosity=2)
