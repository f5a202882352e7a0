"""Hotplug: events for RDMA devices that appear and disappear.

:func:`monitor` watches the ``infiniband`` (IB devices: ``mlx5_0``, ``rxe0``) and
``infiniband_verbs`` (their ``uverbsN`` char devices) subsystems and reports each
change as a :class:`DeviceEvent`.  Two forms::

    for event in sysverbs.devices.monitor(timeout=30):       # an iterator; ends after 30 s
        print(event.action, event.subsystem, event.name, event.ibdev)

    mon = sysverbs.devices.monitor(print, timeout=30)        # a callback, on a thread
    ...
    mon.stop(); mon.join()

The monitor listens from the moment :func:`monitor` returns, so nothing that
happens after that call is missed.  Backends (``DeviceMonitor.backend``):

``"kernel"``
    pyudev's libudev monitor on the kernel's uevent netlink group: the kernel's own
    events, which need no udev daemon (containers, initramfs, the kernel lab VM).
``"udev"``
    the same monitor on udevd's group: events after udevd has set up the device
    (``/dev`` node permissions, properties).  Chosen when udevd runs, and under
    umockdev, whose uevent emulation speaks udevd's protocol.
``"poll"``
    no pyudev, no libudev, or a ``sysfs_path`` that is not the live ``/sys``: the
    class directories are listed every ``poll_interval`` seconds and the
    differences reported (``add``/``remove`` only; a device that comes and goes
    between two looks is missed).  ``DeviceMonitor.reason`` says why.

A poller races the kernel: a device's directory and class link appear before its
attribute files (``device_add`` creates them in that order and sends the uevent
last).  A uverbs entry whose ``ibdev`` cannot be read yet (or is empty) is not reported
(nor counted as present) until a later look finds it complete; one that stays
incomplete for :data:`SETTLE_SECONDS` is reported with ``ibdev`` None.  The udev
backends get the uevent after the attributes; they meet half-created entries only
in the listing taken when the monitor starts (``existing=True``), which follows the
same rule (the device's own uevent then reports it).  They read ``ibdev`` when they
receive the uevent: an ``add`` received after its device has gone again has ``ibdev``
None.

Event values that come from sysfs (a uverbs device's ``ibdev``) are read by
:func:`sysverbs.ground.sysfs_read.read_sysfs_file`.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional

from ..engine.api import env_sysfs_root, path_arg
from ..ground.errors import UsageError, WrongTypeError
from ..ground.sysfs_read import IBDEV_SIZE, cstr, read_sysfs_file
from ..sources import udev as udev_source

if TYPE_CHECKING:
    from ..engine.api import PathArg

__all__ = ["monitor", "DeviceMonitor", "DeviceEvent", "SUBSYSTEMS", "BACKENDS"]

#: The subsystems watched, in the order their devices appear (IB device, then uverbs).
SUBSYSTEMS = ("infiniband", "infiniband_verbs")
BACKENDS = ("auto", "udev", "poll")
NETLINK_SOURCES = ("auto", "kernel", "udev")
_EMPTY: Mapping[str, str] = MappingProxyType({})
#: Seconds a uverbs entry may lack its ``ibdev`` before it is reported all the same.
SETTLE_SECONDS = 5.0


class DeviceEvent(NamedTuple):
    """One change of one RDMA device.

    ``name`` is the kernel name in its subsystem (``mlx5_0`` or ``uverbs0``);
    ``ibdev`` the IB device name in both cases (for a uverbs device: its ``ibdev``
    file when it was added, or as remembered when it is removed; None if unknown).
    ``properties`` and ``seqnum`` are the uevent's (empty and 0 when polling).
    """

    action: str
    subsystem: str
    name: str
    ibdev: Optional[str]
    sys_path: str
    backend: str
    seqnum: int = 0
    properties: Mapping[str, str] = _EMPTY


Callback = Callable[[DeviceEvent], object]


def _ibdev_of(sys_path: str) -> Optional[str]:
    value = read_sysfs_file(os.fsencode(sys_path) + b"/ibdev", IBDEV_SIZE)
    return None if value is None else os.fsdecode(cstr(value))


def _list_class(root: bytes, subsystem: str) -> dict[str, tuple[str, int]]:
    """The device entries of ``<root>/class/<subsystem>``: name -> (resolved path, inode)."""
    cls = root + b"/class/" + subsystem.encode()
    out: dict[str, tuple[str, int]] = {}
    try:
        names = os.listdir(cls)
    except (OSError, ValueError):
        return out
    for raw in names:
        if raw.startswith(b"."):
            continue
        entry = cls + b"/" + raw
        try:
            st = os.stat(entry)
            real = os.path.realpath(entry)
        except (OSError, ValueError):
            continue  # gone, dangling or a loop
        if not os.path.isdir(entry):
            continue  # abi_version and other plain files
        out[os.fsdecode(raw)] = (os.fsdecode(real), st.st_ino)
    return out


class DeviceMonitor:
    """A running monitor (see :func:`monitor`); iterate it, or give a callback."""

    def __init__(
        self,
        callback: Optional[Callback],
        *,
        timeout: Optional[float],
        sysfs_path: Optional[PathArg],
        backend: str,
        netlink: str,
        actions: Optional[Iterable[str]],
        existing: bool,
        poll_interval: float,
    ) -> None:
        if backend not in BACKENDS:
            raise UsageError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if netlink not in NETLINK_SOURCES:
            raise UsageError(
                f"netlink must be one of {', '.join(NETLINK_SOURCES)}, not {netlink!r}"
            )
        for what, value in (("poll_interval", poll_interval), ("timeout", timeout)):
            if value is not None and (not isinstance(value, (int, float))
                                      or isinstance(value, bool)):
                raise WrongTypeError(f"{what} must be a number, not {value!r}")
        if not poll_interval > 0:  # NaN too
            raise UsageError("poll_interval must be positive")
        if timeout is not None and not timeout >= 0:
            raise UsageError("timeout must not be negative")
        self._root = (
            env_sysfs_root() if sysfs_path is None
            else path_arg(sysfs_path, "sysfs_path").rstrip(b"/")
        )
        self._actions = None if actions is None else frozenset(actions)
        self._interval = float(poll_interval)
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._pending: deque[DeviceEvent] = deque()
        self._lock = threading.Lock()
        self._stopped = False
        self._udev: Optional[udev_source.UdevMonitor] = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.backend, self.reason = self._choose(backend, netlink)
        # What is there now: for the poll diff, and to name removed uverbs devices.
        self._ibdevs: dict[str, str] = {}
        self._incomplete: dict[tuple[str, int], float] = {}  # (path, inode) -> first seen
        self._snapshot: dict[str, dict[str, tuple[str, int]]] = {sub: {} for sub in SUBSYSTEMS}
        self._snapshot = self._look()
        if existing:
            for sub in SUBSYSTEMS:
                for name, (real, _) in sorted(self._snapshot[sub].items()):
                    self._queue("add", sub, name, real, 0, _EMPTY)
        self._next_tick = time.monotonic() + self._interval
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None
        if callback is not None:
            self._thread = threading.Thread(
                target=self._run, args=(callback,), name="sysverbs-monitor", daemon=True
            )
            self._thread.start()

    # -- set-up -------------------------------------------------------------------
    def _choose(self, backend: str, netlink: str) -> tuple[str, str]:
        if backend == "poll":
            return "poll", "asked for"
        why = udev_source.unavailable_reason()
        if why is None and self._root != os.fsencode(udev_source.sys_root()):
            why = (
                f"udev watches the live {udev_source.sys_root()}, not "
                f"{os.fsdecode(self._root)!r}"
            )
        if why is not None:
            if backend == "udev":
                raise udev_source.UdevUnavailable(why)
            return "poll", f"polling every {self._interval:g} s: {why}"
        if netlink == "auto":
            if udev_source.udevd_running():
                netlink, why = "udev", "udevd is running"
            elif udev_source.in_umockdev():
                netlink, why = "udev", "umockdev emulates udevd's events"
            else:
                netlink, why = "kernel", "no udevd: the kernel's own uevents"
        else:
            why = "asked for"
        try:
            self._udev = udev_source.open_monitor(SUBSYSTEMS, netlink)
        except udev_source.UdevUnavailable as e:  # e.g. no netlink socket in a sandbox
            if backend == "udev":
                raise
            return "poll", f"polling every {self._interval:g} s: {e}"
        return netlink, why

    # -- events -------------------------------------------------------------------
    def _queue(
        self,
        action: str,
        subsystem: str,
        name: str,
        sys_path: str,
        seqnum: int,
        properties: Mapping[str, str],
    ) -> None:
        if subsystem == "infiniband":
            ibdev: Optional[str] = name
            old = properties.get("DEVPATH_OLD")
            if action == "move" and old:  # a renamed IB device: its uverbs device follows
                old_name = old.rsplit("/", 1)[-1]
                for path, value in list(self._ibdevs.items()):
                    if value == old_name:
                        self._ibdevs[path] = name
        elif action == "remove":
            ibdev = self._ibdevs.pop(sys_path, None)
        else:
            ibdev = _ibdev_of(sys_path) or self._ibdevs.get(sys_path)
            if ibdev is not None:
                self._ibdevs[sys_path] = ibdev
        if self._actions is not None and action not in self._actions:
            return
        self._pending.append(
            DeviceEvent(action, subsystem, name, ibdev, sys_path, self.backend, seqnum,
                        properties)
        )

    def _drain_udev(self) -> None:
        assert self._udev is not None
        while True:
            dev = self._udev.receive()
            if dev is None:
                return
            if dev.subsystem not in SUBSYSTEMS or dev.action is None:
                continue
            self._queue(dev.action, dev.subsystem, dev.sys_name, dev.sys_path, dev.seqnum,
                        dev.properties)

    def _look(self) -> dict[str, dict[str, tuple[str, int]]]:
        """The class listings, without the uverbs entries still being created (no
        readable ``ibdev`` yet, for less than SETTLE_SECONDS)."""
        now = {sub: _list_class(self._root, sub) for sub in SUBSYSTEMS}
        verbs, known = now["infiniband_verbs"], self._snapshot["infiniband_verbs"]
        t = time.monotonic()
        seen = set()
        for name, entry in list(verbs.items()):
            if known.get(name) == entry:
                continue  # complete when first reported
            ib = _ibdev_of(entry[0])
            if ib:  # (an empty name is a file not yet written: not the kernel's way)
                self._ibdevs[entry[0]] = ib
                self._incomplete.pop(entry, None)
                continue
            seen.add(entry)
            if t - self._incomplete.setdefault(entry, t) < SETTLE_SECONDS:
                del verbs[name]  # half-created: look again next time
        for entry in set(self._incomplete) - seen:  # completed or gone
            del self._incomplete[entry]
        return now

    def _diff(self) -> None:
        now = self._look()
        for sub in reversed(SUBSYSTEMS):  # uverbs devices go first
            old, new = self._snapshot[sub], now[sub]
            for name in sorted(old):
                if name not in new or new[name] != old[name]:
                    self._queue("remove", sub, name, old[name][0], 0, _EMPTY)
        for sub in SUBSYSTEMS:  # IB devices come first
            old, new = self._snapshot[sub], now[sub]
            for name in sorted(new):
                if name not in old or new[name] != old[name]:
                    self._queue("add", sub, name, new[name][0], 0, _EMPTY)
        if now["infiniband"] != self._snapshot["infiniband"]:  # maybe renamed: re-read
            for real, _ in now["infiniband_verbs"].values():
                ib = _ibdev_of(real)
                if ib is not None:
                    self._ibdevs[real] = ib
        self._snapshot = now

    def _remaining(self) -> Optional[float]:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def poll(self, timeout: Optional[float] = None) -> Optional[DeviceEvent]:
        """The next event, waiting at most ``timeout`` seconds (None: until one comes,
        the monitor's own timeout passes or :meth:`stop` is called); None if none."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                if self._pending:
                    return self._pending.popleft()
                if self._stopped:
                    self._close_source()
                    return None
                now = time.monotonic()
                limits = [t for t in (end, self._deadline) if t is not None]
                if limits and now >= min(limits):
                    return None
                wait = min(limits) - now if limits else None
                fds = [self._wake_r]
                if self._udev is not None:
                    fds.append(self._udev.fileno())
                else:
                    tick = max(0.0, self._next_tick - now)
                    wait = tick if wait is None else min(wait, tick)
                ready, _, _ = select.select(fds, [], [], wait)
                if self._wake_r in ready:
                    self._drain_wake()
                if self._udev is not None:
                    if len(fds) > 1 and fds[1] in ready:
                        self._drain_udev()
                elif time.monotonic() >= self._next_tick:
                    self._diff()
                    self._next_tick = time.monotonic() + self._interval

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 512):
                pass
        except (BlockingIOError, OSError):
            pass

    def __iter__(self) -> Iterator[DeviceEvent]:
        """Events until the monitor's timeout passes or :meth:`stop` is called."""
        if self._thread is not None:
            raise RuntimeError("this monitor delivers its events to its callback")
        return self._events()

    def _events(self) -> Iterator[DeviceEvent]:
        while True:
            event = self.poll()
            if event is None:
                return
            yield event

    def _run(self, callback: Callback) -> None:
        try:
            for event in self._events():
                callback(event)
        except BaseException as e:  # handed to join()
            self._error = e
        finally:
            self.stop()

    # -- life cycle -----------------------------------------------------------------
    @property
    def running(self) -> bool:
        """False once stopped or timed out."""
        return not self._stopped and self._remaining() != 0.0

    def stop(self) -> None:
        """Stop the monitor (from any thread): iteration ends, the callback thread
        exits, a blocking :meth:`poll` returns None."""
        self._stopped = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        if self._lock.acquire(blocking=False):  # nobody is polling: close it here
            try:
                self._close_source()
            finally:
                self._lock.release()

    def _close_source(self) -> None:
        if self._udev is not None:
            self._udev.close()
            self._udev = None

    def join(self, timeout: Optional[float] = None) -> None:
        """Wait for the callback thread to end (after :meth:`stop` or the timeout);
        re-raises what the callback raised."""
        if self._thread is not None:
            self._thread.join(timeout)
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    close = stop

    def __enter__(self) -> DeviceMonitor:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.stop()
        if self._thread is not None:
            self._thread.join()

    def __del__(self) -> None:
        for fd in (getattr(self, "_wake_r", -1), getattr(self, "_wake_w", -1)):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<sysverbs.DeviceMonitor backend={self.backend} {state}>"


def monitor(
    callback: Optional[Callback] = None,
    *,
    timeout: Optional[float] = None,
    sysfs_path: Optional[PathArg] = None,
    backend: str = "auto",
    netlink: str = "auto",
    actions: Optional[Iterable[str]] = ("add", "remove"),
    existing: bool = False,
    poll_interval: float = 0.5,
) -> DeviceMonitor:
    """Watch RDMA devices come and go; returns a running :class:`DeviceMonitor`.

    * ``callback``: called with each :class:`DeviceEvent` on a background thread;
      without it, iterate the monitor (or call ``poll()``).
    * ``timeout``: seconds after which the monitor ends (None: never).
    * ``sysfs_path``: the sysfs root (default ``$SYSFS_PATH`` as libibverbs reads
      it, else ``/sys``); udev watches only the live ``/sys``, other roots are polled.
    * ``backend``: ``"auto"`` (udev when pyudev and libudev work, else polling),
      ``"udev"`` (raises :class:`sysverbs.ground.errors.UdevUnavailable` saying why
      when it cannot) or ``"poll"``.
    * ``netlink``: the udev backend's event source: ``"kernel"`` (raw uevents, no
      udevd needed), ``"udev"`` (udevd's) or ``"auto"`` (udev's when udevd runs or
      under umockdev, else the kernel's).
    * ``actions``: the uevent actions reported (None: all, e.g. ``move`` when an IB
      device is renamed, ``change``, ``bind``); polling only sees add and remove.
    * ``existing``: first report an ``add`` for every device present now.
    * ``poll_interval``: seconds between two looks of the poll backend.
    """
    return DeviceMonitor(
        callback,
        timeout=timeout,
        sysfs_path=sysfs_path,
        backend=backend,
        netlink=netlink,
        actions=actions,
        existing=existing,
        poll_interval=poll_interval,
    )
