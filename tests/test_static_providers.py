"""``static_providers``: the options and rules of a statically linked libibverbs.

What a static binary lists on each tree is proven against Debian's real static
libibverbs in tests/test_static_oracle.py; these tests cover the option itself (its
spellings, its errors, what :func:`sysverbs.effective_options` says) and the data it
reads (static.json against the provider table).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import sysverbs
from sysverbs.ground.errors import UsageError, WrongTypeError
from sysverbs.providers.static import static_link, static_names, static_since
from sysverbs.providers.table import known_releases, provider_table
from tests import trees
from tests.trees import host, rdma_dev, rxe_dev

ROOT = Path(__file__).resolve().parents[1]
DATA = json.loads((ROOT / "sysverbs/providers/static.json").read_text(encoding="utf-8"))

#: What rdma-core 44's libibverbs/verbs.h declares and its CMakeLists.txt builds, in
#: add_subdirectory order (read off the v44.0 tag; Debian 12's libibverbs-dev is 44).
LINK_ORDER_44 = ("bnxt_re cxgb4 efa erdma hns irdma mana mlx4 mlx5 mthca ocrdma qedr "
                 "vmw_pvrdma hfi1verbs ipathverbs rxe siw").split()


def test_the_44_link_order_is_the_data() -> None:
    assert list(static_names(44)) == LINK_ORDER_44
    assert static_link("all", 44).linked == tuple(LINK_ORDER_44)


def test_every_modelled_provider_of_a_static_release_has_a_static_name() -> None:
    """Each release's static names are its providers' library names (``vmw_pvrdma``
    for pvrdma), plus only the three providers gone before the latest release."""
    for release in known_releases():
        if release < static_since():
            continue
        libraries = {prov.library for prov in provider_table(release)}
        names = set(static_names(release))
        assert libraries <= names, release
        assert names - libraries <= {"cxgb3", "nes", "i40iw"}, release


@pytest.mark.parametrize("value, linked", [
    ("mlx4,mlx5", ("mlx4", "mlx5")),
    ("mlx5,mlx4", ("mlx4", "mlx5")),  # link order, not the order of the names
    (" mlx5 , rxe ", ("mlx5", "rxe")),  # the preprocessor ignores the blanks
    (["rxe", "mlx4"], ("mlx4", "rxe")),
    ("mlx5,mlx5", ("mlx5",)),
    ("none", ()),
    ("", ()),
    ([], ()),
    ("none,mlx5", ("mlx5",)),
    ("all,none", tuple(LINK_ORDER_44)),
])
def test_what_a_define_links(value: object, linked: tuple[str, ...]) -> None:
    assert static_link(value, 44).linked == linked


def test_names_past_the_slots_are_dropped() -> None:
    """rdma-core 44's macro takes 19 names; a 20th falls into its ``...``, unchecked."""
    link = static_link(["none"] * 19 + ["mlx5", "nosuch"], 44)
    assert link.linked == () and link.dropped == ("mlx5", "nosuch")
    assert static_link(["none"] * 18 + ["mlx5"], 44).linked == ("mlx5",)
    assert static_link(["none"] * 15 + ["mlx5"], 21).dropped == ("mlx5",)


@pytest.mark.parametrize("value, text", [
    ("foo", "'foo' is not a provider of rdma-core 44"),
    ("mlx4,,mlx5", "an empty name is not a provider"),
    ("mlx4,", "an empty name is not a provider"),
    ("pvrdma", "'pvrdma' is not a provider"),  # the define spells vmw_pvrdma
    ("ionic", "'ionic' is not a provider of rdma-core 44"),  # came with 61
])
def test_a_name_that_is_no_provider_is_a_usage_error(value: str, text: str) -> None:
    with pytest.raises(UsageError, match=text) as e:
        sysverbs.get_device_list(static_providers=value, rdma_core=44, sysfs_path="/nonexistent")
    assert "valid: all, none, bnxt_re, cxgb4," in str(e.value)
    assert "vmw_pvrdma" in str(e.value)


def test_releases_before_static_linking_and_bad_types() -> None:
    with pytest.raises(UsageError, match="rdma-core 20 has no static libibverbs"):
        sysverbs.effective_options(static_providers="mlx5", rdma_core=20)
    for bad in (b"mlx5", 5, [b"mlx5"], [None]):
        with pytest.raises(WrongTypeError):
            sysverbs.effective_options(static_providers=bad, rdma_core=44)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="exclude each other"):
        sysverbs.effective_options(static_providers="mlx5", providers="builtin")


def test_effective_options_reports_the_static_link() -> None:
    opts = sysverbs.effective_options(static_providers=["mlx5", "mlx4"], rdma_core="44")
    assert opts.providers == "static" and opts.static_providers == "mlx5,mlx4"
    assert "mlx4, mlx5 linked in (in link order" in opts.providers_reason
    none = sysverbs.effective_options(static_providers="", rdma_core="44")
    assert none.static_providers == "" and "without RDMA_STATIC_PROVIDERS" in none.providers_reason
    old = sysverbs.effective_options(static_providers="all", rdma_core="30")
    assert "no match table for i40iw" in old.providers_reason
    assert sysverbs.effective_options(rdma_core="44").static_providers is None
    dropped = sysverbs.effective_options(static_providers=["none"] * 19 + ["mlx5"], rdma_core=44)
    assert "mlx5 dropped: the define takes 19 names" in dropped.providers_reason


def _opts(tmp: Path, static: object) -> dict[str, object]:
    if not (tmp / "sys").exists():
        trees.build(tmp, host(rdma_dev("uverbs0", "mlx5_0"), rxe_dev("uverbs1", "rxe0")))
    return {"source": "sysfs", "sysfs_path": tmp / "sys", "dev_dir": tmp / "dev/infiniband",
            "rdma_core": 44, "static_providers": static}


def test_a_static_list_has_the_linked_providers_only(tmp_path: Path) -> None:
    names = [d.name for d in sysverbs.get_device_list(**_opts(tmp_path, "mlx5"))]  # type: ignore[arg-type]
    assert names == ["mlx5_0"]
    assert sysverbs.get_device_list(**_opts(tmp_path, "")) == []  # type: ignore[arg-type]
    both = sysverbs.get_device_list(**_opts(tmp_path, "all"))  # type: ignore[arg-type]
    assert sorted(d.provider for d in both) == ["mlx5", "rxe"]


def test_a_static_binary_reads_no_config_and_loads_nothing(tmp_path: Path) -> None:
    """A config dir full of bad lines and RDMAV_DRIVERS naming a missing library make
    the dynamic libibverbs warn; a static one loads no driver, so nothing is said."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "x.driver").write_text("driver /nonexistent/libnosuch\nbogus line\n")
    opts = _opts(tmp_path, "mlx5")
    listed = {**opts, "sysfs_path": str(opts["sysfs_path"]), "dev_dir": str(opts["dev_dir"]),
              "config_dir": str(conf)}
    env = {"PYTHONPATH": str(ROOT), "RDMAV_DRIVERS": "nosuch", "PATH": "/usr/bin:/bin"}

    def run(options: dict[str, object]) -> subprocess.CompletedProcess[str]:
        code = ("import sysverbs\n"
                f"print([d.name for d in sysverbs.get_device_list(**{options!r})])\n")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, check=True)

    static = run(listed)
    assert (static.stdout, static.stderr) == ("['mlx5_0']\n", "")
    dynamic = run({**listed, "static_providers": None, "providers": "installed"})
    assert "libnosuch" in dynamic.stderr and "nosuch" in dynamic.stderr


def test_static_and_dynamic_libraries_are_separate(tmp_path: Path) -> None:
    opts = _opts(tmp_path, "rxe")
    static = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    dynamic = sysverbs.get_device_list(**dict(opts, static_providers=None, providers="builtin"))  # type: ignore[arg-type]
    assert [d.name for d in static] == ["rxe0"] and len(dynamic) == 2
    assert static[0] is not next(d for d in dynamic if d.name == "rxe0")


def test_the_data_file_is_what_the_tool_writes() -> None:
    """static.json is tools/check_static_providers.py's output (``--emit``) for it."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import check_static_providers as tool
    finally:
        sys.path.remove(str(ROOT / "tools"))
    text = (ROOT / "sysverbs/providers/static.json").read_text(encoding="utf-8")
    assert tool.dump(DATA) + "\n" == text
    assert DATA["comment"] == tool.COMMENT
    assert DATA["latest"] == max(known_releases())


def test_the_command_line_takes_it(tmp_path: Path) -> None:
    opts = _opts(tmp_path, None)
    base = [sys.executable, "-m", "sysverbs", "devices", "--source", "sysfs", "--rdma-core",
            "44", "--sysfs-path", str(opts["sysfs_path"]), "--dev-dir", str(opts["dev_dir"])]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "IBV_SHOW_WARNINGS": "1"}
    out = subprocess.run([*base, "--static-providers", "rxe"], capture_output=True, text=True,
                         env=env)
    assert out.returncode == 0 and out.stdout.splitlines()[2].split()[0] == "rxe0"
    assert out.stderr == ("libibverbs: Warning: no userspace device-specific driver found "
                          "for mlx5_0\n")
    bad = subprocess.run([*base, "--static-providers", "mlx6"], capture_output=True, text=True,
                         env=env)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("sysverbs devices: error: static_providers: 'mlx6' is not a "
                                 "provider of rdma-core 44")
