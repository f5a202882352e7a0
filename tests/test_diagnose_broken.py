"""sysverbs.diagnose() on broken trees: it never raises."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sysverbs.devices.diagnosis import CODES, diagnose
from tests import trees
from tests.bad_input import make_broken
from tests.diagnose_runs import fixture, run, rxe
from tests.fuzz.profiles import fuzz_settings

# -- broken trees ----------------------------------------------------------------------------

_ENTRY_FILES = ["ibdev", "dev", "abi_version"]
_IB_FILES = [
    "node_type",
    "node_guid",
    "ports/1/state",
    "ports/1/link_layer",
    "ports/1/gids/0",
    "ports/1/gid_attrs/ndevs/0",
    "device/modalias",
]


@pytest.mark.timeout(60)  # FIFOs in the tree: a read of one would block, fail fast
@fuzz_settings(ci=40, deep=400)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_ENTRY_FILES + _IB_FILES),
            st.sampled_from(["file", "dir", "loop", "fifo", "missing", "big"]),
            st.binary(max_size=40),
        ),
        max_size=8,
    ),
    st.booleans(),
)
def test_broken_trees_never_raise(changes: list[tuple[str, str, bytes]], class_abi: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        trees.build(
            root,
            trees.host(trees.rdma_dev("uverbs0", "mlx5_0"), rxe("uverbs1"), class_abi=class_abi),
        )
        uv = root / "sys/class/infiniband_verbs/uverbs0"
        ib = root / "sys/class/infiniband/mlx5_0"
        for rel, kind, data in changes:
            path = (uv if rel in _ENTRY_FILES else ib) / rel
            if os.path.lexists(path) and not path.is_dir():
                path.unlink()
            elif path.is_dir():
                continue
            make_broken(path, kind, data)
        found = diagnose(
            sysfs_path=root / "sys", dev_dir=root / "dev/infiniband", providers="builtin"
        )
        assert {d.name for d in found} >= {"rxe0"}
        for d in found:
            assert d.usable is False  # plain-file nodes
            assert all(r.code in CODES for r in d.reasons)


def test_duplicate_entry_with_one_broken(tmp_path: Path) -> None:
    """Two uverbs entries name rxe0; libibverbs takes the good one: no error for it."""
    trees.build(tmp_path, trees.host(rxe("uverbs0"), rxe("uverbs1", dev="junk\n")))
    s = run(tmp_path)
    assert s.devices["rxe0"]["listed"] and "bad_uverbs_entry" not in s.devices["rxe0"]["codes"]


def test_missing_config_dir(tmp_path: Path) -> None:
    fixture("rxe")(tmp_path)
    s = run(tmp_path, providers="installed", config_dir=tmp_path / "nosuch")
    assert "does not exist" in s.devices["rxe0"]["messages"]["provider_not_installed"]
    assert "no_providers_installed" in s.host
