"""Helpers shared by the bench/ scripts: free loopback ports, a server's readiness, its RSS and
CPU time from /proc."""
import os
import platform
import socket
import subprocess
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def wait_ready(port, proc, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited during start-up")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


def stop_process(proc):
    """Stops a server started by a benchmark: SIGTERM, then SIGKILL after 5 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cores_available():
    """The cores this process may run on (its affinity), in order."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return list(range(os.cpu_count() or 1))


def machine_line(cores=None):
    """'N cores (CPU model), OS release' for a report's header."""
    cores = cores_available() if cores is None else cores
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{len(cores)} cores ({model}), {platform.system()} {platform.release()}"


def cpu_list(cores):
    """taskset's form of a list of cores: "0,1,2"."""
    return ",".join(str(c) for c in cores)


def pin_to(cores):
    """A preexec_fn that pins the child to `cores` (what `taskset -c` does, without needing
    taskset installed: the 16-core machine the scaling report runs on may lack util-linux)."""
    cores = list(cores)
    return lambda: os.sched_setaffinity(0, cores)


class Server:
    """A server process on `port` (started with `argv`, pinned to `cpus` when given: a core,
    or a list of cores), waited for until it answers; stop() stops it."""

    def __init__(self, name, argv, port, cpus=None):
        self.name, self.port = name, port
        pin = None
        if cpus is not None:
            pin = pin_to(cpus if isinstance(cpus, (list, tuple)) else [cpus])
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=pin)
        try:
            wait_ready(port, self.proc)
        except Exception:
            self.stop()
            raise

    def stop(self):
        stop_process(self.proc)
