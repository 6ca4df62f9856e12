"""Two example processes whose links come up late: each has a memif port of its own (role server)
and DPDK's own dpdk-testpmd, started seconds later, forwards between them as a switch would (io
forwarding, one memif client port to each). The TCP exchange of descriptors is over by then, so
an example that sends before its port is active retries into a dead link until retry_exceeded
(about half a second with the default QP attributes); one that waits for the port goes on."""
import os
import resource
import shutil
import socket
import subprocess
import time

TESTPMD = shutil.which('dpdk-testpmd')
SWITCH_DELAY_S = 2.0  # four times the retry budget of a QP with the default attributes


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def side(sock, ip, core):
    return ['-l', str(core), '--log-level=*:error',
            f'--vdev=net_memif0,role=server,socket={sock},socket-abstract=no',
            f'--vdev=rdma_swroce0,port=net_memif0,ip={ip}', '--']


def runtime_dir(prefix):
    base = '/var/run' if os.geteuid() == 0 else os.environ.get('XDG_RUNTIME_DIR', '/tmp')
    return f'{base}/dpdk/{prefix}'


def no_core_dump():
    # The switch may fault at the end (run_pair says why): that leaves no core file behind.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def switch(log, prefix, a_sock, b_sock):
    # --in-memory: no files in the runtime directory (EAL still makes the directory itself, so
    # the caller removes it); stdin open: testpmd forwards until Enter, so closing it stops it.
    return subprocess.Popen(
        [TESTPMD, '-l', '0,1', '--no-pci', '--in-memory', f'--file-prefix={prefix}',
         '--log-level=*:error',
         f'--vdev=net_memif0,role=client,socket={a_sock},socket-abstract=no',
         f'--vdev=net_memif1,role=client,socket={b_sock},socket-abstract=no',
         '--', '--forward-mode=io', '--auto-start'],
        stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, text=True,
        preexec_fn=no_core_dump)


def run_pair(binary, tmp, server_options, client_options):
    """Returns (client result, server code, server output, the switch's log). Whether the switch
    outlived the examples is not judged: DPDK 22.11's memif can fault in testpmd when the first
    example closes its port while the other's link is still up (seen under ASan, both examples
    having passed). Both examples finishing is the proof the switch carried their traffic: their
    memif ports have no other peer."""
    a_sock, b_sock, port = f'{tmp}/a.sock', f'{tmp}/b.sock', str(free_port())
    prefix = f'prdma_switch_{os.getpid()}'
    procs = []
    with open(f'{tmp}/switch.log', 'w+') as log:
        try:
            server = subprocess.Popen([binary] + side(a_sock, '10.0.0.1', 0) + ['-p', port] +
                                      server_options, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
            procs.append(server)
            client = subprocess.Popen([binary] + side(b_sock, '10.0.0.2', 1) + ['-p', port] +
                                      client_options + ['127.0.0.1'], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
            procs.append(client)
            deadline = time.monotonic() + 20
            while not (os.path.exists(a_sock) and os.path.exists(b_sock)) and \
                    time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(SWITCH_DELAY_S)
            testpmd = switch(log, prefix, a_sock, b_sock)
            procs.append(testpmd)
            c_out, c_err = client.communicate(timeout=120)
            if client.returncode != 0:
                server.kill()  # it may wait for a client that is gone
            s_out, _ = server.communicate(timeout=60)
            if testpmd.poll() is None:
                testpmd.stdin.close()
            testpmd.wait(timeout=60)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            shutil.rmtree(runtime_dir(prefix), ignore_errors=True)
        log.seek(0)
        t_log = log.read()
    return (subprocess.CompletedProcess(client.args, client.returncode, c_out, c_err),
            server.returncode, s_out, t_log)
