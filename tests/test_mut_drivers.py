"""Values of sysverbs/providers/drivers.py that `make mutation` found untested by the
fast tests: libibverbs' config-file parsing (read_config_file), the provider library
names, what dlopen() says of a file, and the load order (tests/test_oracle_core.py
compares the same paths with the real libibverbs)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from sysverbs.ground.messages import ConfigWarning, DriverLoadWarning
from sysverbs.providers import drivers
from sysverbs.providers.table import provider_table

ELF = b"\x7fELF" + b"\0" * 60
NOFILE = b"cannot open shared object file: No such file or directory"


@pytest.mark.parametrize("text,end", [
    (b"abc def", 3), (b"abc\tdef", 3), (b"ab\ncd e", 2), (b"a\tb c", 1), (b"a b\tc\nd", 1),
    (b"abc", 3), (b"", 0), (b"\nabc", 0), (b" a", 0),
])
def test_token_end(text: bytes, end: int) -> None:
    assert drivers._token_end(text) == end


@pytest.mark.parametrize("data,lines", [
    (b"a\nb", [b"a\n", b"b"]), (b"a\n", [b"a\n"]), (b"", []), (b"siw\r\n\n", [b"siw\r\n", b"\n"]),
])
def test_lines(data: bytes, lines: list[bytes]) -> None:
    assert drivers._lines(data) == lines


def _bad(field: bytes) -> tuple[bytes, type]:
    return (b"Warning: ignoring bad config directive '%s' in file 'P'.\n" % field, ConfigWarning)


@pytest.mark.parametrize("data,names,bad", [
    (b"# comment\n\n  \t# indented\ndriver rxe extra words\n", [b"rxe"], []),
    (b"driver mlx5\nDriver efa\nfoo bar\n", [b"mlx5"], [b"Driver", b"foo"]),
    (b"driver\n   \ndriver siw\r\ndriver", [b"", b"siw\r"], [b"driver"]),
    (b"driver \t efa\tx\ndriver a\0b\n#driver c\n", [b"efa", b"a"], []),
    (b"\tdriver  hns", [b"hns"], []), (b"driver \t\n", [b""], []),
])
def test_parse_config_file(data: bytes, names: list[bytes], bad: list[bytes]) -> None:
    assert drivers.parse_config_file(data, b"P") == (names, [_bad(f) for f in bad])


@pytest.mark.parametrize("path,name", [
    (b"/x/libmlx5-rdmav34.so", b"mlx5"), (b"libhns-rdmav-rdmav2.so", b"hns-rdmav"),
    (b"libmlx5-rdmav.so", b""), (b"libfoo.so", b""), (b"mlx5-rdmav34.so", b""),
    (b"libmlx5-rdmav34.so.1", b""), (b"libmlx5-rdmav3x.so", b""), (b"libmlx5.so", b""),
    (b"libabcde12.so", b""),
])
def test_library_name(path: bytes, name: bytes) -> None:
    assert drivers._library_name(path) == name


def test_dl_error(tmp_path: Path) -> None:
    d = bytes(tmp_path)
    (tmp_path / "short").write_bytes(ELF[:63])
    (tmp_path / "text").write_bytes(b"x" * 64)
    (tmp_path / "elf").write_bytes(ELF)
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    assert drivers._dl_error(d + b"/elf") is None
    assert drivers._dl_error(d + b"/short") == b"file too short"
    assert drivers._dl_error(d + b"/text") == b"invalid ELF header"
    assert drivers._dl_error(d + b"/dir") == b"cannot read file data: Is a directory"
    assert drivers._dl_error(d + b"/fifo") == b"invalid ELF header"
    assert drivers._dl_error(d + b"/none") == NOFILE
    assert drivers._dl_error(d + b"/a\0b") == NOFILE
    assert drivers._dl_error(d + b"/" + b"x" * 300) == \
        b"cannot open shared object file: File name too long"


def _names(load: drivers.DriverLoad) -> list[str]:
    return [p.name for p in load.providers]


def test_load_order_and_messages(tmp_path: Path) -> None:
    pdir, other, conf = tmp_path / "p", tmp_path / "o", tmp_path / "c"
    for d in (pdir, other, conf):
        d.mkdir()
    (pdir / "libmlx5-rdmav34.so").write_bytes(ELF)
    (pdir / "libmlx4-rdmav34.so").write_bytes(ELF)
    (other / "libefa-rdmav34.so").write_bytes(ELF)
    (other / "librxe-rdmav34.so").write_bytes(ELF[:10])
    (conf / "mlx5.driver").write_bytes(b"driver mlx5\n")
    (conf / "x.driver").write_bytes(b"driver mlx4\ndriver bnxt_re\n")
    (conf / "sub").mkdir()
    table = provider_table(44)

    def load(env: dict[str, str], trust: bool = True) -> drivers.DriverLoad:
        return drivers.load_drivers(table, 44, bytes(conf), env, trust, libdir=bytes(pdir))

    base = load({})
    assert sorted(_names(base)) == ["mlx4", "mlx5"]
    missing = b"libbnxt_re-rdmav34.so"
    assert base.messages == ((b"Warning: couldn't load driver '%s': %s: %s\n"
                              % (missing, missing, NOFILE), DriverLoadWarning),)
    # a directory without the library and one that does not exist: the search goes on
    env = {"LD_LIBRARY_PATH": f"{conf}::/nonexistent:{other}", "RDMAV_DRIVERS": "efa;mlx5",
           "IBV_DRIVERS": "rxe"}
    first = load(env)
    assert _names(first)[:2] == ["efa", "mlx5"] and sorted(_names(first)[2:]) == ["mlx4"]
    assert first.messages == base.messages
    del env["RDMAV_DRIVERS"]
    rxe = load(env)
    assert _names(rxe) == _names(base)
    assert rxe.messages[0] == (b"Warning: couldn't load driver 'librxe-rdmav34.so': "
                               b"librxe-rdmav34.so: file too short\n", DriverLoadWarning)
    assert load(env, trust=False) == base
    path = os.fsencode(other / "libefa")
    assert _names(load({"RDMAV_DRIVERS": os.fsdecode(path)}))[0] == "efa"
    gone = load({"RDMAV_DRIVERS": "/nonexistent/libefa"})
    assert gone.messages[0] == (b"Warning: couldn't load driver '/nonexistent/libefa-rdmav34.so'"
                                b": /nonexistent/libefa-rdmav34.so: " + NOFILE + b"\n",
                                DriverLoadWarning)


def test_config_dir_unreadable(tmp_path: Path) -> None:
    d = bytes(tmp_path / "none")
    assert drivers._read_config(d) == (
        [], [(b"Warning: couldn't open config directory '%s'.\n" % d, ConfigWarning)])
    conf = tmp_path / "c"
    conf.mkdir()
    (conf / "a.driver").write_bytes(b"driver a\ndriver b\n")
    (conf / "dangling.driver").symlink_to("/nonexistent/x")
    (conf / "big.driver").write_bytes(b"#" * 65535 + b"\ndriver c\n" + b"#" * 65536 + b"\n")
    names, messages = drivers._read_config(bytes(conf))
    assert sorted(names) == [b"a", b"b", b"c"]
    # reversed: b before a
    assert names.index(b"b") < names.index(b"a")
    assert messages == [(b"Warning: couldn't stat config file '%s/dangling.driver'.\n"
                         % bytes(conf), ConfigWarning)]


def test_modes() -> None:
    table = provider_table(44)
    assert drivers.load_for_mode("builtin", 44, b"/nonexistent", {}) == (tuple(table), ())
    assert drivers.builtin_drivers(table).providers == tuple(table)


def test_a_config_file_that_cannot_be_opened(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """libibverbs warns and goes on to the next file (as a user, a file of mode 000)."""
    for name in ("a.driver", "b.driver", "c.driver"):
        (tmp_path / name).write_bytes(b"driver %s\n" % name[:1].encode())
    real_open = os.open

    def open_(path: bytes, flags: int, *args: int) -> int:
        if path.endswith(b"/b.driver"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(drivers.os, "listdir", lambda d: [b"a.driver", b"b.driver", b"c.driver"])
    monkeypatch.setattr(drivers.os, "open", open_)
    names, messages = drivers._read_config(bytes(tmp_path))
    assert names == [b"c", b"a"]
    assert messages == [(b"Warning: couldn't read config file %s/b.driver.\n" % bytes(tmp_path),
                         ConfigWarning)]


def test_a_config_file_that_fails_to_read(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A read error (EIO) ends that file with what was read: no warning, no exception."""
    (tmp_path / "a.driver").write_bytes(b"driver a\n")

    def read(fd: int, n: int) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(drivers.os, "read", read)
    assert drivers._read_config(bytes(tmp_path)) == ([], [])


def test_a_library_that_fails_to_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "elf").write_bytes(ELF)

    def read(fd: int, n: int) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(drivers.os, "read", read)
    assert drivers._dl_error(bytes(tmp_path / "elf")) == b"file too short"

    def open_(path: bytes, flags: int) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(drivers.os, "open", open_)
    assert drivers._dl_error(bytes(tmp_path / "elf")) == \
        b"cannot open shared object file: Permission denied"


def test_a_relative_path_is_opened_as_is(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A name with a "/" inside is one path, from the working directory: its error is
    the message, not the search's "No such file"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "libx").write_bytes(b"")
    soname = b"libx/efa-rdmav34.so"
    load = drivers.load_drivers(provider_table(44), 44, bytes(tmp_path / "none"),
                                {"RDMAV_DRIVERS": "x/efa"}, True, libdir=bytes(tmp_path))
    assert load.messages[1] == (b"Warning: couldn't load driver '%s': %s: cannot open shared "
                                b"object file: Not a directory\n" % (soname, soname),
                                DriverLoadWarning)
