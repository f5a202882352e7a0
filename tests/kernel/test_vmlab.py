"""The kernel-lab harness's own error handling, with a fake qemu (no VM is booted)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.kernel import vmlab

FAKE_QEMU = """#!/bin/sh
# Fake qemu-system-x86_64: find the console file, then act as told by $FAKE_QEMU_MODE.
console=""
for a in "$@"; do case "$a" in file:*) console="${a#file:}" ;; esac; done
case "$FAKE_QEMU_MODE" in
  crash) echo "qemu: could not load kernel" >&2; exit 1 ;;
  hang) echo "booting" > "$console"; exec sleep 30 ;;
  module) printf 'VMLAB-BOOTED\\nVMLAB-MODULE-MISSING rdma_rxe\\nVMLAB-EXIT=0\\n' >"$console" ;;
  nofinish) printf 'VMLAB-BOOTED\\nVMLAB-READY\\nKernel panic\\n' > "$console" ;;
  ok) printf 'VMLAB-BOOTED\\nVMLAB-READY\\nhello\\nVMLAB-EXIT=3\\n' > "$console" ;;
esac
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    qemu = bindir / "qemu-system-x86_64"
    qemu.write_text(FAKE_QEMU)
    qemu.chmod(qemu.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("SV_VM_KVM", "0")
    monkeypatch.setattr(vmlab, "unavailable_reason", lambda: None)
    monkeypatch.setattr(vmlab, "find_kernel", lambda: (tmp_path / "vmlinuz", "9.9"))
    monkeypatch.setattr(vmlab, "build_initramfs", lambda kver: tmp_path / "initrd")
    return tmp_path


def boot(fake: Path, mode: str, monkeypatch: pytest.MonkeyPatch, timeout: float = 20) -> Path:
    monkeypatch.setenv("FAKE_QEMU_MODE", mode)
    workdir = fake / f"run-{mode}"
    vmlab.run("true\n", workdir, timeout=timeout)
    return workdir


@pytest.mark.parametrize(
    ("mode", "kind", "words"),
    [
        ("crash", "boot", "never reached the initramfs"),
        ("module", "module", "rdma_rxe"),
        ("nofinish", "boot", "did not finish"),
    ],
)
def test_errors_name_their_kind_and_logs(
    fake: Path, monkeypatch: pytest.MonkeyPatch, mode: str, kind: str, words: str
) -> None:
    with pytest.raises(vmlab.VmError) as e:
        boot(fake, mode, monkeypatch)
    assert e.value.kind == kind and words in str(e.value)
    assert e.value.logdir is not None and str(e.value.logdir) in str(e.value)
    assert (e.value.logdir / "console.log").exists() or mode == "crash"
    assert (e.value.logdir / "qemu.log").exists()


def test_timeout(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(vmlab.VmError) as e:
        boot(fake, "hang", monkeypatch, timeout=1)
    assert e.value.kind == "timeout" and "booting" in str(e.value)


def test_success_reports_the_script_status(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_QEMU_MODE", "ok")
    result = vmlab.run("true\n", fake / "ok")
    assert result.exit_status == 3 and "hello" in result.console and result.accel == "tcg"
    assert (fake / "ok" / "vmcmd.sh").read_text() == "true\n"
    argv = (fake / "ok" / "qemu.argv").read_text()
    assert "readonly=on" in argv and "mount_tag=vmout" in argv


def test_unavailable_without_qemu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    reason = vmlab.unavailable_reason()
    assert reason is not None and "qemu-system-x86_64" in reason
