"""Two prdma-testpmd processes over net_memif, driven by command files (the test files share
this): each run gets its own directory, memif socket and TCP port; every process is killed when
a test fails, and the directory (socket included) goes with the test."""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

TESTPMD = os.environ.get('PRDMA_TESTPMD', '')

STAT = re.compile(r'([A-Za-z-]+): (\d+)')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def eal(role, sock, ip, lcores, queues=1, devargs=''):
    """Main lcore and forwarding lcores on the two cores (`lcores`, EAL's --lcores)."""
    return ['--lcores', lcores, '--no-telemetry', '--log-level=lib.eal:error',
            '--log-level=pmd.net.memif:error', '--log-level=prdma.*:warning',
            f'--vdev=net_memif0,role={role},socket={sock},socket-abstract=no,id=0',
            f'--vdev=rdma_swroce0,port=net_memif0,ip={ip},queues={queues}{devargs}', '--']


def blocks(output, title):
    """Every statistics block whose header contains `title`, as {field: int}, in order."""
    found = []
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if title in line:
            fields = {}
            for body in lines[i + 1:i + 6]:
                if '------' in body or '+++' in body and 'Accumulated' in body:
                    break
                fields.update({k: int(v) for k, v in STAT.findall(body)})
            found.append(fields)
    return found


def last_total(output):
    totals = blocks(output, 'Accumulated forward statistics')
    if not totals:
        raise AssertionError('no accumulated statistics in:\n' + output[-3000:])
    return totals[-1]


class PairTest(unittest.TestCase):
    """setUp makes a directory; run_pair() runs two sessions from command texts."""

    def setUp(self):
        if not TESTPMD or not os.access(TESTPMD, os.X_OK):
            self.fail('PRDMA_TESTPMD must name the prdma-testpmd binary (meson test sets it)')
        self.dir = tempfile.mkdtemp(prefix='prdma-testpmd-')
        self.procs = []
        self.addCleanup(self.cleanup)

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            p.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def spawn(self, args, name, stdin=subprocess.DEVNULL):
        out = open(os.path.join(self.dir, name + '.log'), 'w+')
        p = subprocess.Popen([TESTPMD] + args, stdout=out, stderr=subprocess.STDOUT,
                             stdin=stdin, start_new_session=True)
        p.log = out
        self.procs.append(p)
        return p

    def output(self, p):
        p.log.flush()
        with open(p.log.name) as f:
            return f.read()

    def wait(self, p, timeout=120):
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail(f'prdma-testpmd did not end within {timeout} s:\n' + self.output(p)[-3000:])
        return self.output(p)

    def run_pair(self, server_cmds, client_cmds, qps=2, queues=1, server_args=(),
                 client_args=(), devargs=''):
        """Runs both sessions to their end; returns (server output, client output)."""
        sock = os.path.join(self.dir, 'memif.sock')
        port = free_port()
        files = []
        for name, text in (('server', server_cmds), ('client', client_cmds)):
            path = os.path.join(self.dir, name + '.cmd')
            with open(path, 'w') as f:
                f.write(text.strip() + '\n')
            files.append(path)
        # Main lcore of each process on the core the other's forwarding lcore(s) run on: the
        # prompt sleeps in read(), so each core has one poller per process.
        workers = queues
        s_lcores = '0@1,' + ','.join(f'{i + 1}@0' for i in range(workers))
        c_lcores = '0@0,' + ','.join(f'{i + 1}@1' for i in range(workers))
        server = self.spawn(eal('server', sock, '10.0.0.1', s_lcores, queues, devargs) +
                            ['--nb-qps', str(qps), '--peer', f':{port}', '--cmdline-file',
                             files[0], *server_args], 'server')
        time.sleep(0.3)
        client = self.spawn(eal('client', sock, '10.0.0.2', c_lcores, queues, devargs) +
                            ['--nb-qps', str(qps), '--peer', f'127.0.0.1:{port}',
                             '--cmdline-file', files[1], *client_args], 'client')
        out_c = self.wait(client)
        out_s = self.wait(server)
        self.assertEqual(client.returncode, 0, out_c[-3000:])
        self.assertEqual(server.returncode, 0, out_s[-3000:])
        self.assertFalse(os.path.exists(sock), 'the memif socket was left behind')
        return out_s, out_c
