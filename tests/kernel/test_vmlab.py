"""The kernel-lab harness's own error handling, with a fake qemu (no VM is booted)."""

from __future__ import annotations

import os
import stat
import types
from pathlib import Path

import pytest

from tests.kernel import vmlab

FAKE_QEMU = """#!/bin/sh
# Fake qemu-system-x86_64: find the console file, log the accelerator to $FAKE_QEMU_LOG,
# then act as told: $FAKE_QEMU_KVM under -accel kvm, $FAKE_QEMU_MODE otherwise.
console=""; accel=""
for a in "$@"; do
  case "$a" in file:*) console="${a#file:}" ;; kvm|tcg*) accel="${a%%,*}" ;; esac
done
[ -n "$FAKE_QEMU_LOG" ] && echo "$accel" >> "$FAKE_QEMU_LOG"
mode="$FAKE_QEMU_MODE"
[ "$accel" = kvm ] && mode="${FAKE_QEMU_KVM:-$mode}"
case "$mode" in
  crash) echo "qemu: could not load kernel" >&2; exit 1 ;;
  assert) echo "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69" >&2
          echo "qemu-system-x86_64: ../../target/i386/kvm/kvm.c:2893: kvm_buf_set_msrs:" \\
               "Assertion \\`ret == cpu->kvm_msr_buf->nmsrs' failed." >&2
          kill -ABRT $$ ;;
  exit0) : ;;
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
    monkeypatch.setenv("SV_VM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_QEMU_LOG", str(tmp_path / "accels"))
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


# --------------------------------------------------------------- the KVM decision


@pytest.fixture
def auto(fake: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """SV_VM_KVM=auto with a usable /dev/kvm; TCG boots fine; the KVM probe waits 1 s."""
    monkeypatch.setenv("SV_VM_KVM", "auto")
    monkeypatch.setenv("SV_VM_KVM_PROBE", "1")
    monkeypatch.setenv("FAKE_QEMU_MODE", "ok")
    monkeypatch.setattr(vmlab, "_kvm_device_usable", lambda: True)
    return fake


def accels(fake: Path) -> list[str]:
    """The accelerators qemu was started with, in order (and forget them)."""
    log = fake / "accels"
    used = log.read_text().split() if log.exists() else []
    log.unlink(missing_ok=True)
    return used


def verdicts(fake: Path) -> list[str]:
    return sorted(p.name for p in (fake / "cache").glob("*/kvm-*"))


@pytest.mark.parametrize("kvm_mode", ["crash", "assert", "exit0", "hang"])
def test_a_kvm_attempt_that_never_reaches_the_initramfs_means_tcg(
    auto: Path, monkeypatch: pytest.MonkeyPatch, kvm_mode: str
) -> None:
    """Whatever way KVM fails (at once, by an assertion, silently, or by hanging), the
    boot goes on with TCG, succeeds, and no verdict is written: a failure proves nothing
    that the next boot could rely on."""
    monkeypatch.setenv("FAKE_QEMU_KVM", kvm_mode)
    for run in range(2):
        result = vmlab.run("true\n", auto / f"{kvm_mode}-{run}")
        assert result.accel == "tcg" and result.exit_status == 3
        assert accels(auto) == ["kvm", "tcg"]  # tried again: nothing was cached
        assert any("using TCG" in n for n in result.notes), result.notes
        assert verdicts(auto) == []
    if kvm_mode in ("crash", "assert"):
        assert "exited before the initramfs" in result.notes[0]
        assert ("kvm_buf_set_msrs" in result.notes[0]) == (kvm_mode == "assert")
        assert (auto / f"{kvm_mode}-1" / "qemu.kvm-try.log").exists()
    if kvm_mode == "hang":
        assert "within 1 s" in result.notes[0]


def test_a_kvm_boot_that_reaches_userspace_is_cached(
    auto: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_QEMU_KVM", "ok")
    result = vmlab.run("true\n", auto / "first")
    assert result.accel == "kvm" and result.notes == []
    assert accels(auto) == ["kvm"]
    assert verdicts(auto) == [f"kvm-works-{vmlab.host_key()}"]
    result = vmlab.run("true\n", auto / "second")  # the cached verdict: KVM again
    assert result.accel == "kvm" and accels(auto) == ["kvm"]
    # a KVM boot that reached the initramfs but whose script did not finish is a real
    # failure of the run, not of KVM: no TCG retry, and the verdict stays
    monkeypatch.setenv("FAKE_QEMU_KVM", "nofinish")
    with pytest.raises(vmlab.VmError, match="did not finish"):
        vmlab.run("true\n", auto / "third")
    assert accels(auto) == ["kvm"] and len(verdicts(auto)) == 1


@pytest.mark.parametrize("kvm_mode", ["assert", "hang"])
def test_a_cached_verdict_that_kvm_contradicts_is_removed(
    auto: Path, monkeypatch: pytest.MonkeyPatch, kvm_mode: str
) -> None:
    """The reporter's machine: "works" cached, then KVM asserts at once.  The boot falls
    back to TCG instead of raising, and the verdict is gone."""
    monkeypatch.setenv("FAKE_QEMU_KVM", "ok")
    vmlab.run("true\n", auto / "proven")
    assert len(verdicts(auto)) == 1 and accels(auto) == ["kvm"]
    monkeypatch.setenv("FAKE_QEMU_KVM", kvm_mode)
    result = vmlab.run("true\n", auto / "contradicted")
    assert result.accel == "tcg" and result.exit_status == 3
    assert accels(auto) == ["kvm", "tcg"]
    assert verdicts(auto) == []
    assert any("removed the KVM verdict" in n for n in result.notes), result.notes
    if kvm_mode == "hang":  # a proven host gets three times the probe window
        assert "within 3 s" in result.notes[0]


def test_a_verdict_from_another_host_is_never_read(
    auto: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache key covers host kernel, qemu binary, CPU and machine: a "works" verdict
    written under another key (or by the old harness, keyed by kernel release only) does
    not stop the probe, which here finds that KVM crashes."""
    cache = auto / "cache" / "9.9"
    cache.mkdir(parents=True)
    (cache / f"kvm-verdict-{os.uname().release}").write_text("works\n")  # old format
    (cache / "kvm-works-0123456789abcdef0123").write_text("works\n")  # another host
    monkeypatch.setenv("FAKE_QEMU_KVM", "crash")
    result = vmlab.run("true\n", auto / "run")
    assert result.accel == "tcg" and accels(auto) == ["kvm", "tcg"]
    assert not any("removed" in n for n in result.notes)


def test_the_cache_key_covers_kernel_qemu_cpu_and_machine(
    auto: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = vmlab.host_key()
    assert key == vmlab.host_key()
    qemu = auto / "bin" / "qemu-system-x86_64"
    st = qemu.stat()
    os.utime(qemu, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # qemu upgraded
    assert vmlab.host_key() != key
    key = vmlab.host_key()
    monkeypatch.setattr(vmlab, "_cpu_identity", lambda: "model name : another CPU")
    assert vmlab.host_key() != key
    key = vmlab.host_key()
    real = os.uname()
    other = types.SimpleNamespace(sysname=real.sysname, nodename=real.nodename,
                                  release="6.99.0-new", version=real.version,
                                  machine=real.machine)
    monkeypatch.setattr(vmlab.os, "uname", lambda: other)  # another host kernel
    assert vmlab.host_key() != key
    key = vmlab.host_key()
    monkeypatch.setattr(vmlab.Path, "read_text", lambda self, *a, **k: "another-machine")
    assert vmlab.host_key() != key  # /etc/machine-id (and /proc/cpuinfo) differ


def test_forced_modes(auto: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_QEMU_KVM", "crash")
    monkeypatch.setenv("SV_VM_KVM", "1")  # KVM only: its failure is the result
    with pytest.raises(vmlab.VmError, match="never reached the initramfs"):
        vmlab.run("true\n", auto / "forced")
    assert accels(auto) == ["kvm"]
    monkeypatch.setenv("SV_VM_KVM", "0")
    assert vmlab.run("true\n", auto / "tcg").accel == "tcg" and accels(auto) == ["tcg"]
    monkeypatch.setenv("SV_VM_KVM", "auto")
    monkeypatch.setattr(vmlab, "_kvm_device_usable", lambda: False)  # no /dev/kvm access
    assert vmlab.run("true\n", auto / "nokvm").accel == "tcg" and accels(auto) == ["tcg"]
