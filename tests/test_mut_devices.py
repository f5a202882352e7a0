"""devices/'s verdicts' edges (issue 41: the mutants of ``make mutation``): access.py's
cgroup and netns findings (messages exactly), its RDMA netlink questions against a fake
kernel (tests/netlink_fakes.py), and ``faccessat`` against the real kernel (os.access).
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import pytest

from sysverbs.devices import access
from sysverbs.devices.access import (
    access_errno,
    cgroup_denied,
    cgroup_denied_here,
    netns_away,
    netns_finding,
    netns_state,
    own_cgroup,
)
from sysverbs.ground.errors import SourceUnavailable
from sysverbs.sources import netlink
from sysverbs.sources.netlink import wire
from tests.conftest import require
from tests.netlink_fakes import Dev, FakeKernel, error, msg, u8

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ devices/access.py


@pytest.mark.parametrize(("text", "want"), [
    ("4:memory:/a\n5:cpu,devices:/d/e\n0::/u\n", "/d/e (cgroup v1 devices)"),
    ("0::/u\n3:devices:/v1\n", "/v1 (cgroup v1 devices)"),  # v1's devices line first
    ("1:name=systemd:/s\n0::/k8s/pod:1\n", "/k8s/pod:1 (cgroup v2: a BPF_CGROUP_DEVICE program)"),
    ("1::/x\n0:x:/y\n3:devicesx:/z\n", "?"), ("5:devices\n", "?"), ("", "?"),
])
def test_own_cgroup(text: str, want: str) -> None:
    assert own_cgroup(text) == want


def test_the_cgroup_message() -> None:
    assert cgroup_denied("/dev/infiniband/uverbs3", 231, 195, "0::/pod\n") == (
        "device_cgroup_denied",
        "Opening /dev/infiniband/uverbs3 (char 231:195) failed with EPERM although the node "
        "and its mode are right: the device cgroup of this process's cgroup /pod (cgroup v2: "
        "a BPF_CGROUP_DEVICE program) refuses it. Allow it (docker "
        "--device-cgroup-rule='c 231:* rwm' or --device=/dev/infiniband/uverbs3; Kubernetes: "
        "an RDMA device plugin; cgroup v1: echo 'c 231:* rwm' > devices.allow).")
    with open("/proc/self/cgroup") as f:  # this process's, as the kernel says it
        assert cgroup_denied_here("/dev/x", 1, 3) == cgroup_denied("/dev/x", 1, 3, f.read())


def test_no_proc_self_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_proc(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError(errno.ENOENT, "no /proc")
    monkeypatch.setattr(access, "open", no_proc, raising=False)
    assert cgroup_denied_here("/dev/x", 1, 3) == cgroup_denied("/dev/x", 1, 3, None)


def test_the_netns_message() -> None:
    assert netns_finding(0, ["b", "a", "c"], ["c"]) == {
        name: ("netns_exclusive",
               f"{name} is in another network namespace: the RDMA subsystem is in exclusive "
               "netns mode (rdma system show) and this process's namespace has no such "
               "device, so libibverbs (netlink) and librdmacm do not list it although /sys "
               f"shows it. Move it (rdma dev set {name} netns NS) or run in its namespace.")
        for name in ("b", "a")}
    assert list(netns_finding(0, ["b", "a"], [])) == ["b", "a"]
    assert netns_finding(None, ["a"], []) == netns_finding(1, ["a"], []) == {}


#: ``RDMA_NLDEV_SYS_ATTR_NETNS_MODE`` as the kernel's header has it (test_the_netns_attribute)
KERNEL_NETNS_MODE = 66


def test_the_netns_attribute_is_the_kernels(tmp_path: Path) -> None:
    """NETNS_MODE_ATTR against <rdma/rdma_netlink.h> (linux-libc-dev), compiled by gcc."""
    cc = shutil.which("gcc") or shutil.which("cc")
    require(None if cc else "no C compiler (apt-get install gcc)", "the C compiler")
    assert cc is not None
    src = tmp_path / "netns.c"
    src.write_text("#include <rdma/rdma_netlink.h>\n_Static_assert("
                   "RDMA_NLDEV_SYS_ATTR_NETNS_MODE == WANT && WANT == KERNEL, \"value\");\n")
    done = subprocess.run([cc, "-fsyntax-only", f"-DWANT={access.NETNS_MODE_ATTR}",
                           f"-DKERNEL={KERNEL_NETNS_MODE}", str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


class _Kernel(FakeKernel):
    """The fake kernel, answering SYS_GET too: ``mode`` (None: no NETNS_MODE attribute;
    an int below 0: that error)."""

    def __init__(self, devs: list[Dev], mode: Optional[int], **hooks: object) -> None:
        super().__init__(devs, **hooks)
        self.mode = mode

    def send(self, data: bytes) -> None:
        if int.from_bytes(data[4:6], sys.byteorder) != wire.TYPE_SYS_GET:
            return super().send(data)
        self.sent.append(data)
        if self.mode is not None and self.mode < 0:
            self.queue.append(error(self.mode))
            return
        attrs = u8(KERNEL_NETNS_MODE, self.mode) if self.mode is not None else b""
        self.queue.append(msg(wire.TYPE_SYS_GET, attrs))


def _with(monkeypatch: pytest.MonkeyPatch, kernel: Optional[_Kernel]) -> None:
    def opened() -> _Kernel:
        if kernel is None:
            raise SourceUnavailable("no socket", errno.EPROTONOSUPPORT)
        return kernel
    monkeypatch.setattr(netlink, "open_netlink", opened)


@pytest.mark.parametrize(("mode", "dump_error", "want"), [
    (0, None, (0, ["mlx5_0", "mlx5_1"])), (1, None, (1, ["mlx5_0", "mlx5_1"])),
    (0, -errno.EPERM, (0, None)),  # the dump fails: the mode alone
    (None, None, (None, None)),  # an old kernel: no NETNS_MODE attribute
    (-errno.EOPNOTSUPP, None, (None, None)),
])
def test_netns_state_asks_the_kernel(monkeypatch: pytest.MonkeyPatch, mode: Optional[int],
                                     dump_error: Optional[int],
                                     want: tuple[Optional[int], Optional[list[str]]]) -> None:
    kernel = _Kernel([Dev(1, "mlx5_0"), Dev(2, "mlx5_1")], mode, dump_error=dump_error)
    _with(monkeypatch, kernel)
    assert netns_state() == want and kernel.closed
    first = wire.parse_attrs(kernel.sent[0])
    assert first is not None and kernel.sent[0][8:12] != b"\0" * 4  # a sequence number
    if len(kernel.sent) > 1:  # the dump: the next sequence number, the socket's port
        seq = int.from_bytes(kernel.sent[0][8:12], sys.byteorder)
        assert int.from_bytes(kernel.sent[1][8:12], sys.byteorder) == (seq + 1) & 0xFFFFFFFF
        assert int.from_bytes(kernel.sent[1][12:16], sys.byteorder) == 4242
    _with(monkeypatch, None)
    assert netns_state() == (None, None)


def test_netns_state_numbers_its_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sequence numbers are the time's low 32 bits, then the next one; a transport
    without a port sends port 0."""
    kernel = _Kernel([Dev(1, "a")], 1)
    del kernel.port
    _with(monkeypatch, kernel)
    monkeypatch.setattr(access.time, "time", lambda: float((1 << 32) + 5))
    assert netns_state() == (1, ["a"])
    heads = [struct.unpack_from("=IHHII", m) for m in kernel.sent]
    assert [(seq, port) for *_, seq, port in heads] == [(5, 0), (6, 0)]


def _bad_attrs(kind: int) -> bytes:
    """A message of ``kind`` whose one attribute claims more bytes than it has."""
    return msg(kind, struct.pack("=HH", 64, wire.ATTR_DEV_NAME) + b"abcd")


def test_netns_state_of_malformed_replies(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SYS_GET reply that does not parse: no answer; a dump datagram that does not
    parse: that device is not named, the others are."""
    kernel = _Kernel([], 0)
    kernel.send = lambda data: kernel.queue.append(_bad_attrs(wire.TYPE_SYS_GET))  # type: ignore[method-assign]
    _with(monkeypatch, kernel)
    assert netns_state() == (None, None)
    dump = _Kernel([Dev(1, "a"), Dev(2, "b"), Dev(3, "c")], 0,
                   dump=lambda i, m: _bad_attrs(wire.TYPE_GET) if i == 1 else m)
    _with(monkeypatch, dump)
    assert netns_state() == (0, ["a", "c"])


def test_netns_away_of_a_live_sys(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _Kernel([Dev(1, "mlx5_0")], 0)
    _with(monkeypatch, kernel)
    for source in ("auto", "netlink"):
        found = netns_away(b"/sys", source, [b"mlx5_0", b"mlx5_\xff"])
        assert list(found) == [b"mlx5_\xff"] and found[b"mlx5_\xff"][0] == "netns_exclusive"
        assert "mlx5_\udcff is in another network namespace" in found[b"mlx5_\xff"][1]
    sent = len(kernel.sent)
    assert netns_away(b"/sys", "auto", []) == {} and len(kernel.sent) == sent  # not asked
    assert netns_away(b"/sys/", "auto", [b"x"]) == {} and len(kernel.sent) == sent
    assert netns_away(b"/sys", "sysfs", [b"x"]) == {} and len(kernel.sent) == sent


def test_access_errno_is_the_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``faccessat(AT_FDCWD, path, R_OK|W_OK, AT_EACCESS)``: the kernel's answer
    (os.access with effective ids), relative paths from the working directory."""
    (tmp_path / "f").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    for path, want in ((b"f", 0), (b"missing", errno.ENOENT), (b"f/x", errno.ENOTDIR),
                       (os.fsencode(tmp_path / "f"), 0)):
        assert access_errno(path) == want
        assert os.access(path, os.R_OK | os.W_OK, effective_ids=True) == (want == 0)


def test_access_errno_without_libc(monkeypatch: pytest.MonkeyPatch) -> None:
    """No libc to load, or one without faccessat: EACCES (the device cannot be judged)."""
    import ctypes

    def no_libc(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOENT, "no libc")
    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert access_errno(b"/") == errno.EACCES
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: object())
    assert access_errno(b"/") == errno.EACCES


_NOBODY = """
import ctypes, errno, os, sys
from sysverbs.devices.access import access_errno
access_errno(b"/")  # everything it loads, loaded as root
os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
print(*(access_errno(p.encode()) for p in sys.argv[1:]))
"""


def test_access_errno_needs_both_read_and_write() -> None:
    """A user that may write a file but not read it, or read it but not write it: the
    kernel refuses both (EACCES), as os.access says for that user."""
    require(None if os.geteuid() == 0 else "needs root to become another user", "root")
    d = tempfile.mkdtemp(prefix="sv-access-", dir="/dev/shm" if os.path.isdir("/dev/shm")
                         else None)
    try:
        os.chmod(d, 0o755)
        for name, mode in (("w", 0o222), ("r", 0o444), ("rw", 0o666)):
            Path(d, name).write_bytes(b"")
            os.chmod(Path(d, name), mode)
        env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", str(ROOT)))
        out = subprocess.run([sys.executable, "-c", _NOBODY, *(f"{d}/{n}" for n in
                                                              ("w", "r", "rw"))],
                             capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
        assert out.stdout.split() == [str(errno.EACCES), str(errno.EACCES), "0"], out.stderr
    finally:
        shutil.rmtree(d)
