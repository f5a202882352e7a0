"""Real NCCL (PyPI's nvidia-nccl-cu12, no GPU needed) as an oracle for sysverbs.rank.nccl.

``make nccl-oracle`` downloads the wheel once per machine into
``/var/cache/sysverbs-test/nccl`` (``NCCL_CACHE``) and unpacks it; the tests find
the library there, or at ``$SYSVERBS_NCCL_LIB``.

:class:`NcclOracle` runs :mod:`tests.oracle.nccl_server` (which loads the library
once and forks a worker per question) and :class:`Netns` makes network namespaces
holding one veth interface with a test name, so that one question ("which interface
does NCCL's bootstrap pick?") tells whether a pattern matches a name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

NCCL_VERSION = "2.32.3"
#: An older release with the other parseStringList (before 2.30.7) and config-file rules
#: (no NCCL_CONF_FILE before 2.23, no "\\r" removal before 2.30.3).
NCCL_OLD_VERSION = "2.21.5"
ROOT = Path(__file__).resolve().parents[2]
_CACHES = [
    os.environ.get("NCCL_CACHE"),
    "/var/cache/sysverbs-test/nccl",
    os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                 "sysverbs-test", "nccl"),
]


def library(version: str = NCCL_VERSION) -> Optional[str]:
    """The path of that release's libnccl.so.2, or None (``$SYSVERBS_NCCL_LIB`` names the
    newest release's; ``$SYSVERBS_NCCL_OLD_LIB`` the older one's)."""
    env = os.environ.get("SYSVERBS_NCCL_LIB" if version == NCCL_VERSION
                         else "SYSVERBS_NCCL_OLD_LIB")
    if env:
        return env if os.path.exists(env) else None
    for cache in _CACHES:
        if not cache:
            continue
        path = os.path.join(cache, version, "nvidia", "nccl", "lib", "libnccl.so.2")
        if os.path.exists(path):
            return path
    return None


def unavailable_reason(version: str = NCCL_VERSION) -> Optional[str]:
    """Why the NCCL oracle cannot run here (None when it can)."""
    if library(version) is None:
        return (f"libnccl.so.2 {version} not found (run `make nccl-oracle`, or set "
                "SYSVERBS_NCCL_LIB / SYSVERBS_NCCL_OLD_LIB)")
    if os.geteuid() != 0:
        return "the NCCL oracle needs root (network and mount namespaces)"
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (util-linux, iproute2)"
    probe = subprocess.run(["unshare", "-n", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"unshare -n -m failed: {probe.stderr.decode().strip()}"
    return None


def _die_with_parent() -> None:
    import ctypes
    import signal

    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


class Netns:
    """A network namespace (held by a ``sleep`` in ``unshare -n``) with one veth
    interface ``name`` carrying 127.1.0.1/32 (IPv6 off, so it has one address; the
    peer has none and loopback stays down, so NCCL sees only ``name``)."""

    def __init__(self, name: Optional[str]) -> None:
        self.name = name
        # the holder dies with the test process (PR_SET_PDEATHSIG survives the exec)
        self.proc = subprocess.Popen(["unshare", "-n", "sleep", "100000"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        self.path = f"/proc/{self.proc.pid}/ns/net"
        # Until unshare is in its new namespace: before that, the path names this
        # process's namespace, and the interfaces below would land in the host's.
        deadline = time.monotonic() + 30
        while os.readlink(self.path) == os.readlink("/proc/self/ns/net"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise OSError(f"unshare -n did not make a network namespace "
                              f"(exit status {self.proc.returncode})")
            time.sleep(0.001)
        if name is None:
            return
        peer = "vpeer0" if name != "vpeer0" else "vpeer1"
        script = (
            "for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 "
            "/proc/sys/net/ipv6/conf/default/disable_ipv6; do "
            "[ -e $f ] && echo 1 > $f; done; "
            'ip link add name "$1" type veth peer name "$2" && '
            'ip addr add 127.1.0.1/32 dev "$1" && ip link set dev "$2" up && '
            'ip link set dev "$1" up && '
            # IFF_RUNNING follows the carrier, which the kernel's linkwatch sets later
            'for i in $(seq 500); do ip -o link show dev "$1" | grep -q " state UP " '
            "&& exit 0; sleep 0.01; done; exit 1"
        )
        res = subprocess.run(["nsenter", f"--net={self.path}", "sh", "-c", script, "sh",
                              name, peer], capture_output=True, text=True)
        if res.returncode != 0:
            self.close()
            raise OSError(f"cannot make interface {name!r}: {res.stderr.strip()}")

    @classmethod
    def with_interfaces(cls, spec: list[tuple[str, Optional[str], Optional[str]]]) -> Netns:
        """A namespace with IPv6 on and, for each ``(name, ipv4/len, ipv6/len)``, a veth
        with those addresses (IPv6 without duplicate address detection), in order."""
        ns = cls(None)
        lines = []
        for i, (name, v4, v6) in enumerate(spec):
            lines.append(f'ip link add name "{name}" type veth peer name "zpeer{i}"')
            if v4:
                lines.append(f'ip addr add {v4} dev "{name}"')
            if v6:
                lines.append(f'ip -6 addr add {v6} dev "{name}" nodad')
            lines.append(f'ip link set dev "zpeer{i}" up && ip link set dev "{name}" up')
        for name, _, _ in spec:
            lines.append(f'for i in $(seq 500); do ip -o link show dev "{name}" | '
                         'grep -q " state UP " && break; sleep 0.01; done')
        res = subprocess.run(["nsenter", f"--net={ns.path}", "sh", "-ec", "\n".join(lines)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            ns.close()
            raise OSError(f"cannot make interfaces: {res.stderr.strip()}")
        return ns

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run a command in the namespace."""
        return subprocess.run(["nsenter", f"--net={self.path}", *argv], capture_output=True,
                              text=True, cwd=ROOT)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class NcclOracle:
    """One server process; :meth:`ask` answers one question in a fresh fork."""

    def __init__(self, lib: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.oracle.nccl_server", lib], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            preexec_fn=_die_with_parent)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if ready.strip() != "ready":
            raise OSError(f"NCCL oracle server did not start: {ready!r}")

    def ask(self, netns: Optional[Netns], env: dict[str, str],
            files: Optional[dict[str, str]] = None) -> tuple[int, str]:
        """NCCL's result code and log for ``ncclGetUniqueId()`` in that namespace with
        exactly that environment (plus NCCL_DEBUG=INFO) and those files."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        full = {"NCCL_DEBUG": "INFO", **env}
        req = {"netns": netns.path if netns else None, "env": full, "files": files or {}}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        return int(reply["rc"]), str(reply["log"])

    def bootstrap_interface(self, netns: Netns, env: dict[str, str],
                            files: Optional[dict[str, str]] = None) -> Optional[str]:
        """The interface NCCL's bootstrap uses, None for 'no socket interface found'."""
        rc, log = self.ask(netns, env, files)
        return parse_bootstrap(rc, log)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait()


def parse_bootstrap(rc: int, log: str) -> Optional[str]:
    """``Bootstrap: Using <ifname>:<addr><port>`` (``Bootstrap : Using`` in older
    releases) -> ifname; ``Bootstrap : no socket interface found`` -> None; anything
    else is an error."""
    for line in log.splitlines():
        for mark in ("NCCL INFO Bootstrap: Using ", "NCCL INFO Bootstrap : Using "):
            if mark in line:
                return line.split(mark, 1)[1].split(":", 1)[0]
        if "Bootstrap : no socket interface found" in line:
            return None
    raise AssertionError(f"unexpected NCCL output (rc {rc}):\n{log}")
