"""The bundled fixture hosts as the device-listing tests use them.

The GPU fixtures (``gpu-*``) carry their hosts' CPUs and NUMA nodes
(``/sys/devices/system/cpu`` and ``.../node``: 256 CPUs for a DGX A100, two
thirds of its files) because placement and hwloc read them.  Nothing that lists
devices does: not libibverbs, librdmacm or udev, and not sysverbs outside
``sysverbs.placement`` (``tests/test_listing_hosts.py`` checks that, by listing
both forms).  The tests that compare a listing with the real libraries, once per
fixture, therefore run on the fixture without those records: the same RDMA
devices, PCI functions, links and /proc files, at a third of the cost (umockdev
loads such a host in about 4 s instead of 14).  The placement, hwloc and
umockdev-equivalence tests use the whole fixture; the attribute and topology tests
(:class:`LazyHosts`) use the listing form, as neither module reads those records.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Union

import sysverbs.testing.host
from sysverbs import testing
from sysverbs.testing import umockdev
from tests.conftest import fast_tmpdir

#: The records left out: the CPUs and NUMA nodes.
SYSTEM = "/devices/system/"


@functools.cache
def listing_recording(name: str) -> umockdev.Recording:
    """Bundled fixture ``name`` without its ``/sys/devices/system`` records."""
    whole = umockdev.load(testing.fixture_path(name))
    return umockdev.Recording(tuple(r for r in whole if not r.path.startswith(SYSTEM)))


@functools.cache
def _dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="sv-listing-"))
    os.chmod(path, 0o755)
    atexit.register(shutil.rmtree, path, True)
    return path


@functools.cache
def listing_file(name: str) -> Path:
    """:func:`listing_recording` as a umockdev file (for ``umockdev-run -d``)."""
    path = _dir() / f"{name}{sysverbs.testing.host.FIXTURE_SUFFIX}"
    path.write_text(umockdev.dumps(listing_recording(name)))
    os.chmod(path, 0o644)
    return path


class LazyHosts(dict[str, testing.FakeHost]):
    """Bundled fixture name -> its host in the listing form (:func:`materialize`),
    materialized below ``base`` on first use (a module that reads a few fixtures
    does not pay for all of them)."""

    def __init__(self, base: Path) -> None:
        super().__init__()
        self.base = base

    def __missing__(self, name: str) -> testing.FakeHost:
        host = materialize(name, self.base / name)
        self[name] = host
        return host

    @classmethod
    @contextlib.contextmanager
    def temporary(cls) -> Iterator[LazyHosts]:
        """Hosts in a fresh directory of :func:`tests.conftest.fast_tmp`, removed after."""
        with fast_tmpdir("sv-hosts-") as base:
            yield cls(base)

    def all(self) -> dict[str, testing.FakeHost]:
        """Every bundled fixture (materializes those not yet used)."""
        return {name: self[name] for name in testing.fixture_names()}


def materialize(name: str, root: Union[str, os.PathLike[str]]) -> testing.FakeHost:
    """:func:`sysverbs.testing.materialize` of :func:`listing_recording`."""
    return testing.materialize(listing_recording(name), root)
