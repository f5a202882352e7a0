"""Bad input to the public entry points (issue 25, item 9): wrong types, NUL bytes,
surrogates, text cut inside a character, and sysfs trees with junk, loops, FIFOs,
vanished files and directories in place of files.

The contract (sysverbs/ground/errors.py): a wrong argument is a
:class:`~sysverbs.ground.errors.UsageError` (:class:`~sysverbs.ground.errors.WrongTypeError` for a
wrong type); bad sysfs content gives a result, or ``OSError``/a
:class:`~sysverbs.ground.errors.SysverbsError`; nothing else escapes, nothing hangs.  The
commands are in tests/test_bad_input_cli.py.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sysverbs
from sysverbs import placement
from sysverbs.devices.monitor import monitor  # sysverbs.devices.monitor is the module once imported
from sysverbs.ground import errors
from sysverbs.rank import environment, nccl
from sysverbs.rank.environment import rank_environment
from sysverbs.testing import FakeHost
from tests.bad_input import BREAK, CORRUPTIONS, attribute_files, build_host, copy_host, corrupt
from tests.fuzz.profiles import fuzz_settings

#: What is not text an argument can be.
NOT_TEXT = st.one_of(st.binary(max_size=8), st.integers(), st.floats(), st.booleans(),
                     st.lists(st.text(max_size=4), max_size=2), st.builds(object))
#: Text NCCL cannot be given: a NUL byte, or a surrogate os.fsdecode() never makes.
UNREPRESENTABLE = st.one_of(
    st.builds(lambda a, b: a + "\0" + b, st.text(max_size=5), st.text(max_size=5)),
    st.builds(lambda a, c: a + chr(c), st.text(max_size=5),
              st.integers(0xD800, 0xDC7F)))
#: Any text, surrogates (which st.characters() never draws) and NUL included, sometimes
#: past 63 bytes.
ANY_TEXT = st.text(st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr)),
                   max_size=90)
_LONG_NAMES = st.text(st.sampled_from("aé€𝄞\udcc3_0"), min_size=20, max_size=45)



def _with_fixtures(ci: int, deep: int) -> settings:
    """:func:`fuzz_settings` for a test that takes pytest fixtures (a module's host, or
    a temporary directory per example)."""
    return settings(fuzz_settings(ci, deep),
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _usage(func: Callable[[], Any]) -> None:
    with pytest.raises(errors.UsageError):
        func()


# ----------------------------------------------------------------------------- NCCL


def test_parse_hca_cut_inside_a_character() -> None:
    """``snprintf(prefix, 64, "%s", tok)`` keeps 63 bytes of ``"é" * 40`` (0xc3 0xa9 each):
    31 ``é`` and the lead byte 0xc3 of the 32nd; ``matchIf`` is
    ``strncmp(name, prefix, strlen(prefix))`` (src/misc/utils.cc).  So the names that
    match are those whose first 63 bytes are these: ``"é" * 31 + "à"`` (0xc3 0xa0)
    does, ``"é" * 31 + "x"`` and ``"é" * 31`` do not.  The prefix is the whole
    characters (a str that encodes back, no lone surrogate)."""
    f = nccl.parse_hca("é" * 40)
    (entry,) = f.entries
    assert entry.prefix == "é" * 31
    assert entry.prefix.encode("utf-8") == ("é" * 31).encode()
    assert f.matches("é" * 31 + "à") and f.matches("é" * 40)
    assert not f.matches("é" * 31 + "x") and not f.matches("é" * 31)
    exact = nccl.parse_hca("=" + "é" * 40)
    assert exact.matches(os.fsdecode(("é" * 31).encode() + b"\xc3"))  # those 63 bytes
    assert not exact.matches("é" * 40) and not exact.matches("é" * 31)
    lint = nccl.lint_hca("é" * 40, [nccl.IbPort("mlx5_0", 1, True, "InfiniBand", "")])
    for w in lint.warnings:
        (w.message + w.fix + w.entry).encode("utf-8")  # printable as UTF-8, JSON-safe
    assert "63 bytes" in next(w.message for w in lint.warnings if w.code == "too-long")


@fuzz_settings(ci=100, deep=1000)
@given(NOT_TEXT)
def test_parse_hca_not_text(value: Any) -> None:
    with pytest.raises(errors.WrongTypeError):
        nccl.parse_hca(value)
    with pytest.raises(errors.WrongTypeError):
        nccl.lint_hca(value, [])
    with pytest.raises(errors.WrongTypeError):
        nccl.socket_interface(["eth0"], value)


@fuzz_settings(ci=100, deep=1000)
@given(UNREPRESENTABLE)
def test_parse_hca_unrepresentable(value: str) -> None:
    for func in (lambda: nccl.parse_hca(value), lambda: nccl.lint_hca(value, []),
                 lambda: nccl.socket_interface(["eth0"], value),
                 lambda: nccl.socket_interface([value], "eth0")):
        _usage(func)


@fuzz_settings(ci=200, deep=2000)
@given(st.one_of(ANY_TEXT, _LONG_NAMES, st.lists(_LONG_NAMES, max_size=3).map(",".join)))
def test_parse_hca_any_text(value: str) -> None:
    """Any str: a UsageError exactly when no environment variable can hold it; else every
    entry's prefix is its name cut at 63 bytes on a character boundary, and the name
    itself matches (NCCL's prefix is the first bytes of the name)."""
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = None
    if raw is None or b"\0" in raw:
        _usage(lambda: nccl.parse_hca(value))
        return
    f = nccl.parse_hca(value)
    for e in f.entries:
        name = e.text.split(":", 1)[0]
        assert name.startswith(e.prefix)
        cut = e.prefix.encode("utf-8", "surrogateescape")
        assert len(cut) <= nccl.NAME_MAX
        assert name == e.prefix or len(cut) > nccl.NAME_MAX - 4
        assert nccl.HcaFilter(f.value, False, False, (e,)).matches(name)
    lint = nccl.lint_hca(value, [nccl.IbPort("mlx5_0", 1, True, "InfiniBand", "")])
    if all(not 0xD800 <= ord(c) <= 0xDFFF for c in value):
        for w in lint.warnings:  # no surrogate made by a cut
            (w.message + w.fix + w.entry).encode("utf-8")


class _Opaque:
    """An object of no relevant type, with a repr that names it the same in every
    process (pytest-xdist's workers must collect the same test ids)."""

    def __repr__(self) -> str:
        return "<opaque>"


@pytest.mark.parametrize("version", [
    "x", "", "2.x", b"2.30", [2, "a"], (2, 30, 4, 1), 2.5, (2, -1, 9), ["2"], True and (True,),
    _Opaque(), "1.0.0", 2000,
])
def test_nccl_version_bad(version: Any) -> None:
    _usage(lambda: nccl.parse_version(version))
    _usage(lambda: nccl.parse_hca("mlx5", nccl_version=version))


@pytest.mark.parametrize("bad", [
    lambda: nccl.parse_hca("a", max_entries=-1),
    lambda: nccl.parse_hca("a", max_entries="3"),  # type: ignore[arg-type]
    lambda: nccl.socket_interface("eth0"),
    lambda: nccl.socket_interface(3),  # type: ignore[arg-type]
    lambda: nccl.socket_interface([b"eth0"]),  # type: ignore[list-item]
    lambda: nccl.read_conf_file("NCCL_DEBUG=WARN"),  # type: ignore[arg-type]
    lambda: nccl.read_conf_file(None),  # type: ignore[arg-type]
    lambda: nccl.select_ib([("mlx5_0", 1)]),  # type: ignore[list-item]
    lambda: nccl.select_ib(3),  # type: ignore[arg-type]
    lambda: nccl.select_ib([], {"NCCL_IB_HCA": 3}),  # type: ignore[dict-item]
    lambda: nccl.select_ib([], [("NCCL_IB_HCA", "x")]),  # type: ignore[arg-type]
    lambda: nccl.lint_hca("mlx5", "mlx5_0"),  # type: ignore[arg-type]
    lambda: nccl.nccl_environment(3),  # type: ignore[arg-type]
    lambda: nccl.nccl_environment({}, root=3),  # type: ignore[arg-type]
    lambda: nccl.nccl_environment({}, root="/tmp/\0x"),
    lambda: nccl.parse_hca("mlx5").matches(b"mlx5_0"),  # type: ignore[arg-type]
], ids=lambda f: "")
def test_nccl_wrong_arguments(bad: Callable[[], Any]) -> None:
    _usage(bad)


def test_read_conf_file_bytes_like() -> None:
    assert nccl.read_conf_file(bytearray(b"A=b\n")) == nccl.read_conf_file(b"A=b\n")
    assert nccl.read_conf_file(memoryview(b"A=b\n")) == [("A", "b")]


@_with_fixtures(ci=100, deep=1000)
@given(st.dictionaries(st.sampled_from(["NCCL_CONF_FILE", "HOME", "NCCL_IB_HCA"]),
                       ANY_TEXT, max_size=3))
def test_nccl_environment_any_env(tmp_path_factory: pytest.TempPathFactory,
                                  env: dict[str, str]) -> None:
    """A NUL or odd surrogate in NCCL_CONF_FILE or HOME is a file NCCL cannot open."""
    root = tmp_path_factory.mktemp("conf")
    try:
        nccl.nccl_environment(env, root=str(root))
    except errors.UsageError:
        pass


# ----------------------------------------------------------------------------- paths

_PATH_OPTIONS = ("sysfs_path", "dev_dir", "config_dir")
_NOT_PATHS = st.one_of(st.integers(), st.floats(), st.lists(st.text(max_size=3), max_size=2),
                       st.builds(object), UNREPRESENTABLE)

_LISTERS: dict[str, Callable[..., Any]] = {
    "get_device_list": sysverbs.get_device_list,
    "diagnose": sysverbs.diagnose,
    "rdma_get_devices": sysverbs.rdma_get_devices,
    "effective_options": sysverbs.effective_options,
}


@pytest.mark.parametrize("func", list(_LISTERS), ids=list(_LISTERS))
@fuzz_settings(ci=40, deep=400)
@given(option=st.sampled_from(_PATH_OPTIONS), value=_NOT_PATHS)
def test_path_options_bad(func: str, option: str, value: Any) -> None:
    """A path that is no path, holds a NUL or a surrogate no file name decodes to."""
    _usage(lambda: _LISTERS[func](source="sysfs", **{option: value}))


@fuzz_settings(ci=60, deep=600)
@given(value=_NOT_PATHS)
def test_path_arguments_bad(value: Any) -> None:
    for func in (lambda: sysverbs.device_attributes("mlx5_0", sysfs_path=value),
                 lambda: sysverbs.device_location("mlx5_0", sysfs_path=value),
                 lambda: sysverbs.device_attributes(value),
                 lambda: placement.read_host(sysfs_path=value),
                 lambda: monitor(sysfs_path=value, backend="poll")):
        _usage(func)


@pytest.mark.parametrize("kw", [
    {"timeout": math.nan}, {"timeout": -1}, {"timeout": "1"}, {"poll_interval": math.nan},
    {"poll_interval": 0}, {"poll_interval": "0.5"}, {"backend": "nope"},
], ids=repr)
def test_monitor_bad_values(tmp_path: Path, kw: dict[str, Any]) -> None:
    """Failed before: ``timeout=nan`` passed the check and select() raised ValueError
    (``sysverbs watch --timeout nan`` printed a traceback)."""
    _usage(lambda: monitor(sysfs_path=str(tmp_path), **{"backend": "poll", **kw}))


# ----------------------------------------------------------------------------- placement


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> FakeHost:
    return build_host(tmp_path_factory.mktemp("bad-input") / "host")


def _opts(h: FakeHost) -> dict[str, Any]:
    return {"sysfs_path": str(h.sysfs), "dev_dir": str(h.dev),
            "proc_path": str(h.root / "proc")}


@pytest.mark.parametrize("rank", ["a", "0", 1.5, b"0", True, [0], -1, -(10 ** 20)], ids=repr)
def test_rank_bad(host: FakeHost, rank: Any) -> None:
    """Failed before: ``assign_rank(host, "a")`` with one visible GPU placed rank "a",
    ``-1`` took the last visible GPU, ``rank_environment(local_rank="a")`` returned an
    environment."""
    h = placement.read_host(**_opts(host))
    _usage(lambda: placement.assign_rank(h, rank, {}))
    _usage(lambda: rank_environment(local_rank=rank, environ={}, **_opts(host)))


@pytest.mark.parametrize("env", [3, "LOCAL_RANK=1", [("LOCAL_RANK", "1")], {"LOCAL_RANK": 1},
                                 {1: "1"}, {"CUDA_VISIBLE_DEVICES": b"0"}], ids=repr)
def test_environment_mapping_bad(host: FakeHost, env: Any) -> None:
    h = placement.read_host(**_opts(host))
    _usage(lambda: placement.local_rank(env))
    _usage(lambda: placement.visible_gpus(h, env))
    _usage(lambda: placement.assign_rank(h, None, env))
    _usage(lambda: rank_environment(environ=env, **_opts(host)))


@_with_fixtures(ci=60, deep=600)
@given(st.dictionaries(st.sampled_from(list(placement.RANK_VARIABLES)
                                       + ["CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"]),
                       ANY_TEXT, max_size=3))
def test_rank_variables_any_text(host: FakeHost, env: dict[str, str]) -> None:
    """LOCAL_RANK='a', a huge number, junk device lists: a rank or none, with a reason;
    a rank that has no GPU (none visible, or past the last) is a NotFoundError, and no
    rank on a host with several GPUs a UsageError for rank_environment."""
    h = placement.read_host(**_opts(host))
    rank, why = placement.local_rank(env)
    assert rank is None or rank >= 0
    assert why
    try:
        a = placement.assign_rank(h, None, env)
    except errors.NotFoundError as e:
        assert rank is not None and f"local rank {rank} has no GPU" in str(e)
    else:
        assert a.reason
    try:
        rank_environment(environ=env, **_opts(host))
    except errors.NotFoundError as e:
        assert "has no GPU" in str(e)
    except errors.UsageError as e:
        assert rank is None and "GPUs and no local rank" in str(e)


@pytest.mark.parametrize("nics", [3, "mlx5_0", b"mlx5_0", [b"mlx5_0"], [3], [("mlx5_0", "1")],
                                  [(b"mlx5_0", 1)], [()], [("mlx5_0", 1.0)]], ids=repr)
def test_nics_bad(host: FakeHost, nics: Any) -> None:
    """Failed before: ``[b"mlx5_0"]`` looked up devices '109', '108'... (LookupError),
    ``3`` and ``[3]`` raised TypeError."""
    _usage(lambda: rank_environment(nics, environ={}, **_opts(host)))
    _usage(lambda: environment.read_nics(nics, sysfs_path=str(host.sysfs)))


# ----------------------------------------------------------------------------- broken trees

_OUTCOMES = (OSError, errors.SysverbsError)


def _entry_points(h: FakeHost) -> dict[str, Callable[[], Any]]:
    o = _opts(h)
    listing = {"sysfs_path": o["sysfs_path"], "dev_dir": o["dev_dir"], "source": "sysfs",
               "providers": "builtin"}

    def each_device(func: Callable[..., Any]) -> Callable[[], Any]:
        return lambda: [func(n, sysfs_path=o["sysfs_path"])
                        for n in os.listdir(h.sysfs / "class" / "infiniband")]

    return {
        "get_device_list": lambda: sysverbs.get_device_list(**listing),
        "diagnose": lambda: sysverbs.diagnose(**listing),
        "rdma_get_devices": lambda: sysverbs.rdma_get_devices(**listing),
        "device_attributes": each_device(sysverbs.device_attributes),
        "device_location": each_device(sysverbs.device_location),
        "read_host": lambda: placement.render_matrix(placement.read_host(**o)),
        "assign_rank": lambda: placement.assign_rank(placement.read_host(**o), 0, {}),
        "rank_environment": lambda: rank_environment(environ={}, local_rank=0, **o),
        "rank_environment(nics)": lambda: rank_environment(["rxe0", "mlx5_0"], environ={},
                                                           **o),
        "predict_ib": lambda: nccl.predict_ib({}, **listing),
        "record_host": lambda: __import__("sysverbs.testing").testing.record_host(
            o["sysfs_path"]),
    }


_ENTRY_NAMES = list(_entry_points(FakeHost(Path("/"), Path("/"), Path("/"), ())))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_broken_tree(host: FakeHost, tmp_path: Path, kind: str) -> None:
    """Every file (or link) of the tree broken one way: every entry point gives a result
    or an OSError/SysverbsError, and returns (a FIFO is never opened for reading
    without O_NONBLOCK)."""
    h = copy_host(host, tmp_path / "h")
    corrupt(h, kind)
    for name, func in _entry_points(h).items():
        try:
            func()
        except _OUTCOMES:
            pass
        except LookupError:  # read_nics: a NIC named by the caller is not there
            assert name == "rank_environment(nics)"
        except Exception as e:  # pragma: no cover (the failure message)
            raise AssertionError(f"{name} on a {kind} tree: {e!r}") from e


@pytest.mark.timeout(120)
@_with_fixtures(ci=30, deep=300)
@given(data=st.data(), how=st.sampled_from(sorted(BREAK)),
       entry=st.sampled_from(_ENTRY_NAMES))
def test_one_broken_file(host: FakeHost, tmp_path_factory: pytest.TempPathFactory,
                         data: st.DataObject, how: str, entry: str) -> None:
    """One file broken (a GID, a port state, a PCI class...), or junk of any bytes in it:
    the entry point still answers."""
    h = copy_host(host, tmp_path_factory.mktemp("one") / "h")
    files = attribute_files(h.sysfs)
    target = data.draw(st.sampled_from(files), label="file")
    if data.draw(st.booleans(), label="any bytes"):
        target.write_bytes(data.draw(st.binary(max_size=80), label="bytes"))
    else:
        BREAK[how](target)
    try:
        _entry_points(h)[entry]()
    except _OUTCOMES:
        pass
    except LookupError:  # read_nics: a NIC named by the caller is not there
        assert entry == "rank_environment(nics)"


@pytest.mark.parametrize("name", ["ports/1/gids/1", "ports/1/gid_attrs/types/1",
                                  "ports/1/gid_attrs/ndevs/1"])
@pytest.mark.parametrize("how", sorted(BREAK))
@pytest.mark.timeout(30)
def test_rank_environment_gid_files(host: FakeHost, tmp_path: Path, name: str,
                                    how: str) -> None:
    """The GID files NCCL's scan reads (rxe0's IPv4 RoCE v2 GID at index 1), broken:
    the GID index is not chosen from it, or the whole result says why."""
    h = copy_host(host, tmp_path / "h")
    target = Path(os.path.realpath(h.sysfs / "class" / "infiniband" / "rxe0")) / name
    BREAK[how](target)
    env = rank_environment(["rxe0"], environ={}, **_opts(h))
    if not name.endswith("ndevs/1"):  # NCCL's scan reads the GID and its type only
        assert env.exports().get("NCCL_IB_GID_INDEX") != "1"


# ----------------------------------------------------------------------------- objects


@pytest.mark.parametrize("value", [None, "mlx5_0", b"mlx5_0", 3, ["mlx5_0"], _Opaque()],
                         ids=repr)
def test_device_arguments_bad(value: Any) -> None:
    """What is not a Device (libibverbs would dereference it).  Failed before: the
    getters raised AttributeError, close_device(3) AttributeError."""
    for func in (sysverbs.get_device_name, sysverbs.get_device_guid,
                 sysverbs.get_device_index, sysverbs.open_device, sysverbs.close_device):
        _usage(functools.partial(func, value))


@pytest.mark.parametrize("port", ["1", 1.0, None, b"1", [1]], ids=repr)
def test_port_attributes_port_bad(host: FakeHost, port: Any) -> None:
    """Failed before: ``"1"`` raised TypeError (%d format), 1.0 gave a result."""
    _usage(lambda: sysverbs.port_attributes("rxe0", port, sysfs_path=str(host.sysfs)))


@pytest.mark.parametrize("value", [3, None, b"P: /devices/x\n", ["P: /devices/x"], _Opaque()],
                         ids=repr)
def test_recording_arguments_bad(tmp_path: Path, value: Any) -> None:
    """Failed before: AttributeError/TypeError from each, and ``load(3)`` read (and
    closed) file descriptor 3."""
    from sysverbs import testing
    from sysverbs.testing import umockdev

    for func in (umockdev.parse, umockdev.unescape, testing.fixture_path,
                 umockdev.load, lambda v: testing.materialize(v, tmp_path / "m")):
        _usage(functools.partial(func, value))


@fuzz_settings(ci=100, deep=1000)
@given(ANY_TEXT)
def test_recording_any_text(text: str) -> None:
    """An attribute value of any text: bytes, or a RecordingError naming why (a record
    with it likewise).  Failed before: ``unescape("\\ud800")`` raised
    UnicodeEncodeError."""
    from sysverbs.testing import umockdev

    for func in (umockdev.unescape,
                 lambda t: umockdev.parse(f"P: /devices/x\nE: SUBSYSTEM=net\nA: a={t}\n")):
        try:
            func(text)
        except errors.RecordingError:
            pass


@pytest.mark.parametrize("value", [3, "x", None, [1], b"x"], ids=repr)
def test_models_of_the_wrong_type(host: FakeHost, value: Any) -> None:
    """What is not a Topology, a Gpu, a Nic or a Device where one is taken.  Failed before:
    AttributeError or TypeError from each."""
    from sysverbs.devices import enrich
    from sysverbs.testing import record_host

    h = placement.read_host(**_opts(host))
    calls: list[Callable[[], Any]] = [
        lambda: placement.host_json(value), lambda: placement.render_matrix(value),
        lambda: placement.visible_gpus(value, {}), lambda: placement.assign(value),
        lambda: environment.predict(value, {}), lambda: enrich.vendor_model(value),
        lambda: enrich.udev_properties(value),
    ]
    if value is not None:
        calls += [lambda: placement.assign(h, value), lambda: environment.predict([value], {})]
    if not isinstance(value, (str, bytes)):  # those are paths
        calls.append(lambda: record_host(value))
    for func in calls:
        _usage(func)


@pytest.mark.parametrize("value", [3, "x", b"x", ["x"]], ids=repr)
def test_set_stderr_bad(value: Any) -> None:
    """Failed before: accepted, and the first libibverbs message then raised
    AttributeError (``int`` has no ``flush``) out of get_device_list()."""
    from sysverbs.ground import messages

    saved = messages._stream  # "stderr": whatever sys.stderr is when a message comes
    try:
        _usage(lambda: sysverbs.set_stderr(value))
    finally:
        messages._stream = saved


@pytest.mark.parametrize("value", [3, None, 1.5, ["x"], "\ud800", "x\0y"], ids=repr)
def test_rdma_cm_abi_bad(value: Any) -> None:
    """Failed before: ``rdma_cm_abi(3)`` TypeError from os.fsencode."""
    from sysverbs.devices import rdmacm

    _usage(lambda: rdmacm.rdma_cm_abi(value))
