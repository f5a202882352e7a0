"""tools/check_provider_history.py's C preprocessor and constant expressions, on small
inputs, against the real preprocessor (``cpp -P``) where it has an answer."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "check_provider_history", ROOT / "tools" / "check_provider_history.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


tool = _tool()


def preprocess(files: dict[str, str], main: str = "main.c") -> list[str]:
    def read(path: str) -> Optional[str]:
        return files.get(path)

    return list(tool.Preprocessor(read).process(main))


def real_cpp(tmp_path: Path, files: dict[str, str], main: str = "main.c") -> list[str]:
    cpp = shutil.which("cpp")
    require(None if cpp else "no cpp on PATH (apt-get install gcc)", "the C preprocessor")
    assert cpp is not None
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    out = subprocess.run([cpp, "-P", "-undef", "-nostdinc", "-I", str(tmp_path),
                          str(tmp_path / main)], capture_output=True, text=True, check=True)
    return list(tool.tokenize(out.stdout))


CASES = {
    "object_and_function_macros": """
#define VENDOR 0x15b3
#define PCI(v, d) {v, d, #d}
#define TWICE(x) PCI(x, x)
struct t[] = { PCI(VENDOR, 0x1017), TWICE(3) };
""",
    "paste_and_variadic": """
#define NAME(x) prov_ ## x ## _ops
#define LIST(first, ...) first, __VA_ARGS__
#define GNU(args...) f(args)
int NAME(mlx5); int v[] = { LIST(1, 2, 3) }; GNU(a, b);
""",
    "conditionals": """
#define HAVE_A 1
#if defined(HAVE_A) && HAVE_A > 0
a_yes
#elif defined HAVE_B
b_yes
#else
none
#endif
#ifndef HAVE_B
no_b
#endif
#if (1 << 4) == 16 && !0 && (7 % 4 == 3) && (-1 < 0) && (10 / 3 == 3)
arith
#endif
#undef HAVE_A
#ifdef HAVE_A
still
#endif
""",
    "comments_and_continuations": """
#define LONG(a) a + \\
   a /* a comment */ + 1 // another
int x = LONG(2); /* multi
line */ int y;
""",
    "self_reference_stops": """
#define loop loop + 1
#define f(x) f(x) * 2
int a = loop; int b = f(3);
""",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_expands_as_cpp_does(tmp_path: Path, name: str) -> None:
    files = {"main.c": CASES[name]}
    assert preprocess(files) == real_cpp(tmp_path, files)


def test_includes_quoted_relative_then_from_the_top(tmp_path: Path) -> None:
    files = {
        "providers/mlx5/main.c": '#include "ids.h"\n#include "util/common.h"\nint d = DEV;\n',
        "providers/mlx5/ids.h": "#define DEV VENDOR + 1\n",
        "util/common.h": "#define VENDOR 0x15b3\n",
    }
    assert preprocess(files, "providers/mlx5/main.c") == ["int", "d", "=", "0x15b3", "+",
                                                          "1", ";"]


def test_includes_kernel_headers_with_the_old_fixup_fallback() -> None:
    new = {"main.c": "#include <rdma/ib_user_verbs.h>\nint v = ABI;\n",
           "kernel-headers/rdma/ib_user_verbs.h": "#define ABI 6\n"}
    old = {"main.c": "#include <rdma/ib_user_verbs.h>\nint v = ABI;\n",
           "buildlib/fixup-include/rdma-ib_user_verbs.h": "#define ABI 5\n"}
    assert preprocess(new)[-2] == "6" and preprocess(old)[-2] == "5"
    assert preprocess({"main.c": "#include <stdio.h>\nint x;\n"}) == ["int", "x", ";"]


@pytest.mark.parametrize(("expr", "value"), [
    ("0x10 + 010 + 10", 34),
    ("1u << 31", 2147483648),
    ("(uint16_t)0x1234 + (unsigned int)1", 0x1235),
    ("sizeof(void *) * 2 + sizeof(int)", 20),
    ("1 ? 2 : 3", 2),
    ("0 ? 2 : 1 ? 4 : 5", 4),
    ("~0 & 0xff", 255),
    ("7 / 2", 3),
    ("'A'", 65),
    ("(1 == 1) && (2 != 3) || 0", 1),
    ("NAMED + 1", 43),
])
def test_eval_int(expr: str, value: int) -> None:
    assert tool.eval_int(tool.tokenize(expr), {"NAMED": 42}) == value


def test_eval_int_refuses_unknown_names_unless_told() -> None:
    with pytest.raises(tool.ExprError):
        tool.eval_int(tool.tokenize("UNKNOWN + 1"), {})
    assert tool.eval_int(tool.tokenize("UNKNOWN + 1"), {}, undefined_is_zero=True) == 1
    with pytest.raises(tool.ExprError):
        tool.eval_int(tool.tokenize("x = 1"), {"x": 1})
