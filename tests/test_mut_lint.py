"""rank/lint.py's edges (issue 41: the mutants of ``make mutation``): exact messages and
the release boundaries of the NCCL_IB_HCA linter, on tests/test_nccl.py's host and the
dgx-demo fixture (tests/test_nccl_fixes.py).  Pure functions: no subprocess.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sysverbs import testing
from sysverbs.rank.ib import IbPort, host_ports, select_ib
from sysverbs.rank.lint import dma_base, gid_warnings, lint_hca
from tests.test_nccl import HOST, PCI
from tests.test_nccl_fixes import fixture_ports


def test_a_data_direct_name() -> None:
    """``mlx5_0_dma`` is NCCL's name of mlx5_0's Data Direct interface: write mlx5_0."""
    assert dma_base("mlx5_0_dma", ["mlx5_0"]) == "mlx5_0"
    assert dma_base("mlx5_0_dma", ["mlx5_"]) is None and dma_base("mlx5_0", ["mlx5"]) is None
    r = lint_hca("mlx5_0_dma", HOST, {})
    assert [(w.code, w.fix) for w in r.warnings] == [("dma-name", "=mlx5_0"),
                                                     ("selects-none", "")]
    assert r.meant == (("mlx5_0", 1),)


def test_messages_name_devices_in_natural_order() -> None:
    r = lint_hca("=mlx5_9", HOST, {})
    assert r.warnings[0].message == (
        "'mlx5_9' matches no device on this host (mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_10, "
        "mlx5_11) (no fix: it means no device of this host that NCCL can use)")
    assert lint_hca("^mlx5_1", HOST, {}).meant == (
        ("mlx5_0", 1), ("mlx5_2", 1), ("mlx5_10", 1), ("mlx5_11", 1))


def test_an_inactive_port_and_the_frozen_result() -> None:
    r = lint_hca("=mlx5_3:1", HOST, {})
    assert r.warnings[0].message == ("mlx5_3 port 1 is not ACTIVE: NCCL skips it (no fix: it "
                                     "means no device of this host that NCCL can use)")
    with pytest.raises(AttributeError):  # frozen (a FrozenRecord)
        r.fix = "x"  # type: ignore[misc]


def test_release_boundaries() -> None:
    """2.30.7 reads an empty port as any port (no bad-port); from 2.26.2 NCCL keeps
    merging after a failed merge (every incompatible pair is named)."""
    assert lint_hca("=mlx5_0:", HOST, {}, nccl_version="2.30.7").warnings == ()
    ports = fixture_ports("dgx-demo")
    value = "=" + ",".join(f"{p.device}:{p.port}" for p in ports
                           if p.active and p.link_layer in ("InfiniBand", "Ethernet"))
    for version, merges in (("2.26.2", 2), ("2.25.1", 1)):
        found = [w for w in lint_hca(value, ports, nccl_version=version).warnings
                 if w.code == "merge-incompatible"]
        assert len(found) == merges
        assert ("restarts its merge search" in found[0].message) is (merges == 2)
    mixed = lint_hca(value, ports, nccl_version="2.26.2").warnings[0]
    assert mixed.code == "mixed-link-layer" and "ncclInternalError" in mixed.message


def _host(*specs: tuple[str, int, str]) -> list[IbPort]:
    return [IbPort(d, p, True, ll, f"{PCI}0000:{16 + i:02x}:00.0")
            for i, (d, p, ll) in enumerate(specs)]


TWO = _host(("mlx5_0", 1, "InfiniBand"), ("mlx5_0", 2, "InfiniBand"),
            ("mlx5_1", 1, "InfiniBand"), ("mlx5_10", 1, "InfiniBand"),
            ("mlx5_2", 1, "Ethernet"))


@pytest.mark.parametrize(("value", "meant", "fix", "codes"), [
    ("mlx5_0:1 mlx5_1", [("mlx5_0", 1), ("mlx5_1", 1)], "=mlx5_0:1,mlx5_1",
     ["whitespace", "bad-port"]),
    ("mlx5_0:1,,mlx5_1", [("mlx5_0", 1), ("mlx5_1", 1)], "=mlx5_0:1,mlx5_1", ["collision"]),
    ("^mlx5_1", [("mlx5_0", 1), ("mlx5_0", 2), ("mlx5_10", 1), ("mlx5_2", 1)], "^=mlx5_1",
     ["collision", "mixed-link-layer"]),
    ("=mlx5_0::1", [("mlx5_0", 1), ("mlx5_0", 2)], "", []),
    ("mlx5_0:1:2:3", [("mlx5_0", 1)], "", []),
    ("mlx5_0:1::", [("mlx5_0", 1)], "", []),
    (" ^mlx5_0:1", [("mlx5_0", 2), ("mlx5_1", 1), ("mlx5_10", 1), ("mlx5_2", 1)],
     "^mlx5_0:1", ["whitespace", "misplaced-modifier", "no-match", "selects-none"]),
])
def test_what_was_meant_and_its_fix(value: str, meant: list[tuple[str, int]], fix: str,
                                    codes: list[str]) -> None:
    """Entries as their writer meant them (whitespace separates, an empty port or rail
    field is any, a ``^`` before an entry is that entry's) and the one fix; each fix
    selects what was meant (NCCL's selection, rank/ib.py)."""
    r = lint_hca(value, TWO, {}, nccl_version="2.30.7")
    assert (list(r.meant or ()), r.fix, [w.code for w in r.warnings]) == (meant, fix, codes)
    if fix:
        sel = select_ib(TWO, {"NCCL_IB_HCA": fix}, nccl_version="2.30.7")
        assert {(d.device, d.port) for d in sel.devices} == set(meant)


def test_long_lists_and_the_first_mixed_pair() -> None:
    """A message names eight devices and the count; the mixed-link-layer message names
    the first port of the selection (its slot) and the other layer."""
    ten = _host(*[(f"mlx5_{i}", 1, "InfiniBand") for i in range(10)])
    assert lint_hca("=x9", ten, {}).warnings[0].message.startswith(
        "'x9' matches no device on this host (mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, "
        "mlx5_5, mlx5_6, mlx5_7, ... (10 in all))")
    mixed = _host(("mlx5_0", 1, "InfiniBand"), ("mlx5_1", 1, "Ethernet"),
                  ("mlx5_2", 1, "InfiniBand"))
    assert ("'NET/IB : Remote RoCE device is incompatible with the local "
            "[0]mlx5_0:1/IB'") in lint_hca("", mixed, {}).warnings[0].message


def test_gid_warnings_of_a_roce_host(tmp_path: Path) -> None:
    """gpu-dgx-a100's RoCE ports whose first GID is link-local, each named
    ``device:port``; none when NCCL's IB transport is disabled."""
    host = testing.materialize("gpu-dgx-a100", tmp_path / "h")
    ports = host_ports(gid_tables=True, **host.options())
    sel = select_ib(ports, {})
    found = gid_warnings(sel, ports, {})
    assert [(w.code, w.entry) for w in found] == [
        ("gid-link-local", f"mlx5_{i}:1") for i in (0, 1, 3, 4, 5, 7, 8, 9)]
    off = select_ib(ports, {"NCCL_IB_DISABLE": "1"})
    assert off.disabled and gid_warnings(off, ports, {"NCCL_IB_DISABLE": "1"}) == []


def test_natural_order_whatever_the_hosts_order() -> None:
    """Names sorted as numbers where they have digits (mlx5_2 before mlx5_10), a text
    part (x) before a number part (0a), whatever order the host lists them in."""
    host = _host(("mlx5_10", 1, "InfiniBand"), ("mlx5_2", 1, "InfiniBand"),
                 ("mlx5_1", 1, "InfiniBand"), ("0a", 1, "InfiniBand"), ("x", 1, "InfiniBand"))
    assert lint_hca("=zz", host, {}).warnings[0].message.startswith(
        "'zz' matches no device on this host (mlx5_1, mlx5_2, mlx5_10, x, 0a)")
    assert dma_base("mlx5_0x", ["mlx"]) is None


def test_the_first_mixed_pair_when_roce_comes_first() -> None:
    mixed = _host(("mlx5_0", 1, "Ethernet"), ("mlx5_1", 1, "InfiniBand"),
                  ("mlx5_2", 1, "InfiniBand"), ("mlx5_3", 1, "Ethernet"))
    assert ("'NET/IB : Remote IB device is incompatible with the local "
            "[0]mlx5_0:1/RoCE'") in lint_hca("", mixed, {}).warnings[0].message


@pytest.mark.parametrize(("value", "version", "fix", "codes"), [
    # rail and plane kept (a fifth field dropped); before 2.30.7 there are none
    ("mlx5_0:1:2:3:4 mlx5_1", "2.30.7", "=mlx5_0:1:2:3,mlx5_1", ["whitespace"]),
    ("mlx5_0:1:2 mlx5_1", "2.30.7", "=mlx5_0:1:2,mlx5_1", ["whitespace"]),
    ("mlx5_0:1:2 mlx5_1", "2.21.5", "=mlx5_0:1,mlx5_1", ["whitespace"]),
    ("mlx5_0,=mlx5_1", "2.30.7", "=mlx5_0,mlx5_1", ["misplaced-modifier", "no-match"]),
    ("=" + "x" * 63, "2.30.7", "", ["no-match", "selects-none"]),  # 63 bytes: not cut
    ("^mlx5_0:1 mlx5_1", "2.30.7", "^=mlx5_0:1,mlx5_1",
     ["whitespace", "bad-port", "mixed-link-layer"]),
])
def test_fixes_by_release(value: str, version: str, fix: str, codes: list[str]) -> None:
    r = lint_hca(value, TWO, {}, nccl_version=version)
    assert (r.fix, [w.code for w in r.warnings]) == (fix, codes)


def test_fix_of_a_device_less_one_port_and_under_ib_disable() -> None:
    """"mlx5_0, ^mlx5_0:2" means port 1 of mlx5_0 (the ^ is that entry's): the fix
    names it exactly.  NCCL_IB_DISABLE=1 in the environment: the fix is still found,
    judged as if IB were enabled (the fix is for the value, not for that variable)."""
    ports = [IbPort("mlx5_0", p, True, "InfiniBand", "") for p in (1, 2)] + [
        IbPort("mlx5_1", 1, True, "InfiniBand", "")]
    r = lint_hca("mlx5_0, ^mlx5_0:2", ports)
    assert (r.fix, r.meant) == ("=mlx5_0:1", (("mlx5_0", 1),))
    assert [w.code for w in r.warnings] == ["whitespace", "misplaced-modifier", "no-match"]
    r = lint_hca("mlx5_0 ", ports, {"NCCL_IB_DISABLE": "1"})
    assert (r.fix, r.meant) == ("mlx5_0", (("mlx5_0", 1), ("mlx5_0", 2)))
