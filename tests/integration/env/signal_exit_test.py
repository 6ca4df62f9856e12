#!/usr/bin/env python3
"""What a prdma process leaves behind when it does not exit normally, seen with real prdma-perf
processes over net_memif. Killed by SIGINT, SIGTERM or SIGHUP (Ctrl-C, a test's timeout, a
closed terminal), idle or in the middle of a run, a process still dies of that signal and leaves
neither its runtime directory (/var/run/dpdk/prdma_<pid>) nor its memif socket. SIGKILL cannot be
caught: what it leaves goes when the next process starts (the socket before memif binds it
again, the directory because its process no longer exists). A socket another server is still
listening on is never taken."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

PERF = os.environ.get('PRDMA_PERF', '')
DEAD_SOCKET_NOTICE = 'a memif socket nothing listens on'


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def runtime_dir(pid):
    """Where DPDK 22.11 puts the runtime directory of prdma's prefix for this user."""
    base = '/var/run' if os.getuid() == 0 else os.environ.get('XDG_RUNTIME_DIR', '/tmp')
    return os.path.join(base, 'dpdk', f'prdma_{pid}')


def eal(role, sock, ip, core):
    return ['-l', str(core), '--log-level=lib.eal:error', '--log-level=pmd.net.memif:error',
            '--log-level=prdma.*:warning',
            f'--vdev=net_memif0,role={role},socket={sock},socket-abstract=no,id=0',
            f'--vdev=rdma_swroce0,port=net_memif0,ip={ip}', '--']


def tcp_states(port):
    """The states (hex, as /proc shows them) of the TCP sockets with `port` at either end."""
    states = []
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(table, encoding='ascii') as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            local, remote, state = row.split()[1:4]
            if port in (int(local.rsplit(':', 1)[1], 16), int(remote.rsplit(':', 1)[1], 16)):
                states.append(state)
    return states


def wait_for(condition, process, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f'exited ({process.returncode}) before {what}:\n{out}{err}')
        if time.monotonic() > deadline:
            raise AssertionError(f'no {what} after {timeout} s')
        time.sleep(0.02)


class SignalExitTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix='prdma-signal-')
        self.sock = os.path.join(self.tmp, 'memif.sock')
        self.processes = []

    def tearDown(self):
        for p in self.processes:
            if p.poll() is None:
                p.kill()
            p.communicate()
            # Without the fix under test these would pile up; they are this test's own.
            shutil.rmtree(runtime_dir(p.pid), ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def perf(self, role, test, port, *args):
        server = role == 'server'
        p = subprocess.Popen([PERF, test] + eal(role, self.sock, '10.0.0.1' if server else
                                                 '10.0.0.2', 0 if server else 1) +
                             list(args) + ['-p', str(port)] + ([] if server else ['127.0.0.1']),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.processes.append(p)
        return p

    def server(self, test='send_lat', *args):
        """A server past Eal::start: waiting for its client on the TCP port."""
        port = free_port()
        p = self.perf('server', test, port, *args)
        wait_for(lambda: '0A' in tcp_states(port), p, 'listening TCP port')
        return p, port

    def assert_killed_leaving_nothing(self, p, signo):
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, -signo, f'{out}{err}')
        self.assertFalse(os.path.lexists(runtime_dir(p.pid)), f'{runtime_dir(p.pid)} is left')
        self.assertFalse(os.path.lexists(self.sock), f'{self.sock} is left')

    def test_idle_server_killed_by_each_signal(self):
        for signo in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with self.subTest(signal=signo.name):
                p, _ = self.server()
                self.assertTrue(os.path.isdir(runtime_dir(p.pid)))
                self.assertTrue(os.path.exists(self.sock))
                p.send_signal(signo)
                self.assert_killed_leaving_nothing(p, signo)

    def test_pair_killed_in_the_middle_of_a_run(self):
        server, port = self.server('write_bw', '-D', '30')
        client = self.perf('client', 'write_bw', port, '-D', '30')
        wait_for(lambda: '01' in tcp_states(port), client, 'connection to the server')
        time.sleep(2)  # the keys are exchanged and WRITEs fill the memif rings
        self.assertIsNone(server.poll())
        client.send_signal(signal.SIGTERM)
        server.send_signal(signal.SIGINT)
        self.assert_killed_leaving_nothing(client, signal.SIGTERM)
        self.assert_killed_leaving_nothing(server, signal.SIGINT)

    def test_what_sigkill_leaves_goes_at_the_next_start(self):
        killed, _ = self.server()
        killed.kill()
        killed.communicate(timeout=30)
        self.assertEqual(killed.returncode, -signal.SIGKILL)
        # What no process can avoid: nothing runs in a process killed by SIGKILL.
        self.assertTrue(os.path.isdir(runtime_dir(killed.pid)))
        self.assertTrue(os.path.exists(self.sock))

        # DPDK 22.11's memif alone fails to bind over the dead socket and the server has no port.
        server, port = self.server('write_lat', '-n', '200')
        self.assertFalse(os.path.lexists(runtime_dir(killed.pid)))
        client = self.perf('client', 'write_lat', port, '-n', '200')
        c_out, c_err = client.communicate(timeout=120)
        s_out, s_err = server.communicate(timeout=30)
        self.assertEqual(client.returncode, 0, c_out + c_err)
        self.assertEqual(server.returncode, 0, s_out + s_err)
        self.assertEqual(s_err.count(DEAD_SOCKET_NOTICE), 1, s_err)
        self.assertIn(self.sock, s_err)
        for p in (server, client):
            self.assertFalse(os.path.lexists(runtime_dir(p.pid)))
        self.assertFalse(os.path.lexists(self.sock))

    def test_a_live_servers_socket_is_not_taken(self):
        first, _ = self.server()
        second = self.perf('server', 'send_lat', free_port())
        out, err = second.communicate(timeout=60)
        self.assertNotEqual(second.returncode, 0, out + err)
        self.assertNotIn(DEAD_SOCKET_NOTICE, err)
        self.assertIn('Address already in use', err)
        self.assertFalse(os.path.lexists(runtime_dir(second.pid)))
        self.assertIsNone(first.poll())
        self.assertTrue(os.path.exists(self.sock))
        first.send_signal(signal.SIGTERM)
        self.assert_killed_leaving_nothing(first, signal.SIGTERM)


if __name__ == '__main__':
    unittest.main(verbosity=2)
