#!/usr/bin/env python3
"""An interactive prdma-testpmd session typed through tmux, as a person would: the prompt, Tab
completion, connect, start, `show fwd stats` while running, stop, quit; the screen is read with
capture-pane and the counters checked against the peer's (a second process on a command file).
Ctrl-C drops a half-typed line; Ctrl-D leaves. Then two prompts connected by pasting each other's
descriptor, with no TCP channel. tmux runs on a server of its own (-L), killed with the test."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testpmd_common import TESTPMD, PairTest, eal, free_port, last_total  # noqa: E402

PROMPT = 'prdma-testpmd> '


class TmuxSessionTest(PairTest):

    def setUp(self):
        super().setUp()
        if shutil.which('tmux') is None:
            self.fail('tmux is not installed: this test types into an interactive session '
                      'through tmux. Install it (apt-get install tmux, or usertools/prdma-setup, '
                      'which lists it among the test packages)')
        self.server = f'prdma-testpmd-{os.getpid()}'
        self.addCleanup(self.kill_tmux)

    def tmux(self, *args):
        return subprocess.run(['tmux', '-L', self.server, *args], capture_output=True,
                              text=True, timeout=10)

    def kill_tmux(self):
        self.tmux('kill-server')

    def screen(self, session='testpmd'):
        return self.tmux('capture-pane', '-p', '-J', '-S', '-3000', '-t', session).stdout

    def wait_for(self, text, timeout=60, session='testpmd'):
        deadline = time.time() + timeout
        while time.time() < deadline:
            screen = self.screen(session)
            if text in screen:
                return screen
            time.sleep(0.1)
        self.fail(f'{text!r} did not appear within {timeout} s; the screen:\n'
                  f'{self.screen(session)}')

    def type(self, *keys, session='testpmd'):
        self.tmux('send-keys', '-t', session, *keys)

    def prompt_session(self, name, role, ip, lcores, sock):
        status = os.path.join(self.dir, name + '.status')
        command = [TESTPMD] + eal(role, sock, ip, lcores) + ['-i']
        shell = f'{shlex.join(command)} 2>&1; echo $? > {shlex.quote(status)}'
        self.tmux('new-session', '-d', '-s', name, '-x', '250', '-y', '50', shell)
        return status

    def test_descriptors_pasted_between_two_prompts(self):
        """No TCP channel: each side prints its QP's descriptor and the other pastes it."""
        sock = os.path.join(self.dir, 'memif.sock')
        statuses = [self.prompt_session('a', 'server', '10.0.0.1', '0@1,1@0', sock)]
        self.wait_for(PROMPT, session='a')
        statuses.append(self.prompt_session('b', 'client', '10.0.0.2', '0@0,1@1', sock))
        self.wait_for(PROMPT, session='b')
        descriptors = {}
        for name in ('a', 'b'):
            self.type('show qp 0 descriptor', 'Enter', session=name)
            deadline = time.time() + 30
            found = []
            while not found and time.time() < deadline:
                found = re.findall(r'^([0-9a-f]{100,})$', self.screen(name), re.M)
            self.assertTrue(found, self.screen(name))
            descriptors[name] = found[-1]
        self.type('connect qp 0 descriptor ' + descriptors['b'], 'Enter', session='a')
        self.wait_for('QP 0 connected', session='a')
        self.type('connect qp 0 descriptor ' + descriptors['a'], 'Enter', session='b')
        self.wait_for('QP 0 connected', session='b')
        self.type('set fwd write', 'Enter', 'start', 'Enter', session='a')
        self.wait_for('Start forwarding: write engine', session='a')
        time.sleep(0.5)
        self.type('stop', 'Enter', session='a')
        sent = last_total(self.wait_for('Done.', session='a'))
        self.assertGreater(sent['TX-completed'], 0, sent)
        self.assertEqual(sent['TX-completed'], sent['TX-ops'], sent)
        self.assertEqual(sent['Errors'], 0, sent)
        self.type('quit', 'Enter', session='a')
        self.type('C-d', session='b')  # Ctrl-D at an empty prompt leaves, as `quit` does
        for status in statuses:
            deadline = time.time() + 30
            while not os.path.exists(status) and time.time() < deadline:
                time.sleep(0.1)
            with open(status) as f:
                self.assertEqual(f.read().strip(), '0')

    def test_interactive_session(self):
        sock = os.path.join(self.dir, 'memif.sock')
        port = free_port()
        status = os.path.join(self.dir, 'status')
        command = [TESTPMD] + eal('server', sock, '10.0.0.1', '0@1,1@0') + \
            ['-i', '--peer', f':{port}', '--fwd', 'send']
        shell = f'{shlex.join(command)} 2>&1; echo $? > {shlex.quote(status)}'
        self.tmux('new-session', '-d', '-s', 'testpmd', '-x', '250', '-y', '50', shell)
        self.wait_for(PROMPT)
        # The peer: receives and verifies, stops after the interactive side (sync).
        peer_cmds = os.path.join(self.dir, 'peer.cmd')
        with open(peer_cmds, 'w') as f:
            f.write('connect qp 0\nset fwd rxonly\nstart\nsync\nsync\nstop\nquit\n')
        peer = self.spawn(eal('client', sock, '10.0.0.2', '0@0,1@1') +
                          ['--peer', f'127.0.0.1:{port}', '--cmdline-file', peer_cmds], 'peer')

        # Ctrl-C drops the line being typed (testpmd's prompt and a shell do the same): the QP
        # is still there afterwards.
        self.type('destroy qp 0', 'C-c')
        self.type('show qp 0', 'Enter')
        shown = self.wait_for('  0    0x0000')  # its row
        self.assertNotIn('QP 0 destroyed', shown)
        self.assertRegex(shown, r'\n  0 +0x[0-9a-f]{6} +1 +RESET ')

        # Completion: "sho" + Tab is "show ", "conf" + Tab is "config".
        self.type('sho', 'Tab')
        self.wait_for(PROMPT + 'show ')
        self.type('conf', 'Tab')
        self.wait_for(PROMPT + 'show config')
        self.type('Enter')
        self.wait_for('engine: send')

        self.type('connect qp 0', 'Enter')
        self.wait_for('QP 0 connected')
        self.type('sync', 'Enter')  # the peer has started: all it receives counts
        self.wait_for('Synchronized with the peer')
        self.type('start', 'Enter')
        self.wait_for('Start forwarding: send engine')
        time.sleep(1)
        self.type('show fwd stats', 'Enter')
        running = self.wait_for('+' * 40)  # the end of the accumulated statistics
        live = last_total(running)
        self.assertGreater(live['TX-completed'], 0, live)
        self.assertRegex(running, r'Rate: [0-9.]+ Mops  [0-9.]+ Gbps')

        self.type('stop', 'Enter')
        stopped = self.wait_for('Done.')
        sent = last_total(stopped)
        self.assertGreaterEqual(sent['TX-completed'], live['TX-completed'])
        self.assertEqual(sent['TX-completed'], sent['TX-ops'], sent)
        self.assertEqual(sent['Errors'], 0, sent)

        self.type('sync', 'Enter')
        self.wait_for('Synchronized with the peer')
        self.type('quit', 'Enter')
        peer_out = self.wait(peer, timeout=60)
        got = last_total(peer_out)
        self.assertEqual(got['RX-ops'], sent['TX-completed'], (sent, got))
        self.assertEqual(got['RX-verify-errors'], 0, got)
        deadline = time.time() + 30
        while not os.path.exists(status) and time.time() < deadline:
            time.sleep(0.1)
        with open(status) as f:
            self.assertEqual(f.read().strip(), '0')
        self.assertFalse(os.path.exists(sock), 'the memif socket was left behind')


if __name__ == '__main__':
    unittest.main(verbosity=2)
