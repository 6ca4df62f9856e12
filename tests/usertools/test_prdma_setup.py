#!/usr/bin/env python3
"""prdma-setup rejects what it does not know with a clear message and exit 2, before doing any
work (no apt-get, no build)."""
import os
import subprocess
import unittest

SETUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'usertools',
                     'prdma-setup')


def run(*args):
    return subprocess.run(['bash', SETUP, *args], capture_output=True, text=True, timeout=30,
                          check=False)


class SetupArgumentsTest(unittest.TestCase):
    def test_unknown_command(self):
        proc = run('instal')
        self.assertEqual(proc.returncode, 2)
        self.assertIn("prdma-setup: error: unknown command 'instal'", proc.stderr)
        self.assertIn('usertools/prdma-setup test', proc.stderr)

    def test_no_command_prints_usage(self):
        proc = run()
        self.assertEqual(proc.returncode, 2)
        self.assertIn('usertools/prdma-setup demo', proc.stderr)

    def test_help(self):
        proc = run('--help')
        self.assertEqual(proc.returncode, 0)
        self.assertIn('install, reserve hugepages, build, run every test suite', proc.stdout)


if __name__ == '__main__':
    unittest.main()
