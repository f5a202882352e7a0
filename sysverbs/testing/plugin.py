"""pytest fixtures for fake RDMA hosts (the ``sysverbs`` pytest plugin).

Installed with sysverbs (entry point ``pytest11``), or enabled with
``-p sysverbs.testing.plugin``.  Fixtures:

``rdma_builder``
    a fresh :class:`sysverbs.testing.HostBuilder`.
``rdma_host``
    a factory: ``rdma_host(source=None)`` writes a host into the test's temporary
    directory and returns a :class:`sysverbs.testing.FakeHost`; ``source`` is a
    ``HostBuilder``, a ``Recording``, a bundled fixture's name or a recording file
    (None: a host without RDMA devices).
``rdma_fixture``
    a factory: ``rdma_fixture("dgx-demo")``, the bundled fixture host by name.
``rdma_umockdev``
    a factory: ``rdma_umockdev(source, argv, **subprocess_run_kwargs)`` runs
    ``argv`` under ``umockdev-run`` with the host as ``/sys`` and ``/dev`` and
    returns the ``subprocess.CompletedProcess`` (output captured as text); the
    test is skipped where ``umockdev-run`` is not installed.

Example::

    def test_lists_my_host(rdma_host, rdma_builder):
        host = rdma_host(rdma_builder.mlx5(vfs=2).rxe())
        assert len(host.get_device_list()) == 4
"""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from . import umockdev as recording
from .builder import HostBuilder
from .host import FakeHost, Source, fixture_path, materialize

__all__ = ["rdma_builder", "rdma_host", "rdma_fixture", "rdma_umockdev"]

HostFactory = Callable[..., FakeHost]


@pytest.fixture
def rdma_builder() -> HostBuilder:
    """A new, empty :class:`~sysverbs.testing.HostBuilder`."""
    return HostBuilder()


@pytest.fixture
def rdma_host(tmp_path: Path) -> HostFactory:
    """``rdma_host(source=None) -> FakeHost``, written below the test's tmp_path."""
    counter = itertools.count()

    def make(source: Optional[Source] = None) -> FakeHost:
        root = tmp_path / f"rdma-host-{next(counter)}"
        return materialize(HostBuilder() if source is None else source, root)

    return make


@pytest.fixture
def rdma_fixture(rdma_host: HostFactory) -> Callable[[str], FakeHost]:
    """``rdma_fixture(name) -> FakeHost``: a bundled fixture host, written to disk."""

    def load(name: str) -> FakeHost:
        return rdma_host(recording.load(fixture_path(name)))

    return load


@pytest.fixture
def rdma_umockdev(rdma_host: HostFactory) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``rdma_umockdev(source, argv, **kw)``: run argv under umockdev-run on that host."""
    if not recording.have_umockdev_run():
        pytest.skip("umockdev-run is not installed (Debian/Ubuntu: apt-get install umockdev)")

    def run(source: Source, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        host = rdma_host(source)
        env = dict(kw.pop("env", None) or os.environ)
        env.pop("SYSFS_PATH", None)  # umockdev redirects /sys itself
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 120)
        result: subprocess.CompletedProcess[str] = subprocess.run(
            host.umockdev_command(argv), env=env, check=False, **kw)
        return result

    return run
