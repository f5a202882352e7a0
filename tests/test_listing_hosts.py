"""The listing tests' fixtures (tests/listing_hosts.py) list what the whole fixtures list.

The per-fixture comparisons with libibverbs, librdmacm and udev run on the GPU
fixtures without their CPUs and NUMA nodes.  That is sound only if nothing that
lists devices reads those records: here the real libibverbs, and sysverbs'
listing, topology and diagnosis, give the same answers on both forms.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import sysverbs
from sysverbs import testing
from sysverbs.devices.location import device_location
from sysverbs.testing import FakeHost, umockdev
from sysverbs.testing.cache import cached_fixture
from tests import listing_hosts
from tests.oracle import harness

GPU_FIXTURES = [n for n in testing.fixture_names() if n.startswith("gpu-")]


def test_only_the_cpus_and_numa_nodes_are_left_out() -> None:
    assert GPU_FIXTURES
    for name in testing.fixture_names():
        whole = umockdev.load(testing.fixture_path(name))
        part = listing_hosts.listing_recording(name)
        gone = [r for r in whole if r not in part.records]
        assert {r.subsystem for r in gone} <= {"cpu", "node"}, name
        assert all(r.path.startswith("/devices/system/") for r in gone)
        assert bool(gone) == name.startswith("gpu-"), name
        assert listing_hosts.listing_file(name).read_text() == umockdev.dumps(part)


def _answers(host: FakeHost) -> list[object]:
    opts = {"sysfs_path": str(host.sysfs), "dev_dir": str(host.dev), "source": "sysfs"}
    out: list[object] = []
    devices = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    try:
        for dev in devices:
            out.append((dev.name, dev.guid, dev.index, dev.ibdev_path, dev.dev_path))
            out.append(repr(device_location(dev.name, sysfs_path=host.sysfs,
                                            dev_dir=host.dev)))
    finally:
        sysverbs.free_device_list(devices)
    report = sysverbs.diagnose(**opts)  # type: ignore[arg-type]
    out.append(repr(report).replace(str(host.root), "ROOT"))
    return out


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_sysverbs_lists_the_same(name: str, tmp_path: Path) -> None:
    whole = cached_fixture(name)  # the fixture's tree, as --fixture reads it
    part = listing_hosts.materialize(name, tmp_path / "x")
    assert (whole.sysfs / "devices/system/cpu").is_dir()
    assert not (part.sysfs / "devices/system").exists()
    a, b = _answers(whole), _answers(part)
    assert [str(x).replace(str(whole.root), "T") for x in a] == \
        [str(x).replace(str(part.root), "T") for x in b]
    assert len(a) > 2


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["gpu-dgx-a100", "gpu-mi300x"])
def test_libibverbs_lists_the_same(otmp: Path, name: str) -> None:
    builds = iter([
        lambda root: testing.materialize(testing.fixture_path(name), root),
        lambda root: listing_hosts.materialize(name, root),
    ])
    whole, part, dst = harness.materialize_pair(otmp, lambda root: next(builds)(root))
    steps = [{"op": "list"}]
    env = {"IBV_SHOW_WARNINGS": "1"}
    a = harness.run_impl("libibverbs", whole, dst, steps, env=env)
    b = harness.run_impl("libibverbs", part, dst, steps, env=env)
    assert a.returncode == 0 and a.results()[0]["devices"], a
    harness.assert_same(a, b)
