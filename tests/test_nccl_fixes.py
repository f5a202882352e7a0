"""``lint_hca``'s fixes and its warnings about what NCCL does with the devices (issue 26,
items 1 and 3).

The property test generates NCCL_IB_HCA values on every bundled fixture from entries
whose meaning is known (a device's name, a prefix, a longer or unknown name, a port,
an exclusion, an exact name) and then spoils how they are written (whitespace, ``^``
and ``=`` in the wrong place, empty ports, ports that are not numbers, rails).  What
the value means is computed here from those pieces, not from the string; each fix is
checked with the NCCL matcher of :func:`sysverbs.rank.nccl.select_ib`, whose syntax and
``matchIfList`` the real-NCCL oracle proves (tests/test_nccl_oracle.py).  The rules
about link layers, merges and plane IDs are checked against NCCL's source (cited in
sysverbs/rank/nccl.py and docs/nccl.md "Proof") and its log lines.
"""

from __future__ import annotations

import importlib
import tempfile
from typing import NamedTuple, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sysverbs import testing
from sysverbs.rank import nccl
from sysverbs.rank.nccl import IbPort, lint_hca, select_ib
from tests.fuzz.profiles import fuzz_settings

_PORTS: dict[str, list[IbPort]] = {}
_TMP = tempfile.TemporaryDirectory(prefix="sv-nccl-fixes-")


def fixture_ports(name: str) -> list[IbPort]:
    """:func:`sysverbs.rank.nccl.host_ports` of a bundled fixture, materialized once."""
    if name not in _PORTS:
        host = testing.materialize(name, f"{_TMP.name}/{name}")
        _PORTS[name] = nccl.host_ports(**host.options())
    return _PORTS[name]


def selected(ports: list[IbPort], value: str, version: Optional[str]) -> set[tuple[str, int]]:
    sel = select_ib(ports, {"NCCL_IB_HCA": value}, nccl_version=version)
    return set() if sel.failure else {(d.device, d.port) for d in sel.devices}


class Entry(NamedTuple):
    mods: str  # "^" / "=" written before the name
    name: str
    port: str  # as written: "", ":1", ": 1", ":a", "::2"...


#: port text -> the port meant (-1 any, None not clear)
PORTS = {"": -1, ":": -1, ":1": 1, ":2": 2, ":0": 0, " : 1": 1, ":1:3": 1, "::2": -1,
         ":a": None, ":1x": None}
SEPARATORS = [",", ",", ",", ", ", " ,", "\n", ",,", " ", "\t,"]
UNKNOWN = ["mlx5_99", "mlx5_8", "foo", "ib", "MLX5_0"]


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, Optional[str], list[Entry], str, str]:
    fixture = draw(st.sampled_from(testing.fixture_names()))
    devs = sorted({p.device for p in fixture_ports(fixture)})
    entries = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["device", "device", "prefix", "longer", "unknown",
                                     "no-name"] if devs else ["unknown", "no-name"]))
        if kind == "device":
            name = draw(st.sampled_from(devs))
        elif kind == "prefix":
            dev = draw(st.sampled_from(devs))
            name = dev[:draw(st.integers(1, len(dev)))]
        elif kind == "longer":
            name = draw(st.sampled_from(devs)) + draw(st.sampled_from(["0", "1", "x"]))
        elif kind == "unknown":
            name = draw(st.sampled_from(UNKNOWN))
        else:
            name = ""
        port = draw(st.sampled_from(sorted(PORTS)))
        if not name and not port:
            port = ":1"
        mods = draw(st.sampled_from(["", "", "", "", "^", "=", "^=", "=^"]))
        entries.append(Entry(mods, name, port))
    head = draw(st.sampled_from(["", "", "", "^", "=", "^=", "=^", " ", " ^", "\n"]))
    seps = [draw(st.sampled_from(SEPARATORS)) for _ in entries]
    for i in range(len(entries) - 1):  # "a :1" and "a: b" are one entry as meant
        if seps[i] == " " and (entries[i].port.endswith(":")
                               or (entries[i + 1].mods + entries[i + 1].name) == ""):
            seps[i] = ","
    value = head + "".join(e.mods + e.name + e.port + (sep if i < len(entries) - 1 else "")
                           for i, (e, sep) in enumerate(zip(entries, seps)))
    if draw(st.integers(0, 19)) == 0 and entries:  # sometimes more than 32 entries
        value = value + ("," + entries[-1].name) * 32
    version = draw(st.sampled_from([None, None, "2.30.4", "2.26.2", "2.24.3", "2.21.5"]))
    return fixture, version, entries, head, value


def meant_here(ports: list[IbPort], entries: list[Entry], head: str,
               value: str) -> Optional[set[tuple[str, int]]]:
    """What ``value`` means on ``ports``, from the pieces it was made of (docs/nccl.md,
    "The linter"): the ``^``/``=`` before the first name are the list's; a device's
    name means that device only, another name is a prefix (unless exact); an exclusion
    removes what it names from the included ports, or from all; only the ports NCCL can
    use count.  None: an entry's meaning is not clear."""
    closed = {p.device for p in ports if not p.opens}
    usable = {(p.device, p.port) for p in ports if p.active and p.device not in closed
              and p.link_layer in ("InfiniBand", "Ethernet")}
    names = {p.device for p in ports}
    if not entries:
        return None  # nothing to reinterpret: checked separately
    if any(PORTS[e.port] is None or not e.name for e in entries):
        return None
    list_mods = set(head + entries[0].mods)
    extra = 32 * [Entry("", entries[-1].name, "")] if value.endswith(
        ("," + entries[-1].name) * 32) else []
    inc, exc = set(), set()
    for i, e in enumerate(entries + extra):
        mods = list_mods | (set(e.mods) if i else set())
        port = PORTS[e.port]
        if "=" in mods or e.name in names:
            devs = {e.name} & names
        else:
            devs = {n for n in names if n.startswith(e.name)}
        got = {(d, p) for d, p in usable if d in devs and port in (-1, p)}
        (exc if "^" in mods else inc).update(got)
    has_inc = any("^" not in (list_mods | (set(e.mods) if i else set()))
                  for i, e in enumerate(entries))
    return (inc if has_inc else usable) - exc


@fuzz_settings(ci=300, deep=3000)
@given(cases())
def test_every_fix_selects_what_was_meant(case: tuple[str, Optional[str], list[Entry],
                                                       str, str]) -> None:
    fixture, version, entries, head, value = case
    ports = fixture_ports(fixture)
    result = lint_hca(value, ports, {}, nccl_version=version)
    expected = meant_here(ports, entries, head, value)
    if expected is not None:
        assert result.meant is not None and set(result.meant) == expected, (value, fixture)
    elif entries:
        assert result.meant is None and not result.fix, (value, fixture)
    with_fix = [w for w in result.warnings if w.fix]
    assert len(with_fix) <= 1, with_fix  # one value, one fix, attached once
    if not with_fix:
        assert not result.fix
        return
    (w,) = with_fix
    assert w.fix == result.fix and result.meant is not None
    # applied, the fix selects exactly what the warning says was meant, by NCCL's matcher
    assert selected(ports, w.fix, version) == set(result.meant), (value, w.fix)
    if len(result.meant) <= 8:  # the message names what was meant
        assert all(f"{d}:{p}" in w.message for d, p in result.meant), w.message
    else:
        assert f"({len(result.meant)} in all)" in w.message
    again = lint_hca(w.fix, ports, {}, nccl_version=version)
    assert w.code not in {x.code for x in again.warnings}, (value, w.fix, again.warnings)
    assert not again.fix  # nothing left to fix about how it is written


# ----------------------------------------------------------------------------- the issue's


def test_issue_values_on_hgx_h100() -> None:
    ports = fixture_ports("gpu-hgx-h100")  # mlx5_0 .. mlx5_7
    r = lint_hca("mlx5_8,mlx5_9", ports)
    # before: 'mlx5_9' suggested for mlx5_8 and 'mlx5_8' for mlx5_9, neither there
    assert not r.fix and not any(w.fix for w in r.warnings) and r.meant == ()
    assert "no fix: it means no device of this host" in r.warnings[0].message
    r = lint_hca("mlx5_0,^mlx5_1", ports)  # before: '^=mlx5_0,mlx5_1', excluding mlx5_0
    assert r.fix == "mlx5_0" and selected(ports, r.fix, None) == {("mlx5_0", 1)}
    r = lint_hca("mlx5_0 ,mlx5_1", ports)  # before: two different fixes
    assert [w.fix for w in r.warnings if w.fix] == ["mlx5_0,mlx5_1"]


def test_fix_never_selects_every_device_for_a_value_meaning_none() -> None:
    ports = fixture_ports("gpu-hgx-h100")
    for value in ("=mlx5_9", "mlx5_0:2", "=mlx5_99:1,foo"):
        r = lint_hca(value, ports)
        assert not r.fix and r.meant == (), value  # before: '' (every device)


# ----------------------------------------------------------------------------- link layers


def test_mixed_link_layers_on_dgx_a100() -> None:
    ports = fixture_ports("gpu-dgx-a100")
    links = {(p.device, p.port): p.link_layer for p in ports}
    assert links[("mlx5_2", 1)] == "InfiniBand" and links[("mlx5_3", 1)] == "Ethernet"
    r = lint_hca("=mlx5_2:1,mlx5_3:1", ports)  # what env --local-rank 2 wrote
    assert [w.code for w in r.warnings] == ["mixed-link-layer"]  # before: nothing
    (w,) = r.warnings
    assert not w.fix and "'=mlx5_2:1' (InfiniBand) or '=mlx5_3:1' (RoCE)" in w.message
    assert "Remote RoCE device is incompatible with the local [0]mlx5_2:1/IB" in w.message
    for alt in ("=mlx5_2:1", "=mlx5_3:1"):
        assert not lint_hca(alt, ports).warnings
    old = lint_hca("=mlx5_2:1,mlx5_3:1", ports, nccl_version="2.25.1")
    assert "does not check it" in old.warnings[0].message


def _dgx_demo_env_value() -> str:
    """The NCCL_IB_HCA ``sysverbs env --fixture dgx-demo`` wrote (issue 26 item 3): every
    ACTIVE port, in libibverbs' order (no GPU there, so no placement)."""
    ports = fixture_ports("dgx-demo")
    return "=" + ",".join(f"{p.device}:{p.port}" for p in ports
                          if p.active and p.link_layer in ("InfiniBand", "Ethernet"))


def test_merge_incompatible_on_dgx_demo() -> None:
    ports = fixture_ports("dgx-demo")
    value = _dgx_demo_env_value()
    assert value.startswith("=irdma0:1,mlx5_14:1,mlx5_11:1,mlx5_3:1,rxe0:1,mlx5_6:1")
    r = lint_hca(value, ports)
    codes = [w.code for w in r.warnings]
    assert codes == ["mixed-link-layer", "merge-incompatible", "merge-incompatible"]
    # the two notes select_ib printed before, now warnings naming the same ports
    pairs = [n for n in r.selection.notes if "Attempted to merge incompatible" in n]
    assert len(pairs) == 2
    assert "[5]mlx5_5:1/IB and [6]mlx5_6:1/RoCE" in r.warnings[1].message
    assert "[12]mlx5_11:1/IB and [13]mlx5_12:1/RoCE" in r.warnings[2].message
    assert not any(w.fix for w in r.warnings)
    # before 2.26.2 the first failed merge ends the communicator's init
    old = lint_hca(value, ports, nccl_version="2.25.1")
    merges = [w for w in old.warnings if w.code == "merge-incompatible"]
    assert len(merges) == 1 and "the communicator's init" in merges[0].message
    assert old.selection.notes[0] == (  # libibverbs' order then: mlx5_11 comes first
        "NET/IB : Trying to merge multiple devices together with different link_layer "
        "properties mlx5_11 -> 1, mlx5_12 -> 2. Try only selecting NICs with one type of "
        "link using NCCL_IB_HCA")
    # from 2.20 to 2.23 ncclIbInit merged only ports of one link layer: no failure
    assert "merge-incompatible" not in {w.code for w in lint_hca(
        value, ports, nccl_version="2.23.4").warnings}


def test_cli_exits_1_on_what_env_wrote(capsys: pytest.CaptureFixture[str],
                                       tmp_path_factory: pytest.TempPathFactory,
                                       fast_fixture_tmp: None) -> None:
    from sysverbs.cli import main

    empty = str(tmp_path_factory.mktemp("no-conf"))
    rc = main(["nccl", "check", "--fixture", "dgx-demo", _dgx_demo_env_value(),
               "--conf-root", empty])
    out = capsys.readouterr().out
    assert rc == 1  # before: 0, the merge failures only as notes
    assert "warning [mixed-link-layer]" in out and "warning [merge-incompatible]" in out
    rc = main(["nccl", "check", "--fixture", "gpu-dgx-a100", "=mlx5_2:1,mlx5_3:1",
               "--conf-root", empty])
    assert rc == 1 and "warning [mixed-link-layer]" in capsys.readouterr().out


# ----------------------------------------------------------------------------- plane IDs


PCI = "/sys/devices/pci0000:00/0000:00:01.0/"


def _ib_host(n: int) -> list[IbPort]:
    return [IbPort(f"mlx5_{i}", 1, True, "InfiniBand", PCI + f"0000:{16 + i:02x}:00.0")
            for i in range(n)]


def test_plane_ids_nccl_cannot_use() -> None:
    ports = _ib_host(14)
    # bit 14 (NCCL_IB_PLANE_VIRT_BIT) set: 16384, and -2 as int16
    for plane in ("16384", "-2"):
        r = lint_hca(f"=mlx5_0:1::{plane}", ports)
        assert [w.code for w in r.warnings] == ["bad-plane"], plane
        assert f"NCCL cannot use a plane ID that is {int(plane)}." in r.warnings[0].message
        assert r.selection.lines() == [f"NCCL cannot use a plane ID that is {int(plane)}.",
                                       "Failed to initialize NET plugin IB"]
    assert not lint_hca("=mlx5_0:1::16383", ports).warnings
    assert not lint_hca("=mlx5_0:1::-16385", ports).warnings  # 0xBFFF: bit 14 clear
    # 12 user-defined plane IDs fit; a 13th fails (13 with "none", PLANE_MAX_INDEX - 1)
    twelve = "=" + ",".join(f"mlx5_{i}:1::{i}" for i in range(12))
    assert not lint_hca(twelve, ports).warnings
    thirteen = "=" + ",".join(f"mlx5_{i}:1::{i}" for i in range(13))
    r = lint_hca(thirteen, ports)
    assert [w.code for w in r.warnings] == ["too-many-planes"]
    assert "more than 12 user-defined plane IDs" in r.warnings[0].message
    old = lint_hca(thirteen, ports, nccl_version="2.30.7")
    assert "NCCL cannot use more than 14 plane IDs." in old.warnings[0].message
    assert not lint_hca(thirteen, ports, nccl_version="2.30.4").warnings  # no planes yet


def test_table_full_on_mlx5_sriov() -> None:
    ports = fixture_ports("mlx5-sriov")  # 42 ports
    r = lint_hca(None, ports)
    assert [w.code for w in r.warnings] == ["table-full"]
    assert len(r.selection.devices) == 32 and len(r.selection.unread) == 10
    assert not lint_hca("=" + ",".join(sorted({p.device for p in ports})[:32]),
                        ports).warnings


def test_doctests() -> None:
    import doctest

    result = doctest.testmod(importlib.import_module('sysverbs.rank.nccl'))
    assert result.attempted and result.failed == 0, 'sysverbs.rank.nccl'
