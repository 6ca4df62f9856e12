#!/usr/bin/env python3
"""prdma-testpmd between two processes over net_memif, every engine from command files: the
sender's counters against what it posted, the receiver's against what the sender completed,
several QPs, two forwarding lcores per process, and swroce's faults set at run time."""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testpmd_common import PairTest, blocks, last_total  # noqa: E402

CONNECT = 'connect all\n'


def generator(engine, extra=''):
    """The side that sends: starts once the peer has started (the first sync; what arrives before
    a `start` is not the run's), runs for a second, stops (which drains), then lets the peer stop
    (the second sync)."""
    return f'{CONNECT}set fwd {engine}\n{extra}sync\nstart\nsleep 1\nshow fwd stats\nstop\n' \
        'sync\nquit'


def receiver(engine):
    return f'{CONNECT}set fwd {engine}\nstart\nsync\nsync\nstop\nquit'


IDLE = f'{CONNECT}sync\nsync\nquit'


class EngineTest(PairTest):

    def check_sender(self, total, size):
        self.assertGreater(total['TX-ops'], 0, total)
        self.assertEqual(total['TX-completed'], total['TX-ops'], total)
        self.assertEqual(total['TX-bytes'], total['TX-ops'] * size, total)
        self.assertEqual(total['TX-bytes-completed'], total['TX-bytes'], total)
        self.assertEqual(total['Errors'], 0, total)

    def test_write(self):
        out, _ = self.run_pair(generator('write', 'set size 512\n'), IDLE)
        self.check_sender(last_total(out), 512)
        self.assertEqual(len(blocks(out, 'Forward statistics for QP')), 4)  # show + stop, 2 QPs
        self.assertIn('Mops', out)

    def test_read(self):
        out, _ = self.run_pair(generator('read', 'set size 256\n'), IDLE)
        self.check_sender(last_total(out), 256)

    def test_atomic(self):
        out, _ = self.run_pair(generator('atomic'), IDLE)
        self.check_sender(last_total(out), 8)

    def test_send_to_rxonly(self):
        out_s, out_c = self.run_pair(generator('send', 'set size 1000\n'), receiver('rxonly'))
        sent = last_total(out_s)
        got = last_total(out_c)
        self.check_sender(sent, 1000)
        self.assertEqual(got['RX-ops'], sent['TX-completed'], (sent, got))
        self.assertEqual(got['RX-bytes'], sent['TX-bytes-completed'], (sent, got))
        self.assertEqual(got['RX-verify-errors'], 0, got)
        self.assertEqual(got['Errors'], 0, got)

    def test_send_to_echo(self):
        # The sender quits only after the echo side has stopped: the echoes of its last SENDs are
        # still in flight when its own `stop` has drained, and a QP destroyed under them would
        # leave the echo side retrying into nothing (retry_exceeded, then its receives flushed).
        sender = f'{CONNECT}set fwd send\nsync\nstart\nsleep 1\nshow fwd stats\nstop\nsync\n' \
            'sync\nquit'
        echo = f'{CONNECT}set fwd echo\nstart\nsync\nsync\nstop\nsync\nquit'
        out_s, out_c = self.run_pair(sender, echo)
        sent = last_total(out_s)
        echo = last_total(out_c)
        self.check_sender(sent, 64)
        self.assertEqual(echo['RX-ops'], sent['TX-completed'], (sent, echo))
        self.assertEqual(echo['Echoed'], echo['RX-ops'], echo)
        self.assertGreater(sent['RX-ops'], 0, sent)  # the echoes that came back before `stop`
        self.assertEqual(sent['RX-verify-errors'], 0, sent)
        self.assertEqual(echo['Errors'], 0, echo)

    def test_echo_tx_first_both_sides(self):
        # Both sides stop (each draining its echoes) before either quits, as in test_send_to_echo.
        first = f'{CONNECT}set fwd echo\nsync\nstart tx_first\nsleep 1\nstop\nsync\nsync\nquit'
        other = f'{CONNECT}set fwd echo\nstart\nsync\nsync\nstop\nsync\nquit'
        out_s, out_c = self.run_pair(first, other)
        a, b = last_total(out_s), last_total(out_c)
        self.assertGreater(a['RX-ops'], 0, a)
        self.assertGreater(b['Echoed'], 0, b)
        self.assertEqual(a['RX-verify-errors'] + b['RX-verify-errors'], 0, (a, b))
        self.assertEqual((a['Errors'], b['Errors']), (0, 0), (a, b))

    def test_mixed(self):
        mix = 'set mix write,read,send,atomic\n'
        out_s, out_c = self.run_pair(generator('mixed', mix), receiver('rxonly'), qps=4)
        sent = last_total(out_s)
        self.assertEqual(sent['Errors'], 0, sent)
        self.assertEqual(sent['TX-completed'], sent['TX-ops'], sent)
        for kind in ('write', 'read', 'send', 'atomic'):
            self.assertIn(f'lcore 1, {kind})', out_s)
        got = last_total(out_c)
        send_qp = blocks(out_s, 'QP 2 (lcore 1, send)')[-1]
        self.assertEqual(got['RX-ops'], send_qp['TX-completed'], (send_qp, got))
        self.assertEqual(got['RX-verify-errors'], 0, got)

    def test_two_lcores_four_qps(self):
        out_s, out_c = self.run_pair(generator('send'), receiver('rxonly'), qps=4, queues=2)
        sent, got = last_total(out_s), last_total(out_c)
        self.check_sender(sent, 64)
        self.assertEqual(got['RX-ops'], sent['TX-completed'], (sent, got))
        for lcore in (1, 2):
            per_lcore = blocks(out_s, f'Forward statistics for lcore {lcore} (2 QPs)')
            self.assertTrue(per_lcore, out_s[-3000:])
            self.assertGreater(per_lcore[-1]['TX-completed'], 0, per_lcore)

    def test_send_to_rxonly_on_shared_receive_queues(self):
        # --srq: each lcore's QPs take their receives from one SRQ (two lcores, two QPs each).
        rx = f'{CONNECT}set fwd rxonly\nshow config\nstart\nsync\nsync\nstop\nquit'
        out_s, out_c = self.run_pair(generator('send', 'set size 5000\n'), rx, qps=4, queues=2,
                                     client_args=('--srq',))
        sent, got = last_total(out_s), last_total(out_c)
        self.check_sender(sent, 5000)  # five packets each: a receive held across packets
        self.assertEqual(got['Post-refused'], 0, got)
        self.assertIn('receives: one shared receive queue of 128 per lcore', out_c)
        self.assertEqual(got['RX-ops'], sent['TX-completed'], (sent, got))
        self.assertEqual(got['RX-bytes'], sent['TX-bytes-completed'], (sent, got))
        self.assertEqual((got['RX-verify-errors'], got['Errors']), (0, 0), got)
        for qp in range(4):  # every QP on the SRQs received its own
            self.assertGreater(blocks(out_c, f'Forward statistics for QP {qp} ')[-1]['RX-ops'], 0)

    def test_send_to_echo_on_a_shared_receive_queue(self):
        # The echo goes back from the SRQ's slot on the QP that took it; as test_send_to_echo.
        sender = f'{CONNECT}set fwd send\nsync\nstart\nsleep 1\nshow fwd stats\nstop\nsync\n' \
            'sync\nquit'
        echo = f'{CONNECT}set fwd echo\nstart\nsync\nsync\nstop\nsync\nquit'
        out_s, out_c = self.run_pair(sender, echo, qps=3, server_args=('--srq',),
                                     client_args=('--srq',))
        sent, echo = last_total(out_s), last_total(out_c)
        self.check_sender(sent, 64)
        self.assertEqual(echo['RX-ops'], sent['TX-completed'], (sent, echo))
        self.assertEqual(echo['Echoed'], echo['RX-ops'], echo)
        self.assertGreater(sent['RX-ops'], 0, sent)
        self.assertEqual((sent['RX-verify-errors'], echo['Errors']), (0, 0), (sent, echo))
        self.assertEqual(echo['Post-refused'], 0, echo)

    def test_echo_tx_first_both_sides_on_shared_receive_queues(self):
        # Eight QPs bouncing on two SRQs of 128: the first bursts fit the slots both sides share
        # (a burst per QP of recv_slots / 2 would hold them all and wait on RNR for ever).
        first = f'{CONNECT}set fwd echo\nsync\nstart tx_first\nsleep 1\nstop\nsync\nsync\nquit'
        other = f'{CONNECT}set fwd echo\nstart tx_first\nsync\nsync\nstop\nsync\nquit'
        out_s, out_c = self.run_pair(first, other, qps=8, server_args=('--srq',),
                                     client_args=('--srq',))
        a, b = last_total(out_s), last_total(out_c)
        self.assertGreater(a['Echoed'], 1000, a)
        self.assertGreater(b['Echoed'], 1000, b)
        self.assertEqual(a['RX-verify-errors'] + b['RX-verify-errors'], 0, (a, b))
        self.assertEqual((a['Errors'], b['Errors']), (0, 0), (a, b))

    def test_udsend_fans_out_to_every_peer_qp(self):
        # --qp-type ud: the sender keeps one QP of its four and sends datagrams from it through
        # an address handle per peer host, so all four of the receiver's QPs (on two lcores) get
        # some. RC engines, fast-register, and datagrams over the MTU are refused first. The
        # receiver stops a second after the sender did (a UD SEND completes once it is queued,
        # not delivered), and the sender reads its counters once the receiver has read its own.
        sender = f'{CONNECT}destroy qp 1\ndestroy qp 2\ndestroy qp 3\nset fwd write\n' \
            'register mr 4096\nfast-register mr 0 qp 0\nset size 5000\nstart\n' \
            'set size 512\nshow config\nsync\nstart\nsleep 1\nshow fwd stats\nstop\nsync\n' \
            'sync\nshow device xstats\nquit'
        rx = f'{CONNECT}set fwd rxonly\nstart\nsync\nsync\nsleep 1\nstop\nshow device xstats\n' \
            'sync\nquit'
        out_s, out_c = self.run_pair(sender, rx, qps=4, queues=2, server_args=('--qp-type', 'ud'),
                                     client_args=('--qp-type', 'ud'))
        self.assertIn('Bad argument: set fwd write: the QPs are UD (--qp-type ud): udsend or '
                      'rxonly', out_s)
        self.assertIn('fast-register needs an RC QP; these are UD (--qp-type ud)', out_s)
        self.assertRegex(out_s, r"size 5000: a datagram is at most the port's MTU \(\d+ B\)")
        self.assertIn('QPs: UD, Q_Key 0x11111111, 1 peer hosts, 4 peer QPs to send to', out_s)
        sent, got = last_total(out_s), last_total(out_c)
        self.check_sender(sent, 512)
        self.assertEqual(sent['Retransmissions'], 0, sent)
        # Every datagram sent is received, or dropped and counted by a device: the receiver's
        # with no receive posted (rx_ud_dropped), or when the lcore the port gave it to could not
        # hand it to its QP's lcore (handover_dropped); the sender's when its port would not take
        # it (tx_dropped, tx_dropped_link_down: memif's link comes up a moment after start-up).
        def xstat(out, name):
            return int(re.search(rf'^  {name}: (\d+)$', out, re.M).group(1))
        lost = sum(xstat(out_c, name) for name in ('rx_ud_dropped', 'handover_dropped')) + \
            sum(xstat(out_s, name) for name in ('tx_dropped', 'tx_dropped_link_down'))
        self.assertGreater(got['RX-ops'], 0, got)
        self.assertEqual(got['RX-ops'] + lost, sent['TX-completed'], (out_s[-3000:], out_c[-3000:]))
        self.assertEqual(got['RX-bytes'], got['RX-ops'] * 512, got)
        self.assertEqual((got['RX-verify-errors'], got['Errors']), (0, 0), got)
        for qp in range(4):
            self.assertGreater(blocks(out_c, f'Forward statistics for QP {qp} ')[-1]['RX-ops'],
                               0, out_c[-4000:])

    def test_udsend_to_rxonly_on_a_shared_receive_queue(self):
        # The receiver's UD QPs take their receives from their lcore's SRQ: each datagram lands
        # behind its GRH in an SRQ slot, checked there.
        sender = f'{CONNECT}set size 700\nsync\nstart\nsleep 1\nstop\nsync\nquit'
        rx = f'{CONNECT}set fwd rxonly\nshow config\nstart\nsync\nsync\nsleep 1\nstop\nquit'
        out_s, out_c = self.run_pair(sender, rx, server_args=('--qp-type', 'ud'),
                                     client_args=('--qp-type', 'ud', '--srq'))
        self.assertIn('receives: one shared receive queue of 128 per lcore', out_c)
        sent, got = last_total(out_s), last_total(out_c)
        self.check_sender(sent, 700)
        self.assertGreater(got['RX-ops'], 0, got)
        self.assertLessEqual(got['RX-ops'], sent['TX-completed'], (sent, got))
        self.assertEqual(got['RX-bytes'], got['RX-ops'] * 700, got)
        self.assertEqual((got['RX-verify-errors'], got['Errors'], got['Post-refused']), (0, 0, 0),
                         got)

    def test_faults_at_run_time(self):
        faults = 'set fault drop 0.01 both\nset fault reorder 0.01\nset fault dup 0.01\n' \
                 'set fault corrupt 0.01\nshow fault\n'
        sender = f'{CONNECT}set fwd send\n{faults}sync\nstart\nset fault drop 0.5\nsleep 2\n' \
                 'stop\nshow device xstats\nsync\nquit'
        out_s, out_c = self.run_pair(sender, receiver('rxonly'))
        self.assertIn('Error: set fault needs forwarding stopped: run `stop` first', out_s)
        self.assertIn('rx: drop 0.01  reorder 0.01  dup 0.01  corrupt 0.01', out_s)
        sent, got = last_total(out_s), last_total(out_c)
        self.check_sender(sent, 64)
        self.assertGreater(sent['Retransmissions'], 0, sent)
        # Per QP (the device's count for each, read with QueuePair::query_status), summing to the
        # total; the receiver retransmits nothing (its ACKs are never retransmitted).
        per_qp = [b[-1] for b in (blocks(out_s, f'Forward statistics for QP {n} ') for n in (0, 1))]
        self.assertEqual(sum(b['Retransmissions'] for b in per_qp), sent['Retransmissions'], per_qp)
        self.assertTrue(all(b['Retransmissions'] > 0 for b in per_qp), per_qp)
        self.assertEqual(got['Retransmissions'], 0, got)
        self.assertEqual(got['RX-ops'], sent['TX-completed'], (sent, got))
        self.assertEqual(got['RX-verify-errors'], 0, got)
        self.assertRegex(out_s, r'rx_dropped_injected: [1-9]')

    def test_selective_repeat_under_loss(self):
        # Both sides ask for selective repeat (--selective-repeat): the sender's device resends
        # what the receiver NAKs, packet by packet (selective_resends), and every SEND arrives
        # intact.
        sender = f'{CONNECT}set fwd send\nset fault drop 0.02 both\nshow config\nsync\nstart\n' \
                 'sleep 2\nstop\nshow device xstats\nsync\nquit'
        out_s, out_c = self.run_pair(sender, receiver('rxonly'),
                                     server_args=('--selective-repeat', '--size', '4096'),
                                     client_args=('--selective-repeat', '--size', '4096'))
        self.assertIn('QPs: RC, loss recovery selective repeat', out_s)
        sent, got = last_total(out_s), last_total(out_c)
        self.check_sender(sent, 4096)
        self.assertRegex(out_s, r'rx_dropped_injected: [1-9]')
        self.assertRegex(out_s, r'selective_resends: [1-9]')
        self.assertEqual(got['RX-ops'], sent['TX-completed'], (sent, got))
        self.assertEqual(got['RX-verify-errors'], 0, got)

    def test_fast_register_and_invalidate(self):
        verbs = 'register mr 8192 lw,rw,rr\nconnect qp 0\nfast-register mr 0 qp 0\nshow mr\n' \
                'invalidate mr 0 qp 0\ninvalidate mr 0 qp 0\nshow qp 0\nsync\nquit'
        out_s, _ = self.run_pair(verbs, 'connect qp 0\nsync\nquit', qps=1)
        self.assertRegex(out_s, r'MR 0 fast-registered on QP 0: rkey 0x[0-9a-f]{8}')
        self.assertRegex(out_s, r'fast-registered rkey 0x[0-9a-f]{8}')
        self.assertIn('MR 0 invalidated on QP 0', out_s)
        self.assertIn('Bad argument: MR 0 is not fast-registered', out_s)
        self.assertRegex(out_s, r'0x000011 +1 +RTS')

    def test_descriptor_printed(self):
        out_s, _ = self.run_pair('show qp 0 descriptor\nsync\nquit', 'sync\nquit', qps=1)
        printed = [line for line in out_s.splitlines()
                   if len(line) > 64 and set(line) <= set('0123456789abcdef')]
        self.assertEqual(len(printed), 1, out_s[-2000:])


if __name__ == '__main__':
    unittest.main(verbosity=2)
