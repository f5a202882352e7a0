"""sysverbs.devices.monitor: hotplug events from udev (umockdev's uevent emulation) and by polling.

The udev backend is driven by a umockdev testbed created from Python through
``gi.repository.UMockdev`` (gir1.2-umockdev-1.0), in a process started under
``umockdev-wrapper`` (the preload that fakes /sys, /dev and the uevent netlink
socket).  Adding a device to the testbed emits its "add" uevent; removals are
emitted with ``Testbed.uevent(path, "remove")``.  umockdev speaks udevd's protocol,
so these events reach monitors on udevd's group (the backend picks it under
umockdev).  The kernel's own uevents (``netlink="kernel"``) are proven in the
kernel lab VM (tests/kernel/test_kernel_lab.py, scenario ``hotplug``).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pytest

from sysverbs import testing
from sysverbs.devices.monitor import DeviceEvent, monitor
from sysverbs.sources import udev as udev_source
from sysverbs.testing import HostBuilder
from tests.conftest import require
from tests.oracle import harness

GI_PATHS = ["/usr/lib/python3/dist-packages"]
# How long a test waits for an event it expects (poll() returns as soon as it comes):
# generous, a loaded machine only makes it come later.  No test bounds how long
# anything took; one that waits for an event that never comes fails at WAIT (or at
# pytest-timeout's limit).
WAIT = 120.0


def gi_reason() -> Optional[str]:
    if shutil.which("umockdev-wrapper") is None:
        return "umockdev-wrapper is not installed (apt-get install umockdev)"
    why = udev_source.unavailable_reason()
    if why is not None:
        return why
    probe = (f"import sys; sys.path += {GI_PATHS!r}; import gi; "
             "gi.require_version('UMockdev', '1.0'); from gi.repository import UMockdev")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    if proc.returncode != 0:
        return ("gi.repository.UMockdev is not importable (apt-get install python3-gi "
                f"gir1.2-umockdev-1.0): {proc.stderr.strip().splitlines()[-1:]}")
    return None


# The script builds an empty testbed, starts monitors, adds a host (rxe0 + uverbs0,
# then mlx5_0 + uverbs1) and removes rxe0's devices, printing what each monitor saw.
SCRIPT = textwrap.dedent(
    r"""
    import json, sys, time
    sys.path += GI_PATHS
    import gi
    gi.require_version("UMockdev", "1.0")
    from gi.repository import UMockdev
    from sysverbs import testing
    from sysverbs.testing import umockdev
    from sysverbs.devices.monitor import monitor
    from sysverbs.testing import HostBuilder

    tb = UMockdev.Testbed.new()
    tb.add_from_string(umockdev.dumps(HostBuilder().build()))  # lo + the class ABI

    def ev(e):
        return [e.action, e.subsystem, e.name, e.ibdev, e.sys_path, e.seqnum > 0,
                e.properties.get("SUBSYSTEM"), e.backend]

    it = monitor(timeout=20)
    cb_events = []
    cb = monitor(lambda e: cb_events.append(ev(e)), timeout=20)
    everything = monitor(timeout=20, actions=None)
    out = {"backend": it.backend, "reason": it.reason}

    rxe = HostBuilder().rxe(netdev="eth7")
    tb.add_from_string(umockdev.dumps(rxe.build(loopback=False)))
    seen = [ev(it.poll(timeout=5)), ev(it.poll(timeout=5))]   # rxe0, uverbs0
    mlx = HostBuilder().mlx5(uverbs=1)
    tb.add_from_string(umockdev.dumps(mlx.build(loopback=False)))
    seen += [ev(it.poll(timeout=5)), ev(it.poll(timeout=5))]  # mlx5_0, uverbs1
    # a uverbs device's ibdev is read when its "add" is received: take them now (and let
    # the callback's thread receive them too) before the devices go
    out["everything"] = [ev(everything.poll(timeout=5)) for _ in range(4)]
    deadline = time.monotonic() + 20
    while len(cb_events) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    tb.uevent("/sys/devices/virtual/infiniband/rxe0", "change")
    uv, ib = "/sys/devices/virtual/infiniband_verbs/uverbs0", "/sys/devices/virtual/infiniband/rxe0"
    tb.uevent(uv, "remove"); tb.remove_device(uv)
    tb.uevent(ib, "remove"); tb.remove_device(ib)
    seen += [ev(it.poll(timeout=5)), ev(it.poll(timeout=5))]  # the change is filtered
    out["extra"] = it.poll(timeout=0.3)
    out["iterator"] = seen

    late = monitor(timeout=20, existing=True)
    out["existing"] = [ev(late.poll(timeout=1)) for _ in range(2)]
    late.stop()

    deadline = time.monotonic() + 5
    while len(cb_events) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    cb.stop(); cb.join(5)
    out["callback"] = cb_events
    out["everything"] += [ev(e) for e in iter(lambda: everything.poll(timeout=1), None)]
    everything.stop()
    it.stop()
    out["after_stop"] = it.poll(timeout=0.1)
    print(json.dumps(out))
    """
).replace("GI_PATHS", repr(GI_PATHS))


def _run_under_umockdev(tmp_path: Path) -> dict[str, Any]:
    script = tmp_path / "events.py"
    script.write_text(SCRIPT)
    env = harness.base_env()
    env.pop("SYSFS_PATH", None)
    proc = subprocess.run(["umockdev-wrapper", sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return result


RXE_UV = "/sys/devices/virtual/infiniband_verbs/uverbs0"
RXE_IB = "/sys/devices/virtual/infiniband/rxe0"
MLX_IB = "/sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband/mlx5_0"
MLX_UV = "/sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband_verbs/uverbs1"


def test_udev_events_under_umockdev(tmp_path: Path) -> None:
    require(gi_reason(), "umockdev (gi.repository.UMockdev) + pyudev")
    out = _run_under_umockdev(tmp_path)
    assert out["backend"] == "udev" and "umockdev" in out["reason"]
    expected = [
        ["add", "infiniband", "rxe0", "rxe0", RXE_IB, True, "infiniband", "udev"],
        ["add", "infiniband_verbs", "uverbs0", "rxe0", RXE_UV, True, "infiniband_verbs", "udev"],
        ["add", "infiniband", "mlx5_0", "mlx5_0", MLX_IB, True, "infiniband", "udev"],
        ["add", "infiniband_verbs", "uverbs1", "mlx5_0", MLX_UV, True, "infiniband_verbs",
         "udev"],
        # a removed uverbs device is still named: its ibdev was remembered at "add"
        ["remove", "infiniband_verbs", "uverbs0", "rxe0", RXE_UV, True, "infiniband_verbs",
         "udev"],
        ["remove", "infiniband", "rxe0", "rxe0", RXE_IB, True, "infiniband", "udev"],
    ]
    assert out["iterator"] == expected
    assert out["extra"] is None  # the net device and the "change" were filtered out
    assert out["callback"] == expected
    change = ["change", "infiniband", "rxe0", "rxe0", RXE_IB, True, "infiniband", "udev"]
    assert out["everything"] == expected[:4] + [change] + expected[4:]
    assert out["existing"] == [
        ["add", "infiniband", "mlx5_0", "mlx5_0", MLX_IB, False, None, "udev"],
        ["add", "infiniband_verbs", "uverbs1", "mlx5_0", MLX_UV, False, None, "udev"],
    ]
    assert out["after_stop"] is None


# --------------------------------------------------------------------- polling


def _add(host: testing.FakeHost, builder: HostBuilder, pause: float = 0.05) -> None:
    """Add the builder's devices to a live fake host in the kernel's order.

    ``device_add`` creates the device's directory, then its class link, then its
    attribute files (``ibdev``, ``node_type``, ports); the uevent comes last.  Here each
    RDMA device's directory and class link appear first, ``pause`` seconds (several
    poll intervals) before its attributes, so that a poller meets every device
    half-created."""
    stage = host.root.parent / f".stage-{os.getpid()}-{time.monotonic_ns()}"
    testing.materialize(builder.build(loopback=False), stage)
    links = [link for sub in ("infiniband", "infiniband_verbs")
             for link in sorted((stage / "sys/class" / sub).iterdir()) if link.is_symlink()]
    devdirs = {os.path.realpath(link) for link in links}
    skip = devdirs | {str(link) for link in links}
    # first the rest: parents (the PCI function), bus links, /dev nodes
    shutil.copytree(stage / "sys", host.sysfs, symlinks=True, dirs_exist_ok=True,
                    ignore=lambda d, names: [n for n in names
                                             if os.path.join(os.path.realpath(d), n) in skip
                                             or os.path.join(d, n) in skip])
    shutil.copytree(stage / "dev", host.root / "dev", symlinks=True, dirs_exist_ok=True)
    for link in links:  # IB devices first, as the kernel registers them
        devdir = Path(os.path.realpath(link))
        target = host.sysfs / devdir.relative_to(os.path.realpath(stage / "sys"))
        target.mkdir()
        os.symlink(os.readlink(link), host.sysfs / link.relative_to(stage / "sys"))
        time.sleep(pause)
        # a sysfs attribute appears whole: write each file beside, then rename it
        shutil.copytree(devdir, target, symlinks=True, dirs_exist_ok=True,
                        copy_function=_copy_whole)
    shutil.rmtree(stage)


def _copy_whole(src: str, dst: str) -> None:
    partial = f"{dst}.partial"
    shutil.copy2(src, partial)
    os.replace(partial, dst)


def _remove(host: testing.FakeHost, ibdev: str, uverbs: str) -> None:
    for sub, name in (("infiniband_verbs", uverbs), ("infiniband", ibdev)):
        link = host.sysfs / "class" / sub / name
        target = os.path.realpath(link)
        os.unlink(link)
        shutil.rmtree(target)


def _brief(events: list[DeviceEvent]) -> list[tuple[str, str, str, Optional[str]]]:
    return [(e.action, e.subsystem, e.name, e.ibdev) for e in events]


def test_polling_a_fake_host(tmp_path: Path) -> None:
    host = testing.materialize(HostBuilder(), tmp_path / "h")
    mon = monitor(sysfs_path=host.sysfs, poll_interval=0.02)
    assert mon.backend == "poll"
    assert "not" in mon.reason or "pyudev" in mon.reason or "libudev" in mon.reason
    _add(host, HostBuilder().rxe())
    got = [mon.poll(timeout=WAIT), mon.poll(timeout=WAIT)]
    assert None not in got
    assert _brief(got) == [("add", "infiniband", "rxe0", "rxe0"),  # type: ignore[arg-type]
                           ("add", "infiniband_verbs", "uverbs0", "rxe0")]
    assert got[0] is not None and got[0].backend == "poll"
    assert got[0].sys_path == os.path.realpath(host.sysfs / "class/infiniband/rxe0")
    assert got[0].properties == {} and got[0].seqnum == 0
    _remove(host, "rxe0", "uverbs0")
    got = [mon.poll(timeout=WAIT), mon.poll(timeout=WAIT)]
    assert _brief(got) == [("remove", "infiniband_verbs", "uverbs0", "rxe0"),  # type: ignore
                           ("remove", "infiniband", "rxe0", "rxe0")]
    assert mon.poll(timeout=0.1) is None
    mon.stop()
    assert not mon.running


@pytest.mark.timeout(60)  # a monitor that never ends fails fast
def test_polling_callback_existing_and_timeout(tmp_path: Path) -> None:
    host = testing.materialize(HostBuilder().mlx5(), tmp_path / "h")
    events: list[DeviceEvent] = []
    four = threading.Event()

    def seen(event: DeviceEvent) -> None:
        events.append(event)
        if len(events) == 4:
            four.set()

    mon = monitor(seen, sysfs_path=host.sysfs, poll_interval=0.02, existing=True)
    with pytest.raises(RuntimeError):
        iter(mon)
    _add(host, HostBuilder(first_bus=0x20).efa(uverbs=3))
    assert four.wait(WAIT), _brief(events)
    mon.stop()
    mon.join()
    assert not mon.running
    assert _brief(events) == [("add", "infiniband", "mlx5_0", "mlx5_0"),
                              ("add", "infiniband_verbs", "uverbs0", "mlx5_0"),
                              ("add", "infiniband", "rdmap32s0", "rdmap32s0"),
                              ("add", "infiniband_verbs", "uverbs3", "rdmap32s0")]
    # A callback monitor ends by itself at its timeout: join() returns without stop()
    # (a thread that never ended would hold it until pytest-timeout fails the test),
    # and only once the monitor's own deadline has passed.
    quiet: list[DeviceEvent] = []
    mon = monitor(quiet.append, sysfs_path=host.sysfs, poll_interval=0.02, timeout=0.5)
    mon.join()
    assert quiet == [] and not mon.running
    assert mon._remaining() == 0.0


def test_a_half_created_uverbs_entry_is_reported_once_complete(tmp_path: Path) -> None:
    """The race the kernel makes: the uverbs entry exists, its ``ibdev`` not yet.  The
    poller reports the IB device, and the uverbs device only when a later look finds its
    ``ibdev``: never ``ibdev=None`` for a device that is being created."""
    host = testing.materialize(HostBuilder(), tmp_path / "h")
    mon = monitor(sysfs_path=host.sysfs, poll_interval=0.02)
    testing.materialize(HostBuilder().rxe().build(loopback=False), host.root)
    ibdev_file = Path(os.path.realpath(host.sysfs / "class/infiniband_verbs/uverbs0")) / "ibdev"
    content = ibdev_file.read_bytes()
    ibdev_file.unlink()  # the state between the class link and the attributes
    got = mon.poll(timeout=WAIT)
    assert got is not None and _brief([got]) == [("add", "infiniband", "rxe0", "rxe0")]
    assert mon.poll(timeout=0.3) is None  # looked again and again: still incomplete
    ibdev_file.write_bytes(content)
    got = mon.poll(timeout=WAIT)
    assert got is not None and _brief([got]) == [("add", "infiniband_verbs", "uverbs0", "rxe0")]
    assert mon.poll(timeout=0.1) is None  # reported once
    mon.stop()


def test_an_entry_that_never_completes_is_reported_after_settling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry whose ``ibdev`` never comes is reported (with ``ibdev`` None) once it has
    been incomplete for SETTLE_SECONDS, not before: the test moves SETTLE_SECONDS
    instead of waiting for it."""
    mon_mod = importlib.import_module("sysverbs.devices.monitor")
    monkeypatch.setattr(mon_mod, "SETTLE_SECONDS", 3600.0)
    host = testing.materialize(HostBuilder(), tmp_path / "h")
    mon = monitor(sysfs_path=host.sysfs, poll_interval=0.02, existing=True)
    testing.materialize(HostBuilder().rxe().build(loopback=False), host.root)
    uverbs = Path(os.path.realpath(host.sysfs / "class/infiniband_verbs/uverbs0"))
    (uverbs / "ibdev").unlink()  # broken for good
    assert _brief([mon.poll(timeout=WAIT)]) == [  # type: ignore[list-item]
        ("add", "infiniband", "rxe0", "rxe0")]
    assert mon.poll(timeout=0.3) is None  # incomplete for less than SETTLE_SECONDS
    monkeypatch.setattr(mon_mod, "SETTLE_SECONDS", 0.0)  # ... and now for longer
    assert _brief([mon.poll(timeout=WAIT)]) == [  # type: ignore[list-item]
        ("add", "infiniband_verbs", "uverbs0", None)]
    assert mon.poll(timeout=0.1) is None
    mon.stop()
    # at start-up (existing=True), a half-created entry is not listed either
    monkeypatch.setattr(mon_mod, "SETTLE_SECONDS", 3600.0)
    late = monitor(sysfs_path=host.sysfs, poll_interval=0.02, existing=True)
    assert _brief([late.poll(timeout=WAIT)]) == [  # type: ignore[list-item]
        ("add", "infiniband", "rxe0", "rxe0")]
    assert late.poll(timeout=0.2) is None
    (uverbs / "ibdev").write_text("rxe0\n")
    assert _brief([late.poll(timeout=WAIT)]) == [  # type: ignore[list-item]
        ("add", "infiniband_verbs", "uverbs0", "rxe0")]
    late.stop()


@pytest.mark.timeout(60)  # a monitor that never ends fails fast
def test_iterator_ends_at_timeout_and_on_stop(tmp_path: Path) -> None:
    host = testing.materialize(HostBuilder(), tmp_path / "h")
    mon = monitor(sysfs_path=host.sysfs, timeout=0.3, poll_interval=0.05)
    assert list(mon) == []
    assert not mon.running  # not stopped: it ended because its deadline had passed
    # No look for an hour: only stop() (its wake-up) can end the iteration; without it
    # the test would hang until pytest-timeout fails it.
    mon = monitor(sysfs_path=host.sysfs, poll_interval=3600)
    threading.Timer(0.2, mon.stop).start()
    assert list(mon) == []
    assert not mon.running
    with monitor(sysfs_path=host.sysfs) as ctx:
        assert ctx.running
    assert not ctx.running


def test_callback_errors_reach_join(tmp_path: Path) -> None:
    host = testing.materialize(HostBuilder().rxe(), tmp_path / "h")

    def boom(event: DeviceEvent) -> None:
        raise KeyError(event.name)

    mon = monitor(boom, sysfs_path=host.sysfs, existing=True, timeout=10)
    with pytest.raises(KeyError, match="rxe0"):
        mon.join(10)
    assert not mon.running


def test_renamed_entry_counts_as_remove_and_add(tmp_path: Path) -> None:
    host = testing.materialize(HostBuilder().rxe(), tmp_path / "h")
    mon = monitor(sysfs_path=host.sysfs, poll_interval=0.02, actions=("remove",))
    _remove(host, "rxe0", "uverbs0")
    got = [mon.poll(timeout=WAIT), mon.poll(timeout=WAIT)]
    assert _brief(got) == [("remove", "infiniband_verbs", "uverbs0", "rxe0"),  # type: ignore
                           ("remove", "infiniband", "rxe0", "rxe0")]
    mon.stop()


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        monitor(backend="inotify")
    with pytest.raises(ValueError):
        monitor(netlink="both")
    with pytest.raises(ValueError):
        monitor(poll_interval=0)
    with pytest.raises(ValueError):
        monitor(timeout=-1)
    if udev_source.unavailable_reason() is None:
        with pytest.raises(udev_source.UdevUnavailable, match="not"):
            monitor(backend="udev", sysfs_path=tmp_path)


def test_udev_backend_on_this_host_opens() -> None:
    """On the live /sys the udev backend starts (no event is expected here)."""
    require(udev_source.unavailable_reason(), "pyudev")
    mon = monitor(timeout=0.2, sysfs_path="/sys")
    assert mon.backend in ("kernel", "udev")
    assert list(mon) == []
    assert repr(mon).startswith("<sysverbs.DeviceMonitor backend=")


def test_module_exports() -> None:
    # (sysverbs.devices.monitor may be the function once exported: reach the module by name)
    mon_mod = importlib.import_module("sysverbs.devices.monitor")
    assert mon_mod.SUBSYSTEMS == ("infiniband", "infiniband_verbs")
    assert set(mon_mod.__all__) >= {"monitor", "DeviceMonitor", "DeviceEvent"}
