"""diagnose() against the REAL libibverbs: ``listed`` must be exactly the devices
ibv_get_device_list() returns, and every device it drops must have an error reason.

The real libibverbs runs on one copy of each tree (tests/oracle/harness.py, with the
tree's dev/infiniband bind-mounted on /dev/infiniband); diagnose() reads the same
copy afterwards, with the same /dev directory and config directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from sysverbs import testing
from sysverbs.devices.diagnosis import diagnose
from tests import listing_hosts, trees
from tests.oracle import harness
from tests.test_oracle_core import ALL_KINDS, _parse_tree

pytestmark = pytest.mark.oracle


def check(
    tmp: Path, build: Any, config_dir: Optional[Path] = None, env: Optional[dict[str, str]] = None
) -> list[str]:
    real_src, _, dst = harness.materialize_pair(tmp, build)
    real = harness.run_impl(
        "libibverbs", real_src, dst, [{"op": "list"}], config_dir=config_dir, env=env
    )
    assert real.returncode == 0, real.stderr
    result = real.results()[0]
    real_names = sorted(d["name"] for d in result.get("devices", []))
    opts: dict[str, Any] = {
        "sysfs_path": real_src / "sys",
        "dev_dir": real_src / "dev/infiniband",
        "config_dir": config_dir,
        "rdma_core": "44",
        "providers": "installed" if config_dir or Path("/etc/libibverbs.d").is_dir()
        else "builtin",
    }
    # recorded=True (doctor --fixture) changes what is said of the nodes, not the list.
    for found in (diagnose(**opts), diagnose(recorded=True, **opts)):
        assert sorted(d.name for d in found if d.listed) == real_names
        for d in found:
            if not d.listed:  # a dropped device always says why: an error, or the note
                assert d.errors or d.management, d  # that it is no verbs device (XDR SMI)
        if "errno" in result:
            assert not real_names and found.host
    return real_names


@pytest.mark.parametrize("name", testing.fixture_names())
def test_fixture(otmp: Path, name: str) -> None:
    check(otmp, lambda root: listing_hosts.materialize(name, root))


def test_malformed_entries(otmp: Path) -> None:
    """The 23 malformed uverbs entries of the core oracle test (docs/behaviour.md: The
    sysfs scan)."""
    listed = check(otmp, lambda root: trees.build(root, _parse_tree()))
    assert "rxe_ok" in listed and "rxe_nodev" not in listed


def test_only_some_providers_enabled(otmp: Path) -> None:
    conf = otmp / "conf"
    conf.mkdir()
    (conf / "rxe.driver").write_text("driver rxe\n")
    (conf / "bogus.driver").write_text("driver nosuch\n")
    listed = check(otmp, lambda root: trees.build(root, ALL_KINDS), config_dir=conf)
    assert listed and all(n.startswith("rxe") for n in listed)


@pytest.mark.parametrize("abi", ["7\n", "2\n", None])
def test_kernel_abi(otmp: Path, abi: Optional[str]) -> None:
    extra: trees.Extra = {} if abi is None else {"sys/class/infiniband_verbs/abi_version": abi}
    check(
        otmp,
        lambda root: trees.build(
            root, trees.host(trees.rxe_dev("uverbs0", "rxe0"), extra=extra, class_abi=abi is None)
        ),
    )


def test_provider_abi_and_unmatched(otmp: Path) -> None:
    tree = trees.host(
        trees.rdma_dev("uverbs0", "mlx5_0", abi="0\n"),
        trees.rdma_dev("uverbs1", "mlx5_1", abi="1\n", pci="0000:07:00.1"),
        trees.rdma_dev(
            "uverbs2",
            "usnic_0",
            pci="0000:08:00.0",
            modalias="pci:v00001137d00000043sv00001137sd0000012Cbc02sc00i00\n",
        ),
        trees.rxe_dev("uverbs3", "rxe0", dev_node=False),
    )
    assert check(otmp, lambda root: trees.build(root, tree)) == ["mlx5_1"]
