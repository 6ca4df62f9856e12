#!/usr/bin/python3
"""The README's program is examples/hello_write.cpp, word for word, and it runs: one swroce device
on a looped-back ring port, a QP connected to itself, one WRITE, its completion."""
import os
import re
import shutil
import subprocess
import sys
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BINARY = os.environ['PRDMA_HELLO_WRITE']


def readme_program():
    with open(os.path.join(TOP, 'README.md'), encoding='utf-8') as f:
        blocks = re.findall(r'^```cpp\n(.*?)^```$', f.read(), flags=re.S | re.M)
    return blocks[0] if blocks else None


class ReadmeProgram(unittest.TestCase):
    def test_the_readme_shows_the_example_as_it_is(self):
        with open(os.path.join(TOP, 'examples', 'hello_write.cpp'), encoding='utf-8') as f:
            source = f.read()
        shown = readme_program()
        self.assertIsNotNone(shown, 'README.md has no ```cpp block')
        self.assertEqual(shown, source, 'README.md and examples/hello_write.cpp differ')

    def test_it_writes_and_completes(self):
        proc = subprocess.Popen(
            [BINARY, '--vdev=net_ring0', '--vdev=rdma_swroce0,port=net_ring0,ip=10.0.0.1'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            # EAL's runtime directory for this process (prdma's default --file-prefix).
            shutil.rmtree(f'/var/run/dpdk/prdma_{proc.pid}', ignore_errors=True)
        self.assertEqual(proc.returncode, 0, out + err)
        self.assertIn('WRITE success: "hello, RDMA"', out, out + err)


if __name__ == '__main__':
    unittest.main(verbosity=2)
