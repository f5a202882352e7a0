"""The "one host" verdicts' edges (issue 41: the mutants of ``make mutation``):
rank/netplugin.py's network, devices/memlock.py's limits and messages (its reading part
against the kernel: the limit set by ``prlimit``, CAP_IPC_LOCK taken away by
``setpriv``), devices/readable.py's checks of what the kernel writes, on small trees.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from sysverbs.devices.memlock import current, memlock_finding
from sysverbs.devices.readable import unknown_files, unknown_pci_files
from sysverbs.rank.netplugin import net_transport, uses_ib
from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ rank/netplugin.py


@pytest.mark.parametrize(("plugin", "ib", "efa", "want"), [
    ("", False, True, "ofi"),  # set but empty: the default plugin, as unset
    ("", True, False, "ib"),
    ("NONE", False, True, "socket"),  # "none" without case
    ("OFI", False, True, "ofi"),
    ("aws-ofi", True, False, "ib"),  # aws-ofi-nccl without an EFA device: IB after it
    ("aws-ofi", False, False, "socket"),
    ("/opt/ofi/lib/libnccl-net-sharp.so", False, True, "plugin"),  # the file's name decides
    ("libnccl-net-ofi.so", False, True, "ofi"),
])
def test_the_plugin_nccl_loads(plugin: str, ib: bool, efa: bool, want: str) -> None:
    assert net_transport({"NCCL_NET_PLUGIN": plugin}, ib_ports=ib, efa_devices=efa) == want


@pytest.mark.parametrize(("env", "want"), [
    ({"NCCL_NET": "ib", "NCCL_NET_PLUGIN": "sharp"}, "ib"),
    ({"NCCL_NET": "Libfabric", "NCCL_NET_PLUGIN": "sharp"}, ""),  # not aws-ofi-nccl
    ({"NCCL_NET": "sharp", "NCCL_NET_PLUGIN": "sharp"}, "plugin"),  # the plugin's own name
    ({"NCCL_NET": "sharp"}, ""),  # only aws-ofi-nccl (EFA): no network of that name
    ({"NCCL_NET": ""}, "ofi"),
])
def test_nccl_net_names_the_network(env: dict[str, str], want: str) -> None:
    assert net_transport(env, ib_ports=True, efa_devices=True) == want


@pytest.mark.parametrize(("devices", "disabled", "failure", "want"), [
    (1, False, "", True), (0, False, "", False), (2, True, "", False),
    (2, False, "ibv_open_device failed", False),
])
def test_uses_ib(devices: int, disabled: bool, failure: str, want: bool) -> None:
    assert uses_ib(devices, disabled, failure) is want


# ------------------------------------------------------------------- devices/memlock.py

_FIX = ("raise it (ulimit -l unlimited, /etc/security/limits.conf, LimitMEMLOCK=infinity "
        "in a systemd unit, or docker run --ulimit memlock=-1).")


_LESS = ("less than one NCCL buffer (4194304 bytes (4 MiB)): NCCL's and UCX's first large "
         "registration fails")


def _holds(n: int) -> str:
    return f"{n} NCCL buffers of 4194304 bytes (4 MiB), one per channel of each connection"


def _low(shown: str, holds: str = _LESS) -> tuple[str, str]:
    return ("memlock_low",
            f"RLIMIT_MEMLOCK is {shown} and this process has no CAP_IPC_LOCK: NCCL and UCX "
            "ask for unlimited (NCCL registers NCCL_BUFFSIZE, 4194304 bytes (4 MiB) by "
            "default, for each channel of each connection; this limit holds "
            f"{holds}), so their jobs can fail to register memory: {_FIX}")


def _no_ipc_lock(shown: str, holds: str = _LESS) -> tuple[str, str]:
    """Root without CAP_IPC_LOCK: libibverbs says nothing, the pages still count."""
    return ("no_ipc_lock",
            "This process runs as root without CAP_IPC_LOCK (a container's default "
            "capabilities drop it): libibverbs does not warn, yet every registered page "
            f"counts against RLIMIT_MEMLOCK, {shown}, {holds}: add the capability (docker "
            "run --cap-add=IPC_LOCK; Kubernetes: securityContext.capabilities.add IPC_LOCK) "
            f"or {_FIX}")


@pytest.mark.parametrize(("soft", "ipc_lock", "root", "want"), [
    (0, True, False, ("memlock", "RLIMIT_MEMLOCK is 0 bytes, so memory registration will "
                                 f"fail: {_FIX}")),
    (32768, True, False, ("memlock", "RLIMIT_MEMLOCK is 32768 bytes, so memory "
                                     f"registration will fail: {_FIX}")),
    (32769, True, False, None),
    (32768, False, True, _no_ipc_lock("32768 bytes")),
    (1048575, False, False, _low("1048575 bytes")),
    (1048576, False, False, _low("1048576 bytes (1 MiB)")),
    (12582912, False, False, _low("12582912 bytes (12 MiB)", _holds(3))),
    (-1, False, False, None),
    (None, False, False, None),
])
def test_memlock_values(soft: int, ipc_lock: bool, root: bool,
                        want: Optional[tuple[str, str]]) -> None:
    assert memlock_finding(soft, ipc_lock=ipc_lock, root=root) == want
    if not root:  # root is False unless said
        assert memlock_finding(soft, ipc_lock=ipc_lock) == want


def _current(*wrap: str) -> str:
    """``current()`` in a child process run under ``wrap`` (prlimit, setpriv)."""
    code = "from sysverbs.devices.memlock import current; print(repr(current()))"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([*wrap, sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, timeout=60, check=True)
    return p.stdout.strip()


def test_memlock_current_against_the_kernel() -> None:
    """The limit as prlimit sets it (below the hard limit) and CAP_IPC_LOCK as setpriv
    leaves it: as root with the capability 8 MiB is enough; without it, root is told
    ``no_ipc_lock`` (what the limit holds of NCCL's buffers), and 32 KiB, root's, is never
    libibverbs' ``memlock``."""
    for tool in ("prlimit", "setpriv"):
        require(None if shutil.which(tool) else f"{tool} not found (util-linux)", tool)
    if os.geteuid() != 0:
        require("not root", "CAP_IPC_LOCK to drop")
    drop = ["setpriv", "--bounding-set", "-ipc_lock", "--inh-caps", "-ipc_lock"]
    assert _current("prlimit", "--memlock=8388608") == "None"
    assert _current("prlimit", "--memlock=32768", *drop) == \
        repr(_no_ipc_lock("32768 bytes"))
    assert _current("prlimit", "--memlock=8388608", *drop) == \
        repr(_no_ipc_lock("8388608 bytes (8 MiB)", _holds(2)))
    # CapEff 0000000000010000 (CAP_SYS_MODULE alone): read as hexadecimal, not any base
    only16 = ["setpriv", "--bounding-set", "-all,+sys_module", "--inh-caps", "-all"]
    assert _current("prlimit", "--memlock=8388608", *only16) == \
        repr(_no_ipc_lock("8388608 bytes (8 MiB)", _holds(2)))
    # CAP_IPC_LOCK is bit 14 of CapEff: its neighbours (13, 15) stay, and do not count
    with open("/proc/self/status") as f:
        caps = next(int(x.split()[1], 16) for x in f if x.startswith("CapEff:"))
    assert caps >> 13 & 7 == 7
    assert current() is None  # root, with CAP_IPC_LOCK


def test_memlock_without_proc() -> None:
    """No /proc/self/status (an empty tmpfs on /proc, in a mount namespace of its own):
    root's capabilities are taken for granted, even with CAP_IPC_LOCK dropped."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        require("needs root and unshare(1) for a private /proc", "a host without /proc")
    code = ("import subprocess, sys; subprocess.run(['mount', '-t', 'tmpfs', 'none', "
            "'/proc'], check=True); from sysverbs.devices.memlock import current; "
            "print(repr(current()))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(["unshare", "-m", "prlimit", "--memlock=8388608", "setpriv",
                        "--bounding-set", "-ipc_lock", "--inh-caps", "-ipc_lock",
                        sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, timeout=60)
    if p.returncode != 0 and "mount" in p.stderr:
        require(f"cannot mount a tmpfs: {p.stderr.strip()}", "a host without /proc")
    assert (p.returncode, p.stdout.strip()) == (0, "None"), p.stderr


# ------------------------------------------------------------------ devices/readable.py

GOOD = {"node_guid": "a088:c203:00d1:4e20", "node_type": "1: CA",
        "ports/1/state": "4: ACTIVE", "ports/1/link_layer": "InfiniBand",
        "device/numa_node": "0", "device/local_cpulist": "0-15"}


def _device(tmp_path: Path, **files: str) -> Path:
    dev = tmp_path / "mlx5_0"
    for name, text in (GOOD | {k.replace("__", "/"): v for k, v in files.items()}).items():
        (dev / name).parent.mkdir(parents=True, exist_ok=True)
        (dev / name).write_text(text + "\n")
    return dev


def _whys(dev: Path) -> list[tuple[str, Optional[int], Optional[int], str]]:
    return [(os.path.relpath(u.path, dev), u.port, u.errno, u.why) for u in unknown_files(dev)]


@pytest.mark.parametrize(("name", "good", "bad"), [
    ("node_guid", ["0000:0000:0000:0001", "A088:C203:00D1:4E20"],
     ["a088:c203:00d1", "a088:c203:00d1:4e20:0000", "g088:c203:00d1:4e20"]),
    ("node_type", ["1: CA", "7: UNSPECIFIED"], ["0: X", "8: X", "1:CA", "1: ", "x: CA"]),
    ("ports__1__state", ["0: NOP", "5: ACTIVE_DEFER"], ["6: X", "-1: X", "4:ACTIVE"]),
    ("ports__1__link_layer", ["Ethernet", "Unknown"], ["IB", "ethernet", ""]),
    ("device__numa_node", ["-1", "1023", "7"], ["1024", "-7", "12345", "", "1 "]),
    ("device__local_cpulist", ["", "0-8191", "8191", "0,2-3,7"],
     ["0-8192", "8192", "3-1", "123456", "0-123456", "0,", "a"]),
])
def test_what_the_kernel_writes(tmp_path: Path, name: str, good: list[str],
                                bad: list[str]) -> None:
    for text in good:
        assert _whys(_device(tmp_path, **{name: text})) == [], text
    path = name.replace("__", "/")
    port = 1 if path.startswith("ports/") else None
    for text in bad:
        got = _whys(_device(tmp_path, **{name: text}))
        assert [(p, n, e) for p, n, e, _ in got] == [(path, port, None)], text
        assert got[0][3].startswith(f"holds {text!r}, not "), text


def test_the_words_and_the_quote(tmp_path: Path) -> None:
    long = "a" * 41
    dev = _device(tmp_path, node_guid="b" * 40, ports__1__link_layer=long,
                  device__numa_node="1024", device__local_cpulist="0-8192")
    assert [w for *_, w in _whys(dev)] == [
        f"holds {'b' * 40!r}, not a GUID",
        f"holds {'a' * 40 + '...'!r}, not a link layer",
        "holds '1024', not a NUMA node (-1, or 0 to 1023)",
        "holds '0-8192', not a CPU list (CPUs 0 to 8191)"]
    u = unknown_files(dev)[0]
    assert u.message("mlx5_0") == (
        f"{dev}/node_guid holds {'b' * 40!r}, not a GUID, so whether mlx5_0 works is "
        "unknown: the driver wrote it, or the tree is not a kernel's sysfs: check dmesg.")


def test_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    """A directory where the kernel writes a file opens but cannot be read (EISDIR); a
    link to itself cannot be opened (ELOOP); a dangling link is a missing file."""
    dev = _device(tmp_path)
    (dev / "node_type").unlink()
    (dev / "node_type").mkdir()
    (dev / "ports/1/state").unlink()
    (dev / "ports/1/state").symlink_to("state")
    (dev / "device/numa_node").unlink()
    (dev / "device/numa_node").symlink_to("nowhere")
    got = unknown_files(dev)
    assert [(os.path.relpath(u.path, dev), u.port, u.errno, u.why) for u in got] == [
        ("node_type", None, errno.EISDIR, "cannot be read (EISDIR: Is a directory)"),
        ("ports/1/state", 1, errno.ELOOP,
         "cannot be read (ELOOP: Too many levels of symbolic links)")]
    assert got[0].message("mlx5_0") == (
        f"{dev}/node_type cannot be read (EISDIR: Is a directory), so whether mlx5_0 works "
        "is unknown: run with the privileges to read it, or fix its mode.")


def test_only_one_final_newline_goes(tmp_path: Path) -> None:
    dev = _device(tmp_path, node_type="1: CA\n")
    assert [w for *_, w in _whys(dev)] == ["holds '1: CA\\n', not a node type"]


def test_which_ports_are_read(tmp_path: Path) -> None:
    """Ports are numbered directories below 10 digits; ``ports`` missing: none."""
    dev = _device(tmp_path, ports__123456789__state="9: X", ports__1234567890__state="9: X",
                  ports__x__state="9: X", ports__2__state="9: X")
    assert [(p, n) for p, n, *_ in _whys(dev)] == [
        ("ports/2/state", 2), ("ports/123456789/state", 123456789)]
    shutil.rmtree(dev / "ports")
    assert _whys(dev) == []
    assert unknown_files(tmp_path / "nothing") == []


@pytest.mark.parametrize("keep", ["numa_node", "local_cpulist"])
def test_a_pci_function_with_one_of_its_files(tmp_path: Path, keep: str) -> None:
    """Either file is enough for the PCI function's to be checked; neither: none."""
    pci = tmp_path / "pci"
    pci.mkdir()
    (pci / keep).write_text("x\n")
    assert [(os.path.relpath(u.path, pci), u.errno) for u in unknown_pci_files(pci)] == \
        [(keep, None)]
    (pci / keep).unlink()
    assert unknown_pci_files(pci) == []
