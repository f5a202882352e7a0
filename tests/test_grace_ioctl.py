"""The Data Direct uverbs ioctl (sysverbs/devices/datadirect.py): the request bytes it
packs, byte by byte, and its layout against the C compiler's reading of the kernel's
uAPI headers installed here (``/usr/include/rdma``, linux-libc-dev; the two Data Direct
ids are checked where the headers are 6.12 or newer).  The call itself runs in the
kernel lab (tests/kernel: rxe and siw answer it with an errno)."""

from __future__ import annotations

import errno
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from sysverbs.devices import datadirect as dd
from tests.conftest import require

C_PROGRAM = r"""
#include <stdio.h>
#include <stddef.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/mlx5-abi.h>
#include <rdma/mlx5_user_ioctl_cmds.h>
int main(void) {
    printf("%zu %zu %lu %zu %zu %d %d %d %d %d %d %d\n",
           sizeof(struct ib_uverbs_ioctl_hdr), sizeof(struct ib_uverbs_attr),
           (unsigned long)RDMA_VERBS_IOCTL, sizeof(struct mlx5_ib_alloc_ucontext_req_v2),
           offsetof(struct mlx5_ib_alloc_ucontext_req_v2, lib_caps),
           UVERBS_METHOD_GET_CONTEXT, UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT,
           RDMA_DRIVER_MLX5, (int)(MLX5_LIB_CAP_4K_UAR | MLX5_LIB_CAP_DYN_UAR),
           RDMA_DRIVER_RXE, RDMA_DRIVER_SIW);
    return 0;
}
"""
DD_PROGRAM = r"""
#include <stdio.h>
#include <rdma/mlx5_user_ioctl_cmds.h>
int main(void) {
    printf("%d %d\n", MLX5_IB_METHOD_GET_DATA_DIRECT_SYSFS_PATH,
           MLX5_IB_ATTR_GET_DATA_DIRECT_SYSFS_PATH);
    return 0;
}
"""


def test_data_direct_request_bytes() -> None:
    """24-byte header (length 40, object DEVICE 0, method 0x1001, one attribute,
    reserved 0, driver MLX5 1), then the attribute: id 0x1000, len, flags 0, 0, the
    buffer's address."""
    got = dd.data_direct_request(0x1122334455667788, 4096)
    assert got == bytes.fromhex(
        "2800" "0000" "0110" "0100" "0000000000000000" "01000000" "00000000"
        "0010" "0010" "0000" "0000" "8877665544332211")


def test_get_context_request_bytes() -> None:
    """mlx5: the UHW in (32-byte request) and out attributes; others: none."""
    got = dd.get_context_request(0x10, 0x20, 512)
    assert got == bytes.fromhex(
        "3800" "0000" "0300" "0200" "0000000000000000" "01000000" "00000000"
        "0010" "2000" "0000" "0000" "1000000000000000"
        "0110" "0002" "0000" "0000" "2000000000000000")
    assert dd.get_context_request(0, 0, 0, dd.IDS["RDMA_DRIVER_RXE"]) == bytes.fromhex(
        "1800" "0000" "0300" "0000" "0000000000000000" "0e000000" "00000000")
    req = struct.pack(dd.MLX5_UCONTEXT_REQ, *dd.MLX5_UCONTEXT_DEFAULTS)
    assert req == bytes.fromhex("10000000" "04000000" "00000000" "00000000" "01" "00"
                                "0000" "00000000" "0300000000000000")


def _compile_and_run(tmp: Path, source: str) -> list[int]:
    cc = shutil.which("cc") or shutil.which("gcc")
    require(None if cc else "no C compiler", "the C compiler over the uAPI headers")
    require(None if Path("/usr/include/rdma/rdma_user_ioctl_cmds.h").exists()
            else "no /usr/include/rdma (linux-libc-dev)", "the kernel's uAPI headers")
    assert cc is not None
    (tmp / "p.c").write_text(source)
    subprocess.run([cc, "-o", str(tmp / "p"), str(tmp / "p.c")], check=True, timeout=60)
    out = subprocess.run([str(tmp / "p")], check=True, capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


def test_layout_is_the_headers(tmp_path: Path) -> None:
    """Sizes, the ioctl number and the ids, as the C compiler reads the installed
    uAPI headers."""
    hdr, attr, ioctl, req, caps_at, getctx, uhw_in, uhw_out, mlx5, caps, rxe, siw = \
        _compile_and_run(tmp_path, C_PROGRAM)
    assert (rxe, siw) == (dd.IDS["RDMA_DRIVER_RXE"], dd.IDS["RDMA_DRIVER_SIW"])
    assert (hdr, attr) == (struct.calcsize("<" + "".join(f for _, f in dd.HEADER)),
                           struct.calcsize("<" + "".join(f for _, f in dd.ATTR)))
    assert ioctl == dd.RDMA_VERBS_IOCTL
    assert req == struct.calcsize(dd.MLX5_UCONTEXT_REQ) and caps_at == 24
    assert (getctx, uhw_in, uhw_out, mlx5, caps) == (
        dd.GET_CONTEXT_METHOD, dd.IDS["UVERBS_ATTR_UHW_IN"], dd.IDS["UVERBS_ATTR_UHW_OUT"],
        dd.IDS["RDMA_DRIVER_MLX5"], dd.IDS["MLX5_LIB_CAPS"])


def test_data_direct_ids_where_the_headers_have_them(tmp_path: Path) -> None:
    """The two Data Direct ids, where the installed headers are 6.12 or newer (Debian
    12's 6.1 has none: then they were checked by hand against linux-libc-dev 6.12.95,
    the module's text)."""
    text = Path("/usr/include/rdma/mlx5_user_ioctl_cmds.h")
    if text.exists() and "DATA_DIRECT_SYSFS_PATH" in text.read_text():
        assert _compile_and_run(tmp_path, DD_PROGRAM) == [dd.DATA_DIRECT_METHOD,
                                                          dd.DATA_DIRECT_ATTR]
    assert (dd.DATA_DIRECT_METHOD, dd.DATA_DIRECT_ATTR) == (0x1001, 0x1000)


def test_a_file_that_is_no_uverbs_device_answers_an_errno(tmp_path: Path) -> None:
    """A regular file (a recorded tree's stand-in node) answers ENOTTY, never a hang."""
    node = tmp_path / "uverbs0"
    node.write_bytes(b"")
    with pytest.raises(OSError) as e:
        dd.data_direct_path(str(node))
    assert e.value.errno == errno.ENOTTY
    with pytest.raises(OSError) as e:
        dd.data_direct_path(str(tmp_path / "absent"))
    assert e.value.errno == errno.ENOENT


def test_uverbs_device_of_an_ibdev(tmp_path: Path) -> None:
    base = tmp_path / "class/infiniband_verbs"
    for n, dev in ((2, "rxe0"), (3, "mlx5_0")):
        (base / f"uverbs{n}").mkdir(parents=True)
        (base / f"uverbs{n}/ibdev").write_text(dev + "\n")
    (base / "abi_version").write_text("6\n")
    assert dd.uverbs_device(str(tmp_path), "mlx5_0") == "uverbs3"
    with pytest.raises(OSError) as e:
        dd.uverbs_device(str(tmp_path), "mlx5_1")
    assert e.value.errno == errno.ENODEV and os.path.isdir(base)
