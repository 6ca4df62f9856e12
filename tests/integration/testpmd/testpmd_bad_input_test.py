#!/usr/bin/env python3
"""prdma-testpmd's answers to mistakes: bad options end the program with a message and status 2
before the EAL starts; bad commands and bad arguments get a clear line and the session goes on
(the command after them still runs)."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testpmd_common import TESTPMD, PairTest, eal  # noqa: E402

# (command, what the session answers); every command is followed by `show config` in the file,
# whose line proves the session still runs.
BAD_COMMANDS = [
    ('bogus command', 'Command not found'),
    ('set burst x', 'Bad arguments'),
    ('set burst 0', 'Bad argument: set burst 0: the value must be in [1, 64]'),
    ('set size 100000', 'Bad argument: set size 100000: the value must be in [1, 65536]'),
    ('set fwd nosuch', "Bad argument: no engine 'nosuch'; engines: write, read, send, atomic, "
                       'echo, mixed, rxonly'),
    ('set mix write,bogus', "Bad argument: 'bogus' cannot be mixed"),
    ('show qp 9', 'Bad argument: no QP 9'),
    ('connect qp 9', 'Bad argument: no QP 9'),
    ('destroy qp 9', 'Bad argument: no QP 9'),
    ('connect qp 0 descriptor 12zz', "Bad argument: 'zz' is not hex"),
    ('connect qp 0 descriptor 0102', 'Bad argument: a connection descriptor is'),
    ('set fault drop 1.5', 'Bad argument: rx_drop=1.5: a probability is in [0, 1)'),
    ('set fault drop abc', "Bad argument: 'abc' is not a probability"),
    ('set fault jitter 0.1', 'Bad arguments'),
    ('stop', 'Error: forwarding is not started'),
    ('start', 'Error: no connected QP: `connect qp N` first'),
    ('register mr 0', 'Bad argument: register mr 0: the size must be in [1, 1 GiB]'),
    ('register mr 4096 lw,xx', "Bad argument: access 'xx'"),
    ('fast-register mr 0 qp 0', 'Error: QP 0 is not connected'),
    ('invalidate mr 5 qp 0', 'Error: QP 0 is not connected'),
]


class BadOptionsTest(unittest.TestCase):

    def run_options(self, *options):
        return subprocess.run([TESTPMD, '--no-huge', '--', *options], capture_output=True,
                              text=True, timeout=30)

    def test_bad_options_exit_2(self):
        cases = [
            (['--burst', '0'], "--burst '0': a whole number in [1, 64]"),
            (['--size', '12x'], "--size '12x': a whole number in [1, 65536]"),
            (['--fwd', 'nosuch'], "--fwd 'nosuch': write, read, send, atomic, echo, mixed, "
                                  'rxonly or udsend'),
            (['--qp-type', 'uc'], "--qp-type 'uc': rc or ud"),
            (['--qp-type', 'ud', '--fwd', 'echo'], '--fwd echo: the QPs are UD (--qp-type ud): udsend or rxonly'),
            (['--fwd', 'udsend'], '--fwd udsend: udsend needs UD QPs (--qp-type ud)'),
            (['--qp-type', 'ud', '--selective-repeat'],
             "--selective-repeat is RC's: a datagram is never resent"),
            (['--bogus'], "unknown option '--bogus'"),
            (['--peer', 'host:99999'], "--peer 'host:99999': HOST[:PORT]"),
            (['--stats-period'], "missing the value of option '--stats-period'"),
            (['extra'], "unexpected argument 'extra'"),
        ]
        for options, message in cases:
            with self.subTest(options=options):
                result = self.run_options(*options)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(message, result.stderr)
                self.assertNotIn('EAL', result.stderr + result.stdout)

    def test_help(self):
        result = self.run_options('--help')
        self.assertEqual(result.returncode, 0)
        for option in ('--cmdline-file', '--stats-period', '--nb-qps', '--burst', '--size',
                       '--fwd', '--peer', '--qp-type', '--selective-repeat', '-i', '-a'):
            self.assertIn(option, result.stdout)


class BadCommandsTest(PairTest):

    def test_bad_commands_leave_the_session_usable(self):
        path = os.path.join(self.dir, 'bad.cmd')
        with open(path, 'w') as f:
            for command, _ in BAD_COMMANDS:
                f.write(f'{command}\nshow config\n')
            f.write('help\nquit\n')
        sock = os.path.join(self.dir, 'memif.sock')
        p = self.spawn(eal('server', sock, '10.0.0.1', '0@1,1@0') +
                       ['--cmdline-file', path], 'bad')
        out = self.wait(p, timeout=60)
        self.assertEqual(p.returncode, 0, out[-3000:])
        # Each answer, then the next command ran: its prompt and `show config`'s line.
        position = 0
        for command, answer in BAD_COMMANDS:
            with self.subTest(command=command):
                start = out.index(f'prdma-testpmd> {command}', position)
                self.assertIn(answer, out[start:start + 400])
                position = out.index('  engine: ', start)
        self.assertIn('set fault drop|reorder|dup|corrupt|delay <RATE>', out)  # help


if __name__ == '__main__':
    unittest.main(verbosity=2)
