# ShapedLink: two network namespaces joined by a veth pair shaped with tc, standing in for two nodes on a slow link.
#
# Each end's egress goes through a token bucket (tc-tbf) at the given rate and, where the kernel has sch_netem, a
# fixed delay in front of it. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN: `ip netns add`) and iproute2.
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

IFNAME = "bench0"
ADDRESSES = ("10.213.0.1", "10.213.0.2")

_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}


def rate_bits_per_s(text):
    """'1gbit', '10gbit', '500mbit' -> bits per second (tc's decimal units)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", text.strip().lower())
    if not m:
        raise ValueError(f"link rate {text!r}: expected a number and kbit, mbit or gbit (e.g. 1gbit)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _run(argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {(r.stderr or r.stdout).strip()}")
    return r.stdout


def missing_privileges():
    """None when this process can build the link, else what is missing."""
    if not shutil.which("ip") or not shutil.which("tc"):
        return "the link needs iproute2's ip and tc"
    if os.geteuid() != 0:
        return "the link needs root (ip netns add, tc qdisc: CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    return None


class ShapedLink:
    """with ShapedLink("1gbit", delay_ms=0.2) as link: link.wrap(rank, argv) runs argv in that rank's namespace."""

    _count = 0

    def __init__(self, rate, delay_ms=0.2):
        self.rate = rate
        self.bits_per_s = rate_bits_per_s(rate)
        self.delay_ms = delay_ms
        ShapedLink._count += 1  # several links at once get namespaces of their own
        # Five digits from the process and the link's count: with "a0", at most 15 characters (IFNAMSIZ).
        tag = f"ddpbench{(os.getpid() * 8 + ShapedLink._count) % 100000}"
        self.namespaces = (tag + "a", tag + "b")
        self.delay_note = ""
        self.measured_bytes_per_s = None

    def __enter__(self):
        why = missing_privileges()
        if why:
            raise RuntimeError(why)
        try:
            self._build()
            self.measured_bytes_per_s = self._measure_bandwidth()
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, *exc):
        self._remove()

    def wrap(self, rank, argv):
        return ["ip", "netns", "exec", self.namespaces[rank]] + list(argv)

    def master_addr(self):
        return ADDRESSES[0]

    def description(self, measured_rates=None):
        """The link in words with its measured rate; given several measurements (bytes/s), their median and range."""
        rates = [r for r in (measured_rates or [self.measured_bytes_per_s]) if r]
        measured = ""
        if rates:
            gbit = sorted(r * 8 / 1e9 for r in rates)
            measured = f", measured {statistics.median(gbit):.2f} Gbit/s one way"
            if len(gbit) > 1:
                measured += f" (median of {len(gbit)}: {gbit[0]:.2f}-{gbit[-1]:.2f})"
        delay = f"{self.delay_ms} ms delay each way (netem)" if not self.delay_note else self.delay_note
        return f"veth pair between two network namespaces, tbf {self.rate} each way, {delay}{measured}"

    def _build(self):
        a, b = self.namespaces
        for ns in self.namespaces:
            _run(["ip", "netns", "add", ns])
        _run(["ip", "link", "add", a + "0", "type", "veth", "peer", "name", b + "0"])
        for ns, addr in zip(self.namespaces, ADDRESSES):
            _run(["ip", "link", "set", ns + "0", "netns", ns])
            _run(["ip", "-n", ns, "link", "set", ns + "0", "name", IFNAME])
            _run(["ip", "-n", ns, "addr", "add", addr + "/24", "dev", IFNAME])
            _run(["ip", "-n", ns, "link", "set", IFNAME, "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            self._shape(ns)

    def _shape(self, ns):
        tc = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", IFNAME]
        # The bucket holds 2 ms at the rate (at least 64 KiB, a TSO segment) so that the kernel timer's granularity
        # does not cap the rate; the queue behind it holds 20 ms.
        bucket = max(65536, int(self.bits_per_s / 8 * 0.002))
        tbf = ["tbf", "rate", self.rate, "burst", str(bucket), "latency", "20ms"]
        parent = ["root"]
        if self.delay_ms > 0:
            r = subprocess.run(tc + ["root", "handle", "1:", "netem", "delay", f"{self.delay_ms}ms"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                parent = ["parent", "1:1", "handle", "10:"]
            else:
                self.delay_note = f"no delay (tc netem: {r.stderr.strip()}: this kernel lacks sch_netem?)"
        _run(tc + parent + tbf)

    def _measure_bandwidth(self):
        """Bytes per second of one TCP stream from the second namespace to the first, timed at the receiver."""
        size = int(max(64e6, self.bits_per_s / 8 * 0.5))
        server = subprocess.Popen(
            self.wrap(0, [sys.executable, "-c", _RECEIVER, ADDRESSES[0], str(size)]),
            stdout=subprocess.PIPE, text=True)
        try:
            port = int(server.stdout.readline())
            _run(self.wrap(1, [sys.executable, "-c", _SENDER, ADDRESSES[0], str(port), str(size)]))
            seconds = float(server.stdout.readline())
        finally:
            server.kill()
            server.wait()
        return size / seconds

    def _remove(self):
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        time.sleep(0.1)


_RECEIVER = """
import socket, sys, time
s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); left = int(sys.argv[2]); t0 = None
while left > 0:
    data = c.recv(1 << 20)
    if not data: break
    t0 = t0 or time.perf_counter(); left -= len(data)
print(time.perf_counter() - t0, flush=True)
"""

_SENDER = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
chunk, left = b"x" * (1 << 20), int(sys.argv[3])
while left > 0:
    n = min(left, len(chunk)); s.sendall(chunk[:n]); left -= n
s.close()
"""
