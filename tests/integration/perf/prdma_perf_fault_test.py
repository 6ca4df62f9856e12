#!/usr/bin/env python3
"""prdma-perf under swroce's injected faults: WRITE, READ, SEND and both atomics between two
processes over net_memif, each with 1 % and 10 % loss, reordering, duplication and corruption.
Both sides run --verify: every byte that arrives is checked, every iteration completes, and the
device counters show that the fault happened and that the transport recovered from it."""
import json
import os
import re
import sys
import time
import unittest

import prdma_perf_test as perf

COUNTER = re.compile(r'^  (\w+)=(\d+)$', re.M)


class Fault:
    """Devargs for the server and the client, and the counters (summed over both sides) that
    must be non-zero afterwards: what was injected, and the traces of the recovery. `rejected`:
    a receiver's counter of the damaged frames it refused, which must be non-zero in each
    direction and no more than the damage injected into that direction (the sender's transmit
    plus the receiver's own receive; a frame hit twice is refused once)."""

    def __init__(self, server, client, injected, recovery, rejected=None):
        self.devargs = (server, client)
        self.injected = injected
        self.recovery = recovery
        self.rejected = rejected


# Each side its own seed: the same frames get the same faults on every run. Each fault is set the
# same way on both sides, so both directions (requests and data one way, ACKs and responses the
# other) suffer it. Loss is injected on transmit at 1 % and on receive at 10 %, the others in
# both places at once, so every place a fault is injected is covered. Over memif the received
# mbufs are the receiver's own, so holding them on receive is safe. A request overtaken by later
# ones is a gap the responder keeps those later ones behind until it fills (kept_past_gap), not
# one it NAKs at once.
FAULTS = {
    'drop_1pct': Fault(',tx_drop=0.01,seed=11', ',tx_drop=0.01,seed=12',
                       ('tx_dropped_injected',), ('retransmissions',)),
    'drop_10pct': Fault(',drop=0.1,seed=21', ',rx_drop=0.1,seed=22',  # drop= is rx_drop=
                        ('rx_dropped_injected',), ('retransmissions',)),
    'reorder': Fault(',rx_reorder=0.03,tx_reorder=0.03,reorder_depth=3,seed=31',
                     ',rx_reorder=0.03,tx_reorder=0.03,reorder_depth=3,seed=32',
                     ('rx_reordered_injected', 'tx_reordered_injected'), ('kept_past_gap',)),
    'duplicate': Fault(',rx_duplicate=0.03,tx_duplicate=0.03,seed=41',
                       ',rx_duplicate=0.03,tx_duplicate=0.03,seed=42',
                       ('rx_duplicated_injected', 'tx_duplicated_injected'), ('duplicates',)),
    'corrupt': Fault(',tx_corrupt=0.01,rx_corrupt=0.01,seed=51',
                     ',tx_corrupt=0.01,rx_corrupt=0.01,seed=52',
                     ('tx_corrupted_injected', 'rx_corrupted_injected'),
                     ('rx_bad_icrc', 'retransmissions'), rejected='rx_bad_frame'),
}


class Op:
    """A bandwidth test, its options, and which side checks what arrives: 'server' for data
    written or sent to it, 'client' for data read back or atomic results."""

    def __init__(self, test, args, checker, per_message):
        self.test = test
        self.args = args
        self.checker = checker
        self.per_message = per_message  # bytes checked per message; None: the whole buffer


ITERATIONS = 400
QPS = 2  # each QP recovers on its own while the other keeps going
SIZE = 16384  # 16 frames of the 1 KiB MTU: losses inside messages, not just whole messages
OPS = {
    'write': Op('write_bw', ('-s', str(SIZE)), 'server', None),
    'read': Op('read_bw', ('-s', str(SIZE)), 'client', SIZE),
    'send': Op('send_bw', ('-s', str(SIZE)), 'server', SIZE),
    'fetch_add': Op('atomic_bw', ('-A', 'FETCH_AND_ADD'), 'client', 8),
    'cmp_swap': Op('atomic_bw', ('-A', 'CMP_AND_SWAP'), 'client', 8),
}


def json_rows(out):
    """--json: perftest's --out_json object per result; its results."""
    return [json.loads(line)['results'] for line in out.splitlines() if line.startswith('{')]


def counters(err):
    """What --stats printed, by name: the device's totals under the plain names (the per-group
    and per-QP ones have a prefix)."""
    return {name: int(value) for name, value in COUNTER.findall(err)}


class FaultMatrix(unittest.TestCase):
    def run_cell(self, op_name, fault_name):
        op, fault = OPS[op_name], FAULTS[fault_name]
        args = list(op.args) + ['-n', str(ITERATIONS), '-q', str(QPS), '--verify', '--json',
                                '--stats']
        start = time.monotonic()
        rc_c, out_c, err_c, rc_s, out_s, err_s, _ = perf.run_pair(
            op.test, args, timeout=240, devargs=fault.devargs)
        took = time.monotonic() - start
        detail = f'{op_name} x {fault_name}\nclient:\n{out_c}{err_c}\nserver:\n{out_s}{err_s}'
        self.assertEqual((rc_c, rc_s), (0, 0), detail)

        client, server = json_rows(out_c), json_rows(out_s)
        self.assertEqual(len(client), 1, detail)
        # perftest counts every QP's: all WRs completed
        self.assertEqual(client[0]['n_iterations'], ITERATIONS * QPS, detail)
        checked = server if op.checker == 'server' else client
        self.assertEqual(len(checked), 1, detail)
        row = checked[0]
        self.assertEqual(row['verify_failures'], 0, detail)
        if op.per_message is None:  # WRITE: the server's receive buffer after the run
            self.assertEqual(row['verified_buffers'], QPS, detail)
            self.assertGreaterEqual(row['verified_bytes'], QPS * SIZE, detail)
        else:
            messages = ITERATIONS * QPS
            self.assertEqual((row['verified_messages'], row['verified_bytes']),
                             (messages, messages * op.per_message), detail)

        seen = {side: counters(err) for side, err in (('server', err_s), ('client', err_c))}
        total = {name: seen['server'].get(name, 0) + seen['client'].get(name, 0)
                 for name in fault.injected + fault.recovery}
        for name in fault.injected:
            self.assertGreater(total[name], 0, f'{name} not counted\n{detail}')
        for name in fault.recovery:
            self.assertGreater(total[name], 0, f'no {name}\n{detail}')
        if fault.rejected:
            self.check_rejected(fault.rejected, seen, detail)
        print(f'\n  {op_name} x {fault_name}: {took:.1f} s, ' +
              ', '.join(f'{k}={v}' for k, v in total.items()), file=sys.stderr)

    def check_rejected(self, name, seen, detail):
        for sender, receiver in (('client', 'server'), ('server', 'client')):
            damaged = (seen[sender].get('tx_corrupted_injected', 0) +
                       seen[receiver].get('rx_corrupted_injected', 0))
            refused = seen[receiver].get(name, 0)
            self.assertGreater(refused, 0, f'{receiver}: no {name}\n{detail}')
            self.assertLessEqual(refused, damaged, f'{receiver}: {name} {refused} > {damaged} '
                                 f'frames damaged on the way to it\n{detail}')


class LongMessagesUnderHeavyLoss(unittest.TestCase):
    """64 KiB WRITEs (64 packets each, longer than the window after a few losses) with 10 % of
    the frames lost both ways: a lost ACK or a lost tail leaves the requester with nothing that
    would draw a NAK, and waiting for the 67 ms transport timer each time made this take minutes
    (0.8 MB/s). Stall probes resend one packet after a millisecond or so instead."""

    def test_write_bw_64k_both_sides_10pct(self):
        args = ['-s', '65536', '-n', '1000', '--json', '--stats']
        start = time.monotonic()
        rc_c, out_c, err_c, rc_s, out_s, err_s, _ = perf.run_pair(
            'write_bw', args, timeout=60, devargs=(',rx_drop=0.1,seed=61', ',rx_drop=0.1,seed=62'))
        took = time.monotonic() - start
        detail = f'client:\n{out_c}{err_c}\nserver:\n{out_s}{err_s}'
        self.assertEqual((rc_c, rc_s), (0, 0), detail)
        self.assertEqual(json_rows(out_c)[0]['n_iterations'], 1000, detail)
        client = counters(err_c)
        self.assertGreater(client.get('probes', 0), 0, f'no stall was probed\n{detail}')
        print(f'\n  write_bw 64 KiB, 10 % both ways: {took:.1f} s, probes={client["probes"]}, '
              f'timeouts={client.get("timeouts", 0)}', file=sys.stderr)


def add_cells():
    for op_name in OPS:
        for fault_name in FAULTS:
            def cell(self, op_name=op_name, fault_name=fault_name):
                self.run_cell(op_name, fault_name)
            cell.__doc__ = f'{op_name} under {fault_name}, verified'
            setattr(FaultMatrix, f'test_{op_name}_{fault_name}', cell)


add_cells()

if __name__ == '__main__':
    if not perf.PERF or not os.access(perf.PERF, os.X_OK):
        print('PRDMA_PERF must name the prdma-perf binary', file=sys.stderr)
        sys.exit(2)
    unittest.main(verbosity=2)
