#!/usr/bin/env python3
"""prdma-testpmd without a prompt, as testpmd runs without -i: `-a` connects every QP and starts
the engine; `--stats-period N` prints the statistics every N s until SIGINT, after which the
run stops (draining) and prints its totals; without a period it runs until Enter. Two processes
over net_memif; the counters are checked against the peer's."""
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testpmd_common import PairTest, blocks, eal, free_port, last_total  # noqa: E402

TOTAL = 'Accumulated forward statistics'


class UnattendedTest(PairTest):

    def start_pair(self, sender_args, receiver_args, stdin=subprocess.DEVNULL):
        self.sock = os.path.join(self.dir, 'memif.sock')
        port = free_port()
        sender = self.spawn(eal('server', self.sock, '10.0.0.1', '0@1,1@0') +
                            ['--nb-qps', '2', '--peer', f':{port}', '-a', *sender_args],
                            'sender', stdin)
        time.sleep(0.3)
        receiver = self.spawn(eal('client', self.sock, '10.0.0.2', '0@0,1@1') +
                              ['--nb-qps', '2', '--peer', f'127.0.0.1:{port}', '-a',
                               *receiver_args], 'receiver', stdin)
        return sender, receiver

    def wait_for_totals(self, p, count, timeout=60):
        """The output once it holds `count` accumulated-statistics blocks."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            out = self.output(p)
            if out.count(TOTAL) >= count:
                return out
            if p.poll() is not None:
                self.fail(f'prdma-testpmd ended with {p.returncode}:\n{out[-3000:]}')
            time.sleep(0.1)
        self.fail(f'{count} statistics blocks did not appear within {timeout} s:\n'
                  + self.output(p)[-3000:])

    def check_exit(self, p, out):
        self.assertEqual(p.returncode, 0, out[-3000:])
        self.assertIn('Done.', out)  # the stop that SIGINT or Enter led to

    def test_stats_period_until_sigint(self):
        sender, receiver = self.start_pair(['--fwd', 'send', '--stats-period', '1'],
                                           ['--fwd', 'rxonly', '--stats-period', '1'])
        periodic = blocks(self.wait_for_totals(sender, 3), TOTAL)
        self.assertGreater(periodic[1]['TX-completed'], periodic[0]['TX-completed'], periodic)
        self.assertGreater(periodic[2]['TX-completed'], periodic[1]['TX-completed'], periodic)
        self.assertGreaterEqual(self.output(receiver).count(TOTAL), 1)

        sender.send_signal(signal.SIGINT)
        out_s = self.wait(sender, timeout=60)
        self.check_exit(sender, out_s)
        sent = last_total(out_s)
        self.assertEqual(sent['TX-completed'], sent['TX-ops'], sent)
        self.assertEqual(sent['Errors'], 0, sent)

        receiver.send_signal(signal.SIGINT)
        out_r = self.wait(receiver, timeout=60)
        self.check_exit(receiver, out_r)
        got = last_total(out_r)
        # The receiver starts on its own: SENDs that arrived before its `start` are not its run's.
        self.assertGreater(got['RX-ops'], 0, got)
        self.assertLessEqual(got['RX-ops'], sent['TX-completed'], (sent, got))
        self.assertEqual(got['RX-verify-errors'], 0, got)
        self.assertEqual(got['Errors'], 0, got)
        self.assertFalse(os.path.exists(self.sock), 'the memif socket was left behind')

    def test_autostart_until_enter(self):
        sender, receiver = self.start_pair(['--fwd', 'write', '--size', '256'],
                                           ['--fwd', 'rxonly'], stdin=subprocess.PIPE)
        for p in (sender, receiver):
            deadline = time.time() + 60
            while 'Press enter to exit' not in self.output(p) and time.time() < deadline:
                time.sleep(0.1)
            self.assertIn('Start forwarding', self.output(p))
        time.sleep(1)
        sender.stdin.write(b'\n')
        sender.stdin.flush()
        out_s = self.wait(sender, timeout=60)
        self.check_exit(sender, out_s)
        sent = last_total(out_s)
        self.assertGreater(sent['TX-completed'], 0, sent)
        self.assertEqual(sent['TX-completed'], sent['TX-ops'], sent)
        self.assertEqual(sent['TX-bytes-completed'], sent['TX-ops'] * 256, sent)
        self.assertEqual(sent['Errors'], 0, sent)
        receiver.stdin.close()  # the end of stdin ends the run as Enter does
        self.check_exit(receiver, self.wait(receiver, timeout=60))


if __name__ == '__main__':
    unittest.main(verbosity=2)
