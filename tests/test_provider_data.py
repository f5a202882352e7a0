"""The provider match-table data file: shape, history and agreement with the spec dumps.

``sysverbs/providers/providers.json`` holds every provider's match table with per-entry
``since``/``until`` releases (re-checkable with tools/check_provider_history.py).  The
tables derived from it for rdma-core 44 and for latest must equal the dumps taken from
the compiled libraries (tests/data/spec/providers-{v44,latest}.json; see
tests/data/PROVENANCE.md).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import pytest

INT_MAX = 2147483647
SPEC_DIR = Path(__file__).resolve().parent / "data" / "spec"


def load_data() -> dict[str, Any]:
    try:
        text = resources.files("sysverbs").joinpath("data/providers.json").read_text("utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        path = Path(__file__).resolve().parents[1] / "sysverbs" / "providers" / "providers.json"
        text = path.read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


DATA = load_data()


def spec(name: str) -> list[dict[str, Any]]:
    path = SPEC_DIR / name
    result: list[dict[str, Any]] = json.loads(path.read_text("utf-8"))
    return result


def alive(raw: dict[str, Any], release: int) -> bool:
    until = raw.get("until")
    return bool(raw["since"] <= release and (until is None or release < until))


def derive(release: int) -> list[dict[str, Any]]:
    """The table of one release, shaped like the spec dumps (no since/until keys)."""
    table = []
    for p in DATA["providers"]:
        if not alive(p, release):
            continue
        lo, hi = p["min_abi"], p["max_abi"]
        for first, rlo, rhi in p.get("abi_history", []):
            if first <= release:
                lo, hi = rlo, rhi
        match = [
            {k: v for k, v in m.items() if k not in ("since", "until")}
            for m in p["match"]
            if alive(m, release)
        ]
        table.append(
            {"name": p["name"], "library": p["library"], "min_abi": lo, "max_abi": hi,
             "match": match}
        )
    return table


def pabi(release: int) -> Optional[int]:
    value = None
    for first, number in DATA["pabi"]:
        if first <= release:
            value = number
    return value


def provider(name: str) -> dict[str, Any]:
    for p in DATA["providers"]:
        if p["name"] == name:
            found: dict[str, Any] = p
            return found
    raise KeyError(name)


def entries(name: str, **want: str) -> list[dict[str, Any]]:
    return [m for m in provider(name)["match"] if all(m.get(k) == v for k, v in want.items())]


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- agreement with the dumps -------------------------------------------------------------


def test_release_44_equals_spec_dump() -> None:
    assert derive(44) == spec("providers-v44.json")


def test_latest_equals_spec_dump() -> None:
    assert DATA["latest"] == 65
    assert derive(DATA["latest"]) == spec("providers-latest.json")


def test_provider_order_is_latest_registration_order() -> None:
    assert [p["name"] for p in DATA["providers"]] == [
        p["name"] for p in spec("providers-latest.json")
    ]


# -- shape and consistency ----------------------------------------------------------------


def test_top_level_shape() -> None:
    assert DATA["format"] == 1
    assert isinstance(DATA["comment"], str) and "\n" not in DATA["comment"]
    assert is_int(DATA["latest"])
    assert set(DATA) == {"format", "comment", "latest", "pabi", "providers"}


def test_pabi_rows_ascending() -> None:
    rows = DATA["pabi"]
    assert rows and all(len(r) == 2 and is_int(r[0]) and is_int(r[1]) for r in rows)
    firsts = [r[0] for r in rows]
    assert firsts == sorted(firsts) and len(set(firsts)) == len(firsts)
    assert firsts[-1] <= DATA["latest"]


def test_since_and_until_are_ordered_ints() -> None:
    latest = DATA["latest"]
    for p in DATA["providers"]:
        assert is_int(p["since"]) and p["since"] <= latest, p["name"]
        assert "until" not in p
        for m in p["match"]:
            assert is_int(m["since"]), (p["name"], m)
            assert p["since"] <= m["since"] <= latest, (p["name"], m)
            if "until" in m:
                assert is_int(m["until"]), (p["name"], m)
                assert m["since"] < m["until"] <= latest, (p["name"], m)


def test_abi_history_consistent() -> None:
    for p in DATA["providers"]:
        rows = p.get("abi_history")
        if rows is None:
            continue
        assert len(rows) >= 2, p["name"]
        firsts = [r[0] for r in rows]
        assert firsts == sorted(firsts) and len(set(firsts)) == len(firsts)
        assert firsts[0] == p["since"]
        assert rows[-1][1:] == [p["min_abi"], p["max_abi"]]
        assert all(is_int(x) for r in rows for x in r)


def test_entry_fields() -> None:
    keys = {
        "pci": {"kind", "vendor", "device"},
        "driver_id": {"kind", "id", "value"},
        "modalias": {"kind", "pattern"},
        "name": {"kind", "prefix", "pattern"},
    }
    for p in DATA["providers"]:
        for m in p["match"]:
            assert set(m) - {"since", "until"} == keys[m["kind"]], (p["name"], m)
            if m["kind"] == "pci":
                for field in ("vendor", "device"):
                    value = m[field]
                    assert len(value) == 6 and value.startswith("0x"), m
                    assert value == value.lower() and int(value, 16) >= 0, m
            if m["kind"] == "name":
                assert m["pattern"] == f"rdma_device:*N{m['prefix']}*"


def test_no_release_has_duplicate_entries() -> None:
    """An entry that was dropped and re-added appears twice with disjoint runs."""
    releases = range(min(p["since"] for p in DATA["providers"]), DATA["latest"] + 1)
    for release in releases:
        for p in derive(release):
            keys = [json.dumps(m, sort_keys=True) for m in p["match"]]
            assert len(keys) == len(set(keys)), (release, p["name"])


# -- spot checks against rdma-core's git history --------------------------------------------


def test_spot_checks_pci_history() -> None:
    # mlx5: 0x1025 first in v54.0; 0x1027 and 0x2101 only after v64.0 (HEAD = 65)
    assert [m["since"] for m in entries("mlx5", vendor="0x15b3", device="0x1025")] == [54]
    assert [m["since"] for m in entries("mlx5", device="0x1027")] == [65]
    assert [m["since"] for m in entries("mlx5", device="0x2101")] == [65]
    assert [m["since"] for m in entries("mlx5", device="0x1011")] == [12]
    # efa 0xefa3 in v53.0, 0xefa4 in v64.0; bnxt_re 0x1809 in v47.0
    assert [m["since"] for m in entries("efa", device="0xefa3")] == [53]
    assert [m["since"] for m in entries("efa", device="0xefa4")] == [64]
    assert [m["since"] for m in entries("bnxt_re", device="0x1809")] == [47]
    # qedr dropped 0x8071..0x8073 in v14
    for dev in ("0x8071", "0x8072", "0x8073"):
        (m,) = entries("qedr", device=dev)
        assert (m["since"], m["until"]) == (12, 14)
    # bnxt_re 0x1614: added in v15, lost in the v16 table conversion, back in v17
    runs = [(m["since"], m.get("until")) for m in entries("bnxt_re", device="0x1614")]
    assert runs == [(15, 16), (17, None)]


def test_spot_checks_other_entries() -> None:
    (vmbus,) = entries("mlx4", kind="modalias")
    assert vmbus["pattern"] == "vmbus:3daf2e8ca732094bab99bd1f1c86b501"
    assert vmbus["since"] == 20
    hns_gone = [m for m in provider("hns")["match"] if "until" in m]
    assert [m["kind"] for m in hns_gone] == ["modalias"] * 3
    assert all((m["since"], m["until"]) == (16, 41) for m in hns_gone)
    (name,) = entries("rxe", kind="name")
    assert name["since"] == 16
    (mlx5_id,) = entries("mlx5", kind="driver_id")
    assert (mlx5_id["value"], mlx5_id["since"]) == (1, 25)
    (irdma_id,) = entries("irdma", kind="driver_id")
    assert (irdma_id["id"], irdma_id["value"], irdma_id["since"]) == ("RDMA_DRIVER_IRDMA", 9, 37)


def test_spot_checks_providers() -> None:
    since = {p["name"]: p["since"] for p in DATA["providers"]}
    assert since["ionic"] == 61
    assert since["mana"] == 44
    assert since["erdma"] == 43
    assert since["irdma"] == 37
    assert since["siw"] == 25
    assert since["efa"] == 24
    assert since["bnxt_re"] == 14
    assert since["pvrdma"] == 13
    assert since["mlx5"] == since["mthca"] == 12
    assert [p["name"] for p in derive(60)].count("ionic") == 0
    assert [p["name"] for p in derive(61)].count("ionic") == 1


def test_spot_checks_abi_ranges() -> None:
    # rxe accepted any ABI until v18 restricted it to 1..2 (64-bit)
    assert provider("rxe")["abi_history"] == [[12, 0, INT_MAX], [18, 1, 2]]
    rxe17 = next(p for p in derive(17) if p["name"] == "rxe")
    assert (rxe17["min_abi"], rxe17["max_abi"]) == (0, INT_MAX)
    assert [p["name"] for p in DATA["providers"] if "abi_history" in p] == ["rxe"]


def test_spot_checks_pabi() -> None:
    expected = {12: 2, 14: 2, 15: 15, 22: 22, 24: 22, 25: 25, 33: 33, 34: 34, 44: 34,
                56: 34, 57: 57, 58: 57, 59: 59, 63: 59, 64: 64, 65: 65}
    assert {r: pabi(r) for r in expected} == expected


def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget what sysverbs.providers.table loaded."""
    from sysverbs.providers import table as providers

    monkeypatch.setattr(providers, "_loaded", {})
    monkeypatch.setattr(providers, "_tables", {})


def _fields(table: Any) -> list[tuple[Any, ...]]:
    return [(p.name, p.library, p.min_abi, p.max_abi, p.pci_prefixes, p.patterns,
             p.driver_ids) for p in table]


def test_generated_data_is_current_and_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_data.py`` is what tools/write_provider_data.py writes from this providers.json
    (regenerated in memory, compared as text), and a table and the release span load
    from it without the JSON parse."""
    import json as json_module

    from sysverbs.providers import _data as generated
    from sysverbs.providers import table as providers

    path = Path(generated.__file__)
    assert path.read_text(encoding="utf-8") == providers.render_data_module(DATA), (
        "stale sysverbs/providers/_data.py: run tools/write_provider_data.py")
    derived = {r: providers._table_rows(DATA, r) for r in providers.known_releases()}

    _fresh(monkeypatch)

    def refuse(*args: object) -> None:
        raise AssertionError("the JSON was parsed or a table derived although _data.py has it")

    monkeypatch.setattr(providers, "_table_rows", refuse)
    monkeypatch.setattr(json_module, "loads", refuse)
    for release, rows in derived.items():
        assert _fields(providers.provider_table(release)) == [
            (n, lib, lo, hi, frozenset(pre), pats, frozenset(ids))
            for n, lib, lo, hi, pre, pats, ids in rows]
    assert "data" not in providers._loaded  # the whole data was never needed
    assert (providers.latest_release(), providers.known_releases()[0]) == (
        DATA["latest"], min(p["since"] for p in DATA["providers"]))


def test_a_release_the_generated_data_lacks_is_derived_from_json(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from sysverbs.providers import _data as generated
    from sysverbs.providers import table as providers

    expected = {r: providers.provider_table(r) for r in providers.known_releases()}
    _fresh(monkeypatch)
    monkeypatch.setattr(generated, "TABLE_OF", {})
    assert {r: providers.provider_table(r) for r in providers.known_releases()} == expected
    assert providers._data() == DATA


def test_match_entries_are_the_table_matching_uses() -> None:
    """providers.match_entries (the entries, one by one) and the Provider fields that
    matching reads describe the same table, in every release."""
    from sysverbs.providers import table as providers

    for release in providers.known_releases():
        for prov in providers.provider_table(release):
            entries = providers.match_entries(prov.name, release)
            assert frozenset(b"pci:v%08Xd%08Xsv" % (e.vendor, e.device)
                             for e in entries if e.kind == "pci") == prov.pci_prefixes
            assert tuple(e.pattern for e in entries
                         if e.kind in ("modalias", "name")) == prov.patterns
            assert frozenset(e.driver_id for e in entries
                             if e.kind == "driver_id") == prov.driver_ids
    assert providers.match_entries("no-such-provider", 44) == ()
