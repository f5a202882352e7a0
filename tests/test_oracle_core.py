"""sysverbs against the real libibverbs (sysfs mode), on hand-made trees.

Each test builds one tree, runs the same plan with libibverbs (ctypes, in a
private mount namespace) and with sysverbs, and requires identical results:
order, every field, GUID, index, errno, device identity across calls, and the
stderr bytes.  Where the spec records what libibverbs does, the test also checks
that the real library really did it, so a broken harness cannot pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from tests import trees
from tests.oracle import harness
from tests.trees import Dir, Link, host, rdma_dev, rxe_dev

pytestmark = pytest.mark.oracle

LIST = [{"op": "list"}]
SHOW = {"IBV_SHOW_WARNINGS": "1"}
OPTS44 = {"rdma_core": "44"}


def check(
    tmp: Path,
    tree: trees.Tree,
    steps: Optional[list[dict[str, Any]]] = None,
    **kw: Any,
) -> tuple[harness.Run, harness.Run]:
    kw.setdefault("options", OPTS44)
    real, ours = harness.compare(tmp, lambda r: trees.build(r, tree), steps or LIST, **kw)
    harness.assert_same(real, ours)
    return real, ours


def names(run: harness.Run, step: int = 0) -> list[str]:
    return [d["name"] for d in run.results()[step]["devices"]]


# -- order -----------------------------------------------------------------------------


def test_order_is_readdir_order(otmp: Path) -> None:
    order = [7, 2, 11, 0, 5, 12, 3, 9, 1, 8, 4, 10, 6]
    tree = host(*(rxe_dev(f"uverbs{i}", f"rxe_{i}") for i in order))
    real, _ = check(otmp, tree)
    assert sorted(names(real)) == sorted(f"rxe_{i}" for i in order)


def test_mixed_providers_and_unmatched_warnings(otmp: Path) -> None:
    tree = host(
        rdma_dev("uverbs0", "mlx5_0"),
        rxe_dev("uverbs1", "rxe0"),
        rdma_dev("uverbs2", "siw0", pci="0000:09:00.0", modalias=None),
        rdma_dev(
            "uverbs3",
            "usnic_0",
            pci="0000:0a:00.0",
            modalias="pci:v00001137d00000043sv00001137sd0000012Cbc02sc00i00\n",
            node_type="5\n",
        ),
        rdma_dev("uverbs4", "mlx5_1", pci="0000:08:00.0", abi="3\n"),
    )
    real, _ = check(otmp, tree, env=SHOW)
    assert sorted(names(real)) == ["mlx5_0", "rxe0"]
    assert b"no userspace device-specific driver found for siw0\n" in real.stderr


def test_show_warnings_any_value(otmp: Path) -> None:
    tree = host(rdma_dev("uverbs0", "siw0", modalias=None))
    real, _ = check(otmp, tree, env={"IBV_SHOW_WARNINGS": ""})
    assert real.stderr.endswith(b"for siw0\n")


def test_zero_devices_and_missing_class_dir(otmp: Path) -> None:
    real, _ = check(otmp, trees.CLASS_ABI)
    assert real.results()[0]["devices"] == []
    real, _ = check(otmp / "b", {}, sysfs_path=str(otmp / "root" / "nothing"))
    assert real.results()[0]["errno"] == 38  # ENOSYS


def test_class_dir_is_a_file(otmp: Path) -> None:
    real, _ = check(
        otmp,
        {},
        sysfs_path=str(otmp / "root" / "f"),
        steps=[
            {"op": "mkdir", "path": "f/class"},
            {"op": "write", "path": "f/class/infiniband_verbs", "data": ""},
            {"op": "list"},
        ],
    )
    assert real.results()[2]["errno"] == 38


# -- parse rules (docs/behaviour.md: Reading sysfs files; The sysfs scan) --------------------------


def _parse_tree() -> trees.Tree:
    d = rxe_dev
    n63 = "r" + "x" * 62
    return host(
        d("uverbs0", "rxe_ok"),
        d("uverbs1", "rxe_sp ", ibdev_file="rxe_sp \n"),
        d("uverbs2", "rxe_nl", ibdev_file="rxe_nl"),
        d("uverbs3", "rxe_dbl", ibdev_file="rxe_dbl\n\n"),
        d("uverbs4", "rxe63", ibdev_file="rxe" + "y" * 60 + "\n"),
        d("uverbs5", "rxe64", ibdev_file="rxe" + "z" * 61 + "\n"),
        d("uverbs6", "rxe_neg", dev="-1:5\n"),
        d("uverbs7", "rxe_junk", dev="231:192junk\n"),
        d("uverbs8", "rxe_space", dev="231 192\n"),
        d("uverbs9", "rxe_sp2", dev=" 231 :192\n"),
        d("uverbs10", "rxe_colon", dev="231:\n"),
        d("uverbs11", "rxe_hex", dev="0x10:0\n"),
        d("uverbs12", "rxe_lead", dev="  231: 192\n"),
        d("uverbs13", "rxe_nodev", dev=None),
        d("uverbs14", "rxe_nonode", dev_node=False),
        d("u" + "v" * 62, "rxe_name63"),
        d("u" + "v" * 63, "rxe_name64"),
        d(".uverbs15", "rxe_dot"),
        d("uverbs16", n63),
        d("uverbs17", "rxe_nul", ibdev_file=b"rxe_nul\0tail\n"),
        d("uverbs18", "rxe_plus", dev="+231:+192\n"),
        d("uverbs19", "rxe_big", dev="99999999999999999999999:4294967297\n"),
        extra={
            "sys/class/infiniband_verbs/regular": "x\n",
            "sys/class/infiniband_verbs/dangling": Link("../../devices/nowhere"),
            "sys/class/infiniband_verbs/loop": Link("loop"),
            "sys/class/infiniband_verbs/uverbs20": Dir(),
            "sys/class/infiniband_verbs/uverbs20/ibdev": "rxe_noibdir\n",
            "sys/class/infiniband_verbs/uverbs20/dev": "1:2\n",
            "dev/infiniband/uverbs20": b"",
            "sys/class/infiniband_verbs/uverbs21": Dir(),
            "sys/class/infiniband_verbs/uverbs21/ibdev": "rxe_file\n",
            "sys/class/infiniband_verbs/uverbs21/dev": "1:2\n",
            "sys/class/infiniband_verbs/uverbs21/abi_version": "2\n",
            "sys/class/infiniband/rxe_file": "not a directory\n",
            "dev/infiniband/uverbs21": b"",
            "sys/class/infiniband_verbs/uverbs22": Dir(),
            "sys/class/infiniband_verbs/uverbs22/ibdev": Dir(),
            "sys/class/infiniband_verbs/uverbs22/dev": "1:2\n",
            "dev/infiniband/uverbs22": b"",
        },
    )


def test_parse_rules(otmp: Path) -> None:
    real, _ = check(otmp, _parse_tree(), env=SHOW)
    got = set(names(real))
    assert {
        "rxe_ok",
        "rxe_sp ",
        "rxe_nl",
        "rxe_neg",
        "rxe_junk",
        "rxe_lead",
        "rxe_name63",
        "rxe_nul",
        "rxe_file",
    } <= got
    assert not got & {
        "rxe_space",
        "rxe_sp2",
        "rxe_colon",
        "rxe_hex",
        "rxe_nodev",
        "rxe_nonode",
        "rxe_name64",
        "rxe_dot",
        "rxe_noibdir",
        "rxe_dbl\n",
    }


def test_dev_nodes_of_every_type(otmp: Path) -> None:
    tree = host(
        rxe_dev("uverbs0", "rxe_file"),
        rxe_dev("uverbs1", "rxe_dir", dev_node=False),
        rxe_dev("uverbs2", "rxe_dangling", dev_node=False),
        rxe_dev("uverbs3", "rxe_link", dev_node=False),
        extra={
            "dev/infiniband/uverbs1": Dir(),
            "dev/infiniband/uverbs2": Link("/nonexistent"),
            "dev/infiniband/uverbs3": Link("uverbs0"),
        },
    )
    real, _ = check(otmp, tree)
    assert sorted(names(real)) == ["rxe_dir", "rxe_file", "rxe_link"]


def test_empty_ibdev_gives_an_unmatched_device(otmp: Path) -> None:
    tree = host(
        rxe_dev("uverbs0", "", ibdev_file=""),
        rxe_dev("uverbs1", "rxe1"),
        extra={"sys/class/infiniband/": Dir()},
    )
    real, _ = check(otmp, tree, env=SHOW)
    assert real.stderr.endswith(b"driver found for \n")


@pytest.mark.parametrize(
    "value",
    [
        "1: CA\n",
        "  4\n",
        "abc\n",
        "4294967297\n",
        "-4294967295\n",
        "2\n",
        "3\n",
        "5\n",
        "6\n",
        "7\n",
        "8\n",
        "0\n",
        "",
        "\n",
        "4" + "x" * 30 + "\njunk",
        "4" + "x" * 31 + "\n",
        "4" + "x" * 30,
    ],
)
def test_node_type(otmp: Path, value: str) -> None:
    check(otmp, host(rxe_dev("uverbs0", "rxe0", node_type=value)))


@pytest.mark.parametrize(
    "value",
    [
        "0002:c903:0000:1234\n",
        "0002:c903:0000:12340000",
        "0002:c903:0000:123400000",
        " 2: 3:4:5\n",
        "1 :2:3:4\n",
        "-0x10:0X1f:+3:ffffffff\n",
        "1:2:3:4junk\n",
        "1:2:3:4:5:6\n",
        "1:2:3\n",
        "junk\n",
        "0x:1:2:3\n",
        "12345:0:0:1\n",
        "\n",
        "fe80::1\n",
    ],
)
def test_node_guid(otmp: Path, value: str) -> None:
    check(otmp, host(rxe_dev("uverbs0", "rxe0", guid=value), rxe_dev("uverbs1", "rxe1", guid=None)))


def test_files_longer_than_the_buffer(otmp: Path) -> None:
    tree = host(
        rxe_dev("uverbs0", "rxe0", abi="2" + " " * 30 + "\nmore"),
        rxe_dev("uverbs1", "rxe1", abi="2" + " " * 31 + "\n"),
        rxe_dev("uverbs2", "rxe2", dev="1:2" + " " * 28 + "\nxx"),
        rxe_dev("uverbs3", "rxe3", dev="1:2" + " " * 29 + "\n"),
    )
    check(otmp, tree, env=SHOW)


# -- per-device ABI and provider matching (docs/behaviour.md: Matching providers) ------------------


@pytest.mark.parametrize(
    "abi", [None, "3\n", "2\n", "-1\n", "1junk\n", "4294967297\n", "\n", "", "abc\n", " 1\n"]
)
def test_device_abi(otmp: Path, abi: Optional[str]) -> None:
    tree = host(rdma_dev("uverbs0", "mlx5_0", abi=abi), rxe_dev("uverbs1", "rxe0", abi=abi))
    check(otmp, tree, env=SHOW)


def test_abi_warnings_follow_driver_order(otmp: Path) -> None:
    tree = host(
        rdma_dev("uverbs0", "rxe_mlx", abi="3\n"),
        rdma_dev("uverbs1", "rxe_x", abi="2\n", pci="0000:08:00.0"),
    )
    real, _ = check(otmp, tree, env=SHOW)
    assert real.stderr.count(b"does not support the kernel ABI") == 2


MLX5_PCI = "pci:v000015B3d0000101Bsv000015B3sd00000007bc02sc07i00"


@pytest.mark.parametrize(
    "modalias",
    [
        MLX5_PCI + "\n",
        MLX5_PCI.lower() + "\n",
        "pci:v000015B3d0000101B\n",
        "pci:v000015B3d0000101Bsv\n",
        MLX5_PCI + "\nsecond line\n",
        "pci:v000015B3d0000101Bsv" + "x" * 486 + "\n",
        "pci:v000015B3d0000101Bsv" + "x" * 487 + "\n",
        "pci:v000015B3d0000101Bsv" + "x" * 488,
        "vmbus:3daf2e8ca732094bab99bd1f1c86b501\n",
        "vmbus:3daf2e8ca732094bab99bd1f1c86b501x\n",
        "rdma_device:Nrxe\n",
        "\n",
        "",
        "pci:v00001D0Fd0000EFA0sv00000000sd00000000bc02sc00i00\n",
        "pci:v00001D0Fd0000EFA3sv00000000sd00000000bc02sc00i00\n",
        "pci:v000014E4d00001809sv000014E4sd00000000bc02sc00i00\n",
        "pci:v00008086d00001592sv00008086sd00000002bc02sc00i00\n",
        "pci:v000015ADd00000820sv000015ADsd00000820bc02sc80i00\n",
    ],
)
def test_modalias(otmp: Path, modalias: str) -> None:
    check(otmp, host(rdma_dev("uverbs0", "dev0", modalias=modalias, abi="1\n")), env=SHOW)


@pytest.mark.parametrize("name", ["fooNrxe", "xrxe", "RXE0", "rxe", "rxe_long_name_0"])
def test_rxe_name_pattern(otmp: Path, name: str) -> None:
    check(otmp, host(rxe_dev("uverbs0", name)), env=SHOW)


def test_duplicate_ibdev(otmp: Path) -> None:
    tree = host(
        rxe_dev("uverbs0", "rxe0"),
        extra={
            "sys/class/infiniband_verbs/uverbs1": Dir(),
            "sys/class/infiniband_verbs/uverbs1/ibdev": "rxe0\n",
            "sys/class/infiniband_verbs/uverbs1/dev": "231:193\n",
            "sys/class/infiniband_verbs/uverbs1/abi_version": "2\n",
            "dev/infiniband/uverbs1": b"",
        },
    )
    real, _ = check(otmp, tree)
    assert names(real) == ["rxe0", "rxe0"]


# -- the global ABI (docs/behaviour.md: The ABI check) ---------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        "6",
        "6\n",
        " 6",
        "+6",
        "0006",
        "6junk",
        "3",
        "7",
        "-6",
        "1234567\n",
        "0",
        "junk",
        "0x6",
        "\n",
        "12345678",
        "2\n",
    ],
)
def test_class_abi(otmp: Path, value: Optional[str]) -> None:
    extra = {} if value is None else {"sys/class/infiniband_verbs/abi_version": value}
    tree = host(rxe_dev("uverbs0", "rxe0"), class_abi=False, extra=extra)
    check(otmp, tree, steps=[{"op": "list"}, {"op": "list"}, {"op": "list"}])


def test_no_abi_check_without_candidates(otmp: Path) -> None:
    real, _ = check(otmp, host(class_abi=False))
    assert real.results()[0]["devices"] == []


# -- the process-wide list across calls (docs/behaviour.md: The device list across calls) ----------


def test_add_remove_touch_between_calls(otmp: Path) -> None:
    base = host(
        rxe_dev("uverbs0", "rxe_a"), rxe_dev("uverbs1", "rxe_b"), rxe_dev("uverbs2", "rxe_c")
    )
    more = host(rxe_dev("uverbs3", "rxe_d"), rxe_dev("uverbs4", "rxe_e"), class_abi=False)
    later: list[dict[str, Any]] = []
    for rel, entry in trees.paths(more).items():
        if isinstance(entry, Link):
            later.append({"op": "symlink", "path": rel, "target": entry.target})
    steps = [{"op": "list"}, {"op": "list"}]
    # add two devices: create their directories and files, then the class links
    for rel, entry in trees.paths(more).items():
        if isinstance(entry, (str, bytes)):
            data = entry.encode() if isinstance(entry, str) else entry
            parent = str(Path(rel).parent)
            steps.append({"op": "mkdir", "path": parent})
            steps.append({"op": "write", "path": rel, "data": data.hex()})
    steps += later + [
        {"op": "list"},
        {"op": "remove", "path": "sys/class/infiniband_verbs/uverbs1"},
        {"op": "list"},
        {"op": "remove", "path": "dev/infiniband/uverbs2"},
        {"op": "list"},
        {"op": "touch", "path": "sys/class/infiniband/rxe_a", "seconds": 5},
        {"op": "list"},
        {"op": "free", "list": 0},
        {"op": "list"},
    ]
    real, _ = check(otmp, base, steps=steps)
    lists = [r for r in real.results() if r["op"] == "list"]
    assert len(lists[2]["devices"]) == 5
    assert names(real, steps.index({"op": "list"}, 3)) != []


def test_guid_cached_and_failures_not_cached(otmp: Path) -> None:
    tree = host(rxe_dev("uverbs0", "rxe0"), rxe_dev("uverbs1", "rxe1", guid=None))
    ib0 = "sys/devices/pci0000:00/virtual-rxe0/infiniband/rxe0"
    ib1 = "sys/devices/pci0000:00/virtual-rxe1/infiniband/rxe1"
    steps = [
        # One mtime for both device directories before the first call, so that the
        # second utime gives rxe1 back the mtime it was listed with (the same device),
        # whether or not the tree's writer made both within one tick of the clock.
        {"op": "utime", "path": ib1, "like": ib0},
        {"op": "list"},
        {"op": "write", "path": f"{ib0}/node_guid", "data": b"1:2:3:4\n".hex()},
        {"op": "write", "path": f"{ib1}/node_guid", "data": b"5:6:7:8\n".hex()},
        {"op": "utime", "path": ib1, "like": ib0},
        {"op": "list"},
    ]
    check(otmp, tree, steps=steps)


def test_renamed_ibdev_with_equal_mtime_keeps_old_name(otmp: Path) -> None:
    tree = host(rxe_dev("uverbs0", "rxe_old"), rxe_dev("uverbs9", "rxe_new", dev_node=False))
    old = "sys/devices/pci0000:00/virtual-rxe_old/infiniband/rxe_old"
    new = "sys/devices/pci0000:00/virtual-rxe_new/infiniband/rxe_new"
    uv = "sys/devices/pci0000:00/virtual-rxe_old/infiniband_verbs/uverbs0/ibdev"
    steps = [
        {"op": "list"},
        {"op": "utime", "path": new, "like": old},
        {"op": "write", "path": uv, "data": b"rxe_new\n".hex()},
        {"op": "list"},
        {"op": "touch", "path": new, "seconds": 3},
        {"op": "list"},
    ]
    real, _ = check(otmp, tree, steps=steps)
    assert names(real, 3) == ["rxe_old"] and names(real, 5) == ["rxe_new"]


# -- SYSFS_PATH (docs/behaviour.md: The sysfs root) and path lengths -------------------------------


@pytest.mark.parametrize("suffix", ["/sys", "/sys/", "/sys///", "//sys", "/./sys"])
def test_sysfs_path_forms(otmp: Path, suffix: str) -> None:
    check(otmp, host(rxe_dev("uverbs0", "rxe0")), sysfs_path=str(otmp / "root") + suffix)


@pytest.mark.parametrize("value", ["/", ""])
def test_sysfs_path_root_or_empty(otmp: Path, value: str) -> None:
    real, _ = check(otmp, host(rxe_dev("uverbs0", "rxe0")), sysfs_path=value)
    assert real.results()[0]["errno"] == 38


@pytest.mark.parametrize("length", [224, 225, 232, 233, 300])
def test_sysfs_path_lengths(otmp: Path, length: int) -> None:
    prefix = str(otmp / "root")
    pad = length - len(prefix) - len("//sys")  # characters of the padding directory path
    parts = []
    while pad > 0:
        take = min(pad, 50)
        parts.append("p" * take)
        pad -= take + 1
    sub = "/".join(parts)
    sysfs = f"{prefix}/{sub}/sys"
    assert len(sysfs) == length

    def build(root: Path) -> None:
        trees.build(root / sub, host(rxe_dev("uverbs0", "rxe0")))
        (root / sub / "dev").rename(root / "dev")

    real, ours = harness.compare(otmp, build, LIST, sysfs_path=sysfs, env=SHOW, options=OPTS44)
    harness.assert_same(real, ours)
    result = real.results()[0]
    if length <= 224:
        assert len(result["devices"]) == 1
    elif length < 233:
        assert result["devices"] == []  # ibdev_path fits, dev_path does not
    else:
        assert result["errno"] == 12  # ENOMEM


# -- providers: config dir and RDMAV_DRIVERS (docs/behaviour.md: Matching providers) ---------------


def _conf(tmp: Path, files: dict[str, Any]) -> Path:
    conf = tmp / "conf"
    trees.build(conf, {})
    for name, entry in files.items():
        p = conf / name
        if isinstance(entry, Link):
            p.symlink_to(entry.target)
        elif isinstance(entry, Dir):
            p.mkdir()
        else:
            p.write_bytes(entry if isinstance(entry, bytes) else entry.encode())
    return conf


ALL_KINDS = host(
    rdma_dev("uverbs0", "mlx5_0"),
    rxe_dev("uverbs1", "rxe0"),
    rdma_dev(
        "uverbs2",
        "efa_0",
        pci="0000:10:00.0",
        abi="1\n",
        modalias="pci:v00001D0Fd0000EFA1sv00000000sd00000000bc02sc00i00\n",
    ),
)


def test_config_dir_parsing(otmp: Path) -> None:
    conf = _conf(
        otmp,
        {
            "rxe.driver": "# comment\n\n  \t# indented comment\ndriver rxe extra words\n",
            "mlx5.driver": "driver mlx5\nDriver efa\nfoo bar\n",
            "bad.driver": "driver\n   \ndriver siw\r\ndriver",
            "dangling.driver": Link("/nonexistent/x"),
            "subdir": Dir(),
            "spaces.driver": "   ",
            # longer than one 64 KiB read: the lines after it count too
            "long.driver": "# padding\n" * 8000 + "driver efa\nLate directive\n",
        },
    )
    real, _ = check(otmp, ALL_KINDS, config_dir=conf, env=SHOW)
    assert b"ignoring bad config directive 'Driver'" in real.stderr
    assert b"couldn't stat config file" in real.stderr
    assert b"ignoring bad config directive 'Late'" in real.stderr


def test_config_dir_unreadable_as_user(otmp: Path) -> None:
    conf = _conf(otmp, {"rxe.driver": "driver rxe\n"})
    conf.chmod(0)
    check(
        otmp,
        ALL_KINDS,
        config_dir=conf,
        env=SHOW,
        setpriv="--reuid=65534 --regid=65534 --clear-groups",
    )


@pytest.mark.parametrize(
    "env",
    [
        {"RDMAV_DRIVERS": "rxe"},
        {"RDMAV_DRIVERS": ""},
        {"RDMAV_DRIVERS": "nosuch:mlx5;;efa"},
        {"IBV_DRIVERS": "nosuch"},
        {"RDMAV_DRIVERS": "rxe", "IBV_DRIVERS": "nosuch"},
        {"RDMAV_DRIVERS": "/nonexistent/librxe"},
        {"RDMAV_DRIVERS": "/usr/lib/x86_64-linux-gnu/libibverbs/librxe"},
    ],
)
def test_driver_env(otmp: Path, env: dict[str, str]) -> None:
    conf = _conf(otmp, {"mlx5.driver": "driver mlx5\n"})
    check(otmp, ALL_KINDS, config_dir=conf, env={**SHOW, **env})


def test_driver_env_ignored_when_setuid(otmp: Path) -> None:
    conf = _conf(otmp, {"mlx5.driver": "driver mlx5\n"})
    real, _ = check(
        otmp,
        ALL_KINDS,
        config_dir=conf,
        env={**SHOW, "RDMAV_DRIVERS": "nosuch"},
        setpriv="--ruid=65534",
    )
    # with ruid != euid SYSFS_PATH is ignored too: /sys has no RDMA class here
    assert real.results()[0]["errno"] == 38


# -- unprivileged callers (docs/behaviour.md: The device list across calls) ------------------------


@pytest.mark.parametrize("memlock", [32768, 33792, None])
def test_memlock_warning(otmp: Path, memlock: Optional[int]) -> None:
    real, _ = check(
        otmp,
        host(rxe_dev("uverbs0", "rxe0")),
        memlock=memlock,
        steps=[{"op": "list"}, {"op": "list"}],
        setpriv="--reuid=65534 --regid=65534 --clear-groups",
    )
    if memlock == 32768:
        assert real.stderr.count(b"RLIMIT_MEMLOCK is 32768 bytes") == 1


#: Three devices, each with something unreadable (also tests/test_unprivileged.py's).
UNREADABLE_TREE = host(rxe_dev("uverbs0", "rxe0"), rxe_dev("uverbs1", "rxe1"),
                       rxe_dev("uverbs2", "rxe2"))
_BASE = "sys/devices/pci0000:00/virtual-"
UNREADABLE_STEPS = [
    {"op": "chmod", "path": f"{_BASE}rxe0/infiniband_verbs/uverbs0/abi_version", "mode": "0"},
    {"op": "chmod", "path": f"{_BASE}rxe1/infiniband/rxe1/node_guid", "mode": "0"},
    {"op": "chmod", "path": f"{_BASE}rxe2/infiniband_verbs/uverbs2", "mode": "0"},
]


def test_unreadable_files_as_user(otmp: Path) -> None:
    real, ours = harness.compare(
        otmp,
        lambda r: chmod_build(r, UNREADABLE_TREE, UNREADABLE_STEPS),
        LIST,
        env=SHOW,
        options=OPTS44,
        setpriv="--reuid=65534 --regid=65534 --clear-groups",
    )
    harness.assert_same(real, ours)


def chmod_build(root: Path, tree: trees.Tree, steps: list[dict[str, Any]]) -> None:
    trees.build(root, tree)
    for s in steps:
        (root / s["path"]).chmod(int(s["mode"], 8))


# -- ibv_open_device (docs/behaviour.md: Accessors and lifetime) -----------------------------------


def test_open_device(otmp: Path) -> None:
    tree = host(
        rxe_dev("uverbs0", "rxe_file"),
        rxe_dev("uverbs1", "rxe_dir", dev_node=False),
        rxe_dev("uverbs2", "rxe_null", dev="1:3\n", dev_node=False),
        rxe_dev("uverbs3", "rxe_wrong", dev="1:5\n", dev_node=False),
        rxe_dev("uverbs4", "rxe_zero", dev="0:0\n", dev_node=False),
        extra={"dev/infiniband/uverbs1": Dir()},
    )
    steps: list[dict[str, Any]] = [
        {"op": "mknod", "path": "dev/infiniband/uverbs2", "major": 1, "minor": 3},
        {"op": "mknod", "path": "dev/infiniband/uverbs3", "major": 1, "minor": 3},
        {"op": "mknod", "path": "dev/infiniband/uverbs4", "major": 1, "minor": 3},
        {"op": "list"},
    ]
    steps += [{"op": "open", "list": 0, "device": i} for i in range(5)]
    real, _ = check(otmp, tree, steps=steps)
    assert len(real.results()[3]["devices"]) == 5
    assert {r["errno"] for r in real.results()[4:]} == {0, 2}
