"""sysverbs.ground.errors: one base per kind, and the built-in classes callers caught before."""

from __future__ import annotations

import errno
import inspect
import pickle
from pathlib import Path

import pytest

import sysverbs
from sysverbs import testing
from sysverbs.ground import errors


def _classes() -> list[type[BaseException]]:
    return [getattr(errors, n) for n in errors.__all__]


def test_every_class_has_one_base_of_its_kind() -> None:
    for cls in _classes():
        assert issubclass(cls, (errors.SysverbsError, errors.SysverbsWarning)), cls
        assert not (issubclass(cls, errors.SysverbsError)
                    and issubclass(cls, errors.SysverbsWarning)), cls


def test_no_other_module_defines_an_exception_class() -> None:
    import ast

    root = Path(sysverbs.__file__).parent
    for path in root.rglob("*.py"):
        if path.name == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b) for b in node.bases}
                assert not bases & {"Exception", "ValueError", "TypeError", "KeyError",
                                    "OSError", "UserWarning", "Warning"}, (path, node.name)


def test_the_builtin_classes_callers_caught_still_match() -> None:
    assert issubclass(errors.DeviceFreedError, ReferenceError)
    assert issubclass(errors.UsageError, ValueError)
    assert issubclass(errors.WrongTypeError, TypeError)
    assert issubclass(errors.UnknownFixtureError, KeyError)
    assert issubclass(errors.RecordLimitError, ValueError)
    assert issubclass(errors.UdevUnavailable, (errors.SourceUnavailable, OSError))


def test_the_public_names_are_the_errors_modules() -> None:
    for name in ("DeviceFreedError", "SourceUnavailable", "UdevUnavailable", "SysverbsError",
                 "UsageError", "KernelAbiFatal", "SysverbsWarning"):
        assert getattr(sysverbs, name) is getattr(errors, name)
        assert name in sysverbs.__all__


def test_udev_unavailable_is_an_oserror_with_errno_and_pickles() -> None:
    e = errors.UdevUnavailable("pyudev is not installed")
    assert e.errno == errno.EPROTONOSUPPORT and str(e) == "pyudev is not installed"
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is errors.UdevUnavailable
    assert (back.errno, str(back)) == (e.errno, str(e))


def test_an_unknown_fixture_is_an_unknown_fixture_error(tmp_path: Path) -> None:
    with pytest.raises(errors.UnknownFixtureError, match="no bundled fixture 'nope'") as e:
        testing.fixture_path("nope")
    assert str(e.value).startswith("no bundled fixture 'nope'")  # not KeyError's quoting


def test_the_cli_reports_an_unknown_fixture_as_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    from sysverbs.cli import main

    assert main(["devices", "--fixture", "nope"]) == 2
    assert capsys.readouterr().err.startswith(
        "sysverbs devices: error: --fixture 'nope': no such bundled host (sysverbs fixtures")


def test_option_mistakes_are_usage_errors() -> None:
    with pytest.raises(errors.UsageError):
        sysverbs.get_device_list(source="nowhere")
    with pytest.raises(errors.WrongTypeError):
        sysverbs.get_device_list(sysfs_path=3)  # type: ignore[arg-type]
    with pytest.raises(errors.UsageError):
        sysverbs.effective_options(rdma_core="nope")


def test_errors_imports_nothing() -> None:
    from sysverbs.ground import errors as implementation

    assert errors.__all__ == implementation.__all__
    src = inspect.getsource(implementation)
    assert [ln for ln in src.splitlines()
            if ln.startswith(("import ", "from ")) and "__future__" not in ln] == [
        "import errno as _errno"]
