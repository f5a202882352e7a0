"""``sysverbs snapshot`` records the whole placement picture: what a user attaches to
a bug report reproduces the placement problem.

* Every bundled GPU fixture, materialized, snapshotted with the command's defaults and
  the snapshot materialized again: ``topo``, ``topo --assign``, ``env`` and ``run
  --dry-run`` (every CPU mode) print the same bytes, exit statuses and warnings on
  both trees (each tree's own path written ROOT).
* This host's kernel: hwloc (``lstopo-no-graphics``) sees the same packages, cores,
  caches, NUMA nodes, PUs and PCI tree on the live ``/sys`` and on its materialized
  snapshot (but a PCI function's revision, which hwloc reads from the config space a
  snapshot never reads), and sysverbs reads the same CPU topology and PCI functions.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from sysverbs import cli
from sysverbs.placement import host_json, read_cpus, read_host
from sysverbs.testing import fixture_names, materialize
from tests.conftest import fast_tmpdir, require
from tests.oracle import hwloc

GPU_FIXTURES = [n for n in fixture_names() if n.startswith("gpu-")]


def in_process(words: Sequence[str]) -> tuple[int, str, str]:
    """:func:`sysverbs.cli.main` with its streams captured (a subprocess per command
    would cost seconds per fixture)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        rc = cli.main(list(words))
    finally:
        sys.stdout, sys.stderr = saved
    return rc, out.getvalue(), err.getvalue()


def on(root: Path, words: Sequence[str]) -> tuple[int, str, str]:
    """A command on the tree ``root`` (the directory holding sys/ and dev/), its
    output with that path written ROOT."""
    rc, out, err = in_process([*words, "--sysfs-path", str(root / "sys"),
                               "--dev-dir", str(root / "dev" / "infiniband")])
    return rc, out.replace(str(root), "ROOT"), err.replace(str(root), "ROOT")


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    with fast_tmpdir("sv-snap-") as path:
        yield path


def snapshot_of(tree: Path, out: Path) -> Path:
    rc, _, err = on(tree, ["snapshot", "-o", str(out)])
    assert rc == 0, err
    return materialize(out, out.with_name(out.stem + "-again"))


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_a_gpu_fixture_round_trips(name: str, base: Path) -> None:
    fixture = materialize(name, base / name).root
    again = snapshot_of(fixture, base / f"{name}.umockdev").root
    last = str(sum(1 for _ in read_host(str(fixture / "sys")).gpus) - 1)
    commands = [["topo"], ["topo", "--assign"], ["topo", "--assign", "--json"],
                ["env", "--local-rank", "0"], ["env", "--local-rank", last]]
    commands += [["run", "--dry-run", "--local-rank", last, "--cpu", mode]
                 for mode in ("node", "socket", "exclusive", "core-complex")]
    commands.append(["run", "--dry-run", "--json", "--local-rank", "0"])
    for words in commands:
        want = on(fixture, words)
        assert want[0] in (0, 1) and want[1], (words, want)
        assert on(again, words) == want, words


def test_the_rdma_only_snapshot_is_not_enough(base: Path) -> None:
    """What ``snapshot`` recorded before (``--rdma-only`` now): no GPU, so the same
    question has another answer: what the round trip above would catch."""
    fixture = materialize("gpu-hgx-h100", base / "rdma-only").root
    out = base / "rdma-only.umockdev"
    rc, _, err = on(fixture, ["snapshot", "--rdma-only", "-o", str(out)])
    assert rc == 0, err
    again = materialize(out, base / "rdma-only-again").root
    assert on(again, ["topo", "--assign"]) != on(fixture, ["topo", "--assign"])
    assert on(again, ["topo", "--assign"])[0] == 1


def lstopo(args: Sequence[str]) -> list[tuple[str, ...]]:
    """Every object of hwloc's topology as (depth, type, os index, cpuset, nodeset,
    cache size, PCI bus id, PCI class and ids without the revision)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
    proc = subprocess.run(["lstopo-no-graphics", *args, "--of", "xml", "-"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found: list[tuple[str, ...]] = []

    def walk(obj: ET.Element, depth: int) -> None:
        a = obj.attrib
        found.append((str(depth), *(a.get(k, "") for k in (
            "type", "os_index", "cpuset", "nodeset", "cache_size", "pci_busid")),
            a.get("pci_type", "").rsplit(" ", 1)[0]))
        for child in obj.findall("object"):
            walk(child, depth + 1)

    for top in ET.fromstring(proc.stdout).findall("object"):
        walk(top, 0)
    return found


def test_this_hosts_snapshot_is_this_host(base: Path) -> None:
    require(hwloc.unavailable_reason(), "hwloc (lstopo-no-graphics)")
    out = base / "live.umockdev"
    rc, _, err = in_process(["snapshot", "-o", str(out)])
    assert rc in (0, 1), err  # 1: no RDMA device here, the snapshot is written all the same
    root = materialize(out, base / "live").root
    live = lstopo([])
    assert [o for o in live if o[1] in ("Package", "Core", "PU", "NUMANode", "L3Cache")]
    assert lstopo(["-i", str(root), "--if", "fsroot"]) == live
    here, there = read_cpus(b"/sys"), read_cpus(os.fsencode(root / "sys"))
    assert here == there and here.online and here.nodes
    assert here.llc_level > 0 or not os.path.isdir("/sys/devices/system/cpu/cpu0/cache")
    want, got = host_json(read_host("/sys")), host_json(read_host(str(root / "sys")))
    assert want["pci"] and got.pop("sysfs_path") == str(root / "sys")
    assert {**want, "sysfs_path": None} == {**got, "sysfs_path": None}
