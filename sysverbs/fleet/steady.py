"""The long-running exporter's scrape: the last snapshot again while nothing it was made of
changed, else a new one (docs/fleet.md, "What a scrape costs").

A snapshot (:func:`~sysverbs.fleet.facts.collect_facts`) is a function of what it read:
every file (its bytes or errno), every directory listed, every link resolved, and the
other inputs of its read-once scope (``stat``, ``readlink``, the probes, the rtnetlink
dump, the user database: :mod:`sysverbs.ground.inputs`), and of this process: its
environment, ids, groups, RLIMIT_MEMLOCK, capabilities and cgroup (:func:`process_inputs`).
:class:`Steady` keeps, with the last snapshot, the records of the scope it read through;
at the next scrape it asks each of those inputs again
(:class:`~sysverbs.ground.inputs.Recheck`) and,
when every one answers as before, gives the same snapshot with this scrape's durations:
what a new collection would have found, without the verdicts. Any difference, a scope
that depended on something it could not record (RDMA netlink, the installed providers,
opening the devices: ``opaque``), or a part that failed, and the scrape is a new
collection.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Optional

from ..ground.inputs import Recheck

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..model import HostModel
    from .facts import HostFacts

__all__ = ["Steady", "process_inputs"]


def _proc(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:
        return b"errno %d" % (e.errno or 0)


def process_inputs(environ: Optional[Mapping[str, str]] = None) -> tuple[object, ...]:
    """What a snapshot takes from this process rather than from the host: the environment
    (``environ``, and ``os.environ`` that libibverbs' rules read), the real and
    effective ids and groups, RLIMIT_MEMLOCK, the capability sets of
    ``/proc/self/status`` and ``/proc/self/cgroup``."""
    import resource

    try:
        memlock: object = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except (OSError, ValueError) as e:
        memlock = str(e)
    caps = [line for line in _proc("/proc/self/status").splitlines() if line.startswith(b"Cap")]
    return (dict(environ) if environ is not None else None, dict(os.environ),
            os.getuid(), os.geteuid(), os.getgid(), os.getegid(), tuple(os.getgroups()),
            memlock, tuple(caps), _proc("/proc/self/cgroup"))


class Steady:
    """``steady()``: a snapshot of the host.  ``collect(model)`` makes one, reading through
    ``model`` (a new :class:`~sysverbs.model.HostModel` from ``new_model()`` each time);
    ``environ`` is the environment it is given (None: ``os.environ``).  ``reused`` and
    ``collected`` count the scrapes of each kind; ``why`` says why the last one collected
    (``"first"``, the input that changed...)."""

    def __init__(self, collect: Callable[[HostModel], HostFacts],
                 new_model: Callable[[], HostModel],
                 environ: Optional[Mapping[str, str]] = None) -> None:
        self._collect = collect
        self._new_model = new_model
        self._environ = environ
        self._last: Optional[tuple[HostFacts, tuple[object, ...], Recheck]] = None
        self.reused = 0
        self.collected = 0
        self.why = ""

    def _unchanged(self, start: float) -> Optional[HostFacts]:
        """The last snapshot with this scrape's duration, when no input changed."""
        from ..ground.sysfs_read import check_sysfs_root

        if self._last is None:
            self.why = "first"
            return None
        facts, process, recheck = self._last
        failed = [c.name for c in facts.collectors if not c.success]
        if failed:
            self.why = f"the {failed[0]} part failed"
            return None
        if process_inputs(self._environ) != process:
            self.why = "this process (environment, ids, limits, capabilities)"
            return None
        try:  # the first rule of every part: a sysfs tree (collect_facts' _on_root)
            check_sysfs_root(facts.sysfs_path)
        except OSError:
            self.why = "no sysfs tree"
            return None
        why = recheck.changed()
        if why is not None:
            self.why = why
            return None
        took = time.perf_counter() - start
        return replace(facts, collectors=tuple(
            replace(c, duration_seconds=took if i == 0 else 0.0)
            for i, c in enumerate(facts.collectors)))

    @property
    def recheck(self) -> Optional[Recheck]:
        """The records of the last collection's read-once scope, arranged to be asked
        again: what a scrape asks."""
        return self._last[2] if self._last is not None else None

    def __call__(self) -> HostFacts:
        start = time.perf_counter()
        again = self._unchanged(start)
        if again is not None:
            self.reused += 1
            return again
        process = process_inputs(self._environ)  # before: a change during it is seen next
        model = self._new_model()
        with model.reading():
            facts = self._collect(model)
        model.reads.records_only()  # the derived values go before the records are arranged
        self._last = (facts, process, Recheck(model.reads))  # kept: not the model, nor its scope
        self.collected += 1
        return facts
