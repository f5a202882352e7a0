"""Values of sysverbs/providers/table.py that `make mutation` found untested: the
release argument, the provider ABI suffix, the installed libibverbs' file and release
(checked against the real library and providers on this machine)."""
from __future__ import annotations

import glob
import os
import re
import subprocess
from pathlib import Path

import pytest

from sysverbs.ground.errors import UsageError, WrongTypeError
from sysverbs.providers import table
from tests.conftest import require

FIRST, LAST = table.known_releases()[0], table.latest_release()


def test_known_releases_span_both_ends() -> None:
    releases = table.known_releases()
    assert (releases[0], releases[-1]) == (12, LAST)
    assert len(releases) == LAST - 12 + 1


@pytest.mark.parametrize("text,release", [
    ("44", 44), (" V44.1 ", 44), ("v50", 50), ("latest", LAST), (" Latest ", LAST),
    (FIRST, FIRST), (LAST, LAST), (str(FIRST), FIRST),
])
def test_resolve_release(text: table.Release, release: int) -> None:
    assert table.resolve_release(text) == release


@pytest.mark.parametrize("bad,error", [
    (FIRST - 1, UsageError), (LAST + 1, UsageError), ("4x", UsageError), ("", UsageError),
    (True, WrongTypeError), (44.0, WrongTypeError), (b"44", WrongTypeError),
])
def test_resolve_release_refuses(bad: object, error: type) -> None:
    with pytest.raises(error):
        table.resolve_release(bad)  # type: ignore[arg-type]


def test_resolve_release_none_is_the_installed_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table, "installed_release", lambda: 44)
    assert table.resolve_release(None) == 44
    monkeypatch.setattr(table, "installed_release", lambda: LAST + 5)
    assert table.resolve_release(None) == LAST
    monkeypatch.setattr(table, "installed_release", lambda: None)
    assert table.resolve_release(None) == LAST


@pytest.mark.parametrize("release,pabi", [
    (11, 0), (12, 2), (14, 2), (15, 15), (24, 22), (25, 25), (33, 33), (34, 34), (44, 34),
    (56, 34), (57, 57), (LAST, LAST),
])
def test_pabi_for(release: int, pabi: int) -> None:
    assert table.pabi_for(release) == pabi


def test_installed_release_and_pabi_match_the_real_libibverbs() -> None:
    """The release in the real library's name (dpkg's version of libibverbs1) and the
    ABI suffix of the real provider libraries beside it."""
    try:
        version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libibverbs1"],
                                 capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        require(str(e), "dpkg's libibverbs1")
        return
    release = int(version.split(".")[0])
    assert table.installed_release() == release
    lib = table.libibverbs_library()
    assert lib is not None
    real = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    linked = re.search(r"libibverbs\.so\.1 \(.*x86-64.*\) => (\S+)", real)
    if linked:
        assert os.path.realpath(lib) == os.path.realpath(linked.group(1))
    suffixes = {re.sub(r".*-rdmav(\d+)\.so$", r"\1", p)
                for p in glob.glob(os.path.join(table.provider_dir(), "lib*-rdmav*.so"))}
    assert suffixes == {str(table.pabi_for(release))}


def test_lib_dirs_multiarch_first() -> None:
    dirs = table.lib_dirs()
    assert dirs[0].startswith("/usr/lib/") and dirs[1].startswith("/lib/")
    assert dirs[0][len("/usr/lib/"):] == dirs[1][len("/lib/"):] != ""
    assert dirs[2:] == ["/usr/lib64", "/lib64", "/usr/lib", "/lib"]


def _lib(monkeypatch: pytest.MonkeyPatch, *dirs: Path) -> str | None:
    monkeypatch.setattr(table, "lib_dirs", lambda: [str(d) for d in dirs])
    monkeypatch.delitem(table._loaded, "lib", raising=False)
    found = table.libibverbs_library()
    monkeypatch.delitem(table._loaded, "lib", raising=False)
    return found


def test_libibverbs_library_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty, linked, listed, dangling = (tmp_path / n for n in ("e", "l", "s", "d"))
    for d in (empty, linked, listed, dangling):
        d.mkdir()
    (empty / "libibverbs.so.1.14").write_bytes(b"")  # no dot after the prefix's number
    (linked / "libibverbs.so.1.14.50.0").write_bytes(b"")
    (linked / "libibverbs.so.1.14.99.0").write_bytes(b"")
    (linked / "libibverbs.so.1").symlink_to("libibverbs.so.1.14.50.0")
    (listed / "libibverbs.so.1.14.40.0").write_bytes(b"")
    (listed / "libibverbs.so.1.14.45.0").write_bytes(b"")
    (listed / "libibverbs.so.1.14.41.0").write_bytes(b"")
    (dangling / "libibverbs.so.1").symlink_to("libibverbs.so.1.14.60.0")
    (dangling / "libibverbs.so.1.14.30.0").write_bytes(b"")
    # the link's target, not the largest name; the first directory that has one
    lib = "libibverbs.so.1.14."
    assert _lib(monkeypatch, empty, linked, listed) == str(linked / (lib + "50.0"))
    assert _lib(monkeypatch, tmp_path / "none", listed, linked) == str(listed / (lib + "45.0"))
    # a link to no file: the listing decides
    assert _lib(monkeypatch, dangling, linked) == str(dangling / (lib + "30.0"))
    assert _lib(monkeypatch, empty, tmp_path / "none") is None


@pytest.mark.parametrize("name,release", [
    ("libibverbs.so.1.14.44.0", 44), ("libibverbs.so.1.14.44", 44), ("libibverbs.so.1.14", None),
    ("libibverbs.so.1.14.44.0.1", None), ("libibverbs.so.1.x.44", None),
    ("libibverbs.so.1.14.4\u0664", None), ("libibverbs.so.1.14.44.x", None),
])
def test_installed_release_from_the_name(monkeypatch: pytest.MonkeyPatch, name: str,
                                         release: int | None) -> None:
    monkeypatch.setattr(table, "libibverbs_library", lambda: "/usr/lib/x/" + name)
    assert table.installed_release() == release
    assert table.provider_dir() == "/usr/lib/x/libibverbs"


def test_no_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table, "libibverbs_library", lambda: None)
    monkeypatch.setattr(table, "lib_dirs", lambda: ["/a", "/b"])
    assert table.installed_release() is None
    assert table.provider_dir() == "/a/libibverbs"


def test_match_entry_defaults_and_patterns() -> None:
    assert tuple(table.MatchEntry("pci")) == ("pci", 0, 0, b"", 0, "")
    entry = table.MatchEntry("driver_id", driver_id=7, driver_id_name="RDMA_DRIVER_X")
    assert (entry.driver_id, entry.driver_id_name) == (7, "RDMA_DRIVER_X")
    for bad in (b"a[b", b"a\\b", b"a\0b"):
        with pytest.raises(ValueError):
            table._checked_pattern(bad)
    assert table._checked_pattern(b"of:N*T*") == b"of:N*T*"


def test_render_data_module_default_is_providers_json() -> None:
    assert table.render_data_module() == table.render_data_module(table._data())


def test_lib_dirs_multiarch_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import sysconfig

    monkeypatch.setattr(sys.implementation, "_multiarch", "m-a", raising=False)
    assert table.lib_dirs()[:2] == ["/usr/lib/m-a", "/lib/m-a"]
    monkeypatch.setattr(sys.implementation, "_multiarch", "")
    monkeypatch.setattr(sysconfig, "get_config_var", {"MULTIARCH": "s-c"}.get)
    assert table.lib_dirs()[0] == "/usr/lib/s-c"
    monkeypatch.setattr(sysconfig, "get_config_var", {}.get)
    assert table.lib_dirs()[1] == f"/lib/{os.uname().machine}-linux-gnu"
