"""Boot Debian's own kernel under qemu with soft-RoCE (rxe) loaded and run a script in it.

The VM has no disk: an initramfs (busybox and the needed kernel modules, built
once and cached) loads ``ib_core``, ``ib_uverbs``, ``rdma_rxe`` and friends,
mounts this machine's root filesystem read-only over 9p at ``/`` (through a
chroot), a tmpfs on ``/run`` and a writable 9p share of a host directory on
``/run/vmout``, then runs one shell script as root and powers off.  Everything
installed on this machine (Python, the virtual environment, libibverbs,
iproute2) is usable inside; only ``/run`` and ``/run/vmout`` are writable.

Errors are :class:`VmError` with a ``kind`` (``unavailable``, ``boot``,
``timeout``, ``module``, ``script``) and a message that names the log
directory, which is kept.

Environment knobs: ``SV_VM_KVM`` (``auto``: try KVM, and boot with TCG whenever the
KVM attempt does not reach the initramfs within ``SV_VM_KVM_PROBE`` seconds (20), for
whatever reason: a hang, an immediate exit, a crash, an assertion; ``1``: KVM only;
``0``: TCG only),
``SV_VM_TIMEOUT`` (seconds per boot, default 1200: TCG on busy cores), ``SV_VM_MEM`` (MiB, 1024),
``SV_VM_CPUS`` (1: with two, TCG on two busy host cores took twice the CPU time and
longer, 330 against 170 CPU-seconds, 409 against 296 s, the lab booted beside two
CPU burners), ``SV_VM_KERNEL`` (a vmlinuz path), ``SV_VM_CACHE``.

The KVM verdict cache holds only what was proven: a file ``kvm-works-<key>`` is
written after a KVM boot reached the initramfs, where ``<key>`` hashes what the
verdict depends on (host kernel release and build, the qemu binary, the CPU model
and flags, the machine id; :func:`host_key`), so that a verdict from another machine,
host kernel, qemu or CPU is never read.  A failed KVM attempt writes nothing, and
removes a "works" verdict that it contradicts; the boot then goes on with TCG.  A
proven verdict gives KVM three times as long to reach the initramfs (a loaded machine).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tests.scratch import scratch_dir

#: Modules the lab needs (with their dependencies); the first three must load.
MODULES = (
    "virtio_pci",
    "9pnet_virtio",
    "9p",
    "crc32_generic",
    "ib_core",
    "ib_uverbs",
    "rdma_rxe",
    "dummy",
    "veth",
)
REQUIRED_LOADED = ("ib_core", "ib_uverbs", "rdma_rxe", "dummy", "veth", "9p")

MARK = "VMLAB"
_INIT_VERSION = "4"


class VmError(Exception):
    """The VM could not do its job; ``kind`` says why, ``logdir`` has the logs."""

    def __init__(self, kind: str, message: str, logdir: Optional[Path] = None) -> None:
        where = f" (logs: {logdir})" if logdir else ""
        super().__init__(f"kernel lab {kind}: {message}{where}")
        self.kind = kind
        self.logdir = logdir


@dataclass
class VmResult:
    """What one boot produced."""

    exit_status: int
    console: str
    outdir: Path
    logdir: Path
    seconds: float
    accel: str
    notes: list[str] = field(default_factory=list)


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def find_kernel() -> tuple[Path, str]:
    """The kernel image (newest ``/boot/vmlinuz-*`` unless ``SV_VM_KERNEL``) and its version."""
    given = os.environ.get("SV_VM_KERNEL")
    if given:
        image = Path(given)
    else:
        images = sorted(
            Path("/boot").glob("vmlinuz-*"),
            key=lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.name)],
        )
        if not images:
            raise VmError("unavailable", "no kernel in /boot (apt-get install linux-image-amd64)")
        image = images[-1]
    kver = image.name.removeprefix("vmlinuz-")
    if not image.is_file():
        raise VmError("unavailable", f"kernel image {image} does not exist")
    if not os.access(image, os.R_OK):
        raise VmError("unavailable", f"kernel image {image} is not readable (run as root)")
    if not Path("/lib/modules", kver).is_dir():
        raise VmError("unavailable", f"no /lib/modules/{kver} for kernel {image}")
    return image, kver


def unavailable_reason() -> Optional[str]:
    """Why the lab cannot boot here at all (None if it may)."""
    if os.geteuid() != 0:
        return "the kernel lab needs root (kernel image, 9p export of /)"
    for tool in ("qemu-system-x86_64", "cpio", "modprobe"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install qemu-system-x86 cpio kmod)"
    if not Path("/bin/busybox").is_file():
        return "/bin/busybox is missing (apt-get install busybox-static)"
    try:
        find_kernel()
    except VmError as e:
        return str(e)
    return None


#: What the VM mounts over the host's root (``_init_script``): files below these are
#: not the host's there.
VM_OWN_MOUNTS = ("/proc", "/sys", "/dev", "/run")


def hidden_in_vm(path: Path) -> bool:
    """Whether the host path ``path`` is not visible in the VM (it lies below one of
    :data:`VM_OWN_MOUNTS`, such as a tmpfs at ``/dev/shm``)."""
    real = os.path.realpath(path)
    return any(real == m or real.startswith(m + "/") for m in VM_OWN_MOUNTS)


def visible_tmp() -> Path:
    """A temporary directory the VM sees: ``$TMPDIR`` unless the VM hides it (such as
    ``/dev/shm``), else ``/var/tmp``."""
    tmp = Path(tempfile.gettempdir())
    return Path("/var/tmp") if hidden_in_vm(tmp) else tmp


def _cache_dir(kver: str) -> Path:
    # a fixed name in a directory anyone writes: made and checked without following a link
    base = os.environ.get("SV_VM_CACHE") or scratch_dir(tempfile.gettempdir(), "sysverbs-vmlab",
                                                        0o755)
    path = Path(base) / kver
    path.mkdir(parents=True, exist_ok=True)
    return path


def _module_files(kver: str) -> list[tuple[str, Path]]:
    """(name, file) of every module to load, dependencies first, each once."""
    seen: dict[str, Path] = {}
    for mod in MODULES:
        proc = subprocess.run(
            ["modprobe", "-S", kver, "--show-depends", mod],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise VmError(
                "module",
                f"kernel {kver} has no module {mod}: {proc.stderr.strip() or proc.stdout.strip()}",
            )
        for line in proc.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "insmod":
                path = Path(parts[1])
                name = path.name.split(".ko")[0]
                seen.setdefault(name, path)
    return list(seen.items())


def _init_script(modules: list[str]) -> str:
    mods = " ".join(modules)
    required = " ".join(REQUIRED_LOADED)
    return f"""#!/bin/sh
export PATH=/bin
mount -t proc p /proc; mount -t sysfs s /sys; mount -t devtmpfs d /dev
echo "{MARK}-BOOTED"
for m in {mods}; do insmod /mods/$m.ko || echo "{MARK}-INSMOD-FAILED $m"; done
for m in {required}; do [ -d /sys/module/$m ] || echo "{MARK}-MODULE-MISSING $m"; done
opts=trans=virtio,version=9p2000.L,msize=262144
# The host's / is read-only and unchanging for the VM: cache it (cache=none costs a
# host round trip for every read, exec and import).
mount -t 9p -o $opts,ro,cache=loose hostroot /mnt || echo "{MARK}-ERROR 9p mount of / failed"
mount -t proc p /mnt/proc; mount -t sysfs s /mnt/sys; mount -t devtmpfs d /mnt/dev
mount -t tmpfs t /mnt/run; mkdir -p /mnt/run/vmout
mount -t 9p -o $opts vmout /mnt/run/vmout || echo "{MARK}-ERROR 9p mount of the output dir failed"
cmd=$(sed -e 's/.*{MARK}_CMD=//' -e 's/ .*//' /proc/cmdline)
echo "{MARK}-READY"
chroot /mnt /bin/sh "$cmd" </dev/null
echo "{MARK}-EXIT=$?"
sync
poweroff -f
"""


def build_initramfs(kver: str) -> Path:
    """The cached initramfs for kernel ``kver`` (rebuilt when the recipe changes)."""
    mods = _module_files(kver)
    init = _init_script([name for name, _ in mods])
    digest = hashlib.sha256(
        (init + _INIT_VERSION + "".join(str(p) for _, p in mods)).encode()
    ).hexdigest()[:16]
    cache = _cache_dir(kver)
    image = cache / f"initrd-{digest}.cpio.gz"
    for stale in cache.glob("initrd-*.cpio.gz"):  # earlier recipes
        if stale != image:
            stale.unlink(missing_ok=True)
    if image.is_file():
        return image
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        root = Path(tmp) / "root"
        for sub in ("bin", "proc", "sys", "dev", "mnt", "mods"):
            (root / sub).mkdir(parents=True)
        shutil.copy2("/bin/busybox", root / "bin/busybox")
        applets = ("sh", "mount", "insmod", "poweroff", "chroot", "echo", "sed", "mkdir", "sync")
        for applet in applets:
            os.symlink("busybox", root / "bin" / applet)
        for name, path in mods:
            if path.suffix in (".xz", ".zst", ".gz"):
                raise VmError("module", f"compressed module {path} is not supported")
            shutil.copy2(path, root / "mods" / f"{name}.ko")
        (root / "init").write_text(init)
        os.chmod(root / "init", 0o755)
        files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
        cpio = subprocess.run(
            ["cpio", "-o", "-H", "newc", "--quiet"],
            cwd=root,
            input=files,
            capture_output=True,
            check=True,
        ).stdout
        import gzip

        partial = cache / f".{image.name}.{os.getpid()}"
        partial.write_bytes(gzip.compress(cpio, compresslevel=1))
        os.replace(partial, image)
    return image


def _cpu_identity() -> str:
    """The first CPU's model and flags from /proc/cpuinfo (what KVM's MSRs depend on)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""
    keep = ("vendor_id", "cpu family", "model", "model name", "stepping", "microcode",
            "flags")
    lines: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor only
        key = line.split(":", 1)[0].strip()
        if key in keep:
            lines.append(line.strip())
    return "\n".join(lines)


def _file_identity(path: Optional[str]) -> str:
    if not path:
        return "(none)"
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return f"{path}:(unreadable)"
    return f"{real}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


def host_key() -> str:
    """What a KVM verdict depends on, hashed: the host kernel (release and build), the
    qemu binary on PATH (path, size, mtime, inode), the CPU (model, flags) and the
    machine id.  A verdict is trusted only under the same key."""
    uname = os.uname()
    try:
        machine_id = Path("/etc/machine-id").read_text().strip()
    except OSError:
        machine_id = uname.nodename
    facts = "\0".join(
        [
            uname.release,
            uname.version,
            uname.machine,
            _file_identity(shutil.which("qemu-system-x86_64")),
            _cpu_identity(),
            machine_id,
        ]
    )
    return hashlib.sha256(facts.encode()).hexdigest()[:20]


def _kvm_verdict_file(kver: str) -> Path:
    return _cache_dir(kver) / f"kvm-works-{host_key()}"


def _kvm_device_usable() -> bool:
    return os.access("/dev/kvm", os.R_OK | os.W_OK)


@dataclass(frozen=True)
class Machine:
    """What a boot's VM is, where it is not the lab's default (``SV_VM_MEM`` MiB,
    ``SV_VM_CPUS`` vCPUs, qemu's default machine): ``mem`` and ``smp`` (``-smp``'s
    value: ``2,sockets=1,cores=2``) replace those, ``args`` are more qemu arguments
    (``-M q35``, ``-numa``, ``-device``...), ``append`` more kernel command line
    (``intel_iommu=on``)."""

    mem: Optional[int] = None
    smp: Optional[str] = None
    args: tuple[str, ...] = ()
    append: str = ""


def _qemu_argv(
    image: Path, initrd: Path, script: Path, outdir: Path, console: Path, kvm: bool,
    machine: Machine = Machine(),
) -> list[str]:
    accel = ["-accel", "kvm", "-cpu", "host"] if kvm else ["-accel", "tcg,thread=multi"]
    mem = machine.mem if machine.mem is not None else _env_int("SV_VM_MEM", 1024)
    smp = machine.smp if machine.smp is not None else str(_env_int("SV_VM_CPUS", 1))
    return [
        "qemu-system-x86_64",
        *accel,
        "-m",
        str(mem),
        "-smp",
        smp,
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-serial",
        f"file:{console}",
        "-kernel",
        str(image),
        "-initrd",
        str(initrd),
        "-virtfs",
        "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
        "-virtfs",
        f"local,path={outdir},mount_tag=vmout,security_model=none",
        "-append",
        f"console=ttyS0 rdinit=/init quiet panic=-1 mitigations=off {machine.append} "
        f"{MARK}_CMD={script}",
        # last: qemu puts a device without a bus (the two -virtfs) on the newest bus
        *machine.args,
    ]


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _boot(
    argv: list[str],
    console: Path,
    qemu_log: Path,
    timeout: float,
    ready_within: Optional[float],
) -> tuple[str, float]:
    """Run qemu; returns (how it ended, seconds).  Ends: exited, timeout, not-ready."""
    start = time.monotonic()
    with open(qemu_log, "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            while proc.poll() is None:
                elapsed = time.monotonic() - start
                if elapsed > timeout:
                    _kill(proc)
                    return "timeout", elapsed
                if ready_within is not None and elapsed > ready_within:
                    text = console.read_text(errors="replace") if console.exists() else ""
                    if f"{MARK}-BOOTED" not in text:
                        _kill(proc)
                        return "not-ready", elapsed
                    ready_within = None
                time.sleep(0.1)
        finally:
            _kill(proc)
    return "exited", time.monotonic() - start


def _want_kvm(kver: str) -> tuple[str, Optional[Path]]:
    """How to boot: ``"tcg"``, ``"kvm"`` (forced: no fallback) or ``"try-kvm"`` (KVM,
    and TCG if KVM does not reach the initramfs); and the verdict file when a proven
    "works" verdict was read from it (to invalidate it if KVM fails after all)."""
    mode = os.environ.get("SV_VM_KVM", "auto")
    if mode in ("0", "off", "no"):
        return "tcg", None
    if not _kvm_device_usable():
        return "tcg", None
    if mode in ("1", "on", "yes"):
        return "kvm", None
    verdict = _kvm_verdict_file(kver)
    return "try-kvm", verdict if verdict.is_file() else None


def _console_text(console: Path) -> str:
    return console.read_text(errors="replace") if console.exists() else ""


def run(
    script_text: str,
    workdir: Path,
    *,
    timeout: Optional[float] = None,
    machine: Machine = Machine(),
) -> VmResult:
    """Boot once and run ``script_text`` (a POSIX shell script) as root inside.

    ``workdir`` must be an empty host directory; it receives the script, the
    logs (``console.log``, ``qemu.log``) and the VM's output directory
    ``out/`` (``/run/vmout`` inside).  ``machine``: another VM than the default
    one (:class:`Machine`).  Raises :class:`VmError`.
    """
    reason = unavailable_reason()
    if reason:
        raise VmError("unavailable", reason, workdir)
    image, kver = find_kernel()
    initrd = build_initramfs(kver)
    workdir.mkdir(parents=True, exist_ok=True)
    os.chmod(workdir, 0o755)
    script = workdir / "vmcmd.sh"
    script.write_text(script_text)
    os.chmod(script, 0o644)
    if " " in str(script):
        raise VmError("unavailable", f"work directory path has a space: {workdir}")
    outdir = workdir / "out"
    outdir.mkdir(exist_ok=True)
    os.chmod(outdir, 0o777)
    limit = timeout if timeout is not None else float(_env_int("SV_VM_TIMEOUT", 1200))
    notes: list[str] = []
    how, cached = _want_kvm(kver)
    # Seconds a KVM attempt has to reach the initramfs (normally 1-3 s).  Where KVM was
    # proven to work, a slow start is more likely a loaded machine: wait longer.
    probe = float(_env_int("SV_VM_KVM_PROBE", 20)) * (1 if cached is None else 3)
    attempts = {"tcg": [False], "kvm": [True], "try-kvm": [True, False]}[how]
    for use_kvm in attempts:
        console = workdir / "console.log"
        qemu_log = workdir / "qemu.log"
        for f in (console, qemu_log):
            if f.exists():
                f.rename(f.with_suffix(".kvm-try.log"))
        argv = _qemu_argv(image, initrd, script, outdir, console, use_kvm, machine)
        (workdir / "qemu.argv").write_text(" ".join(argv) + "\n")
        probing = how == "try-kvm" and use_kvm
        end, seconds = _boot(argv, console, qemu_log, limit, probe if probing else None)
        text = _console_text(console)
        if probing:
            # Decided by what happened: only a boot that reached the initramfs proves KVM.
            if f"{MARK}-BOOTED" not in text:
                qlog = qemu_log.read_text(errors="replace").strip() if qemu_log.exists() else ""
                why = {"not-ready": f"did not reach the initramfs within {probe:.0f} s",
                       "timeout": f"did not reach the initramfs within {limit:.0f} s"}.get(
                           end, f"exited before the initramfs (qemu said {qlog[-300:]!r})")
                notes.append(f"KVM {why}; using TCG")
                if cached is not None:
                    cached.unlink(missing_ok=True)
                    notes.append(f"removed the KVM verdict {cached.name} it contradicted")
                continue
            verdict = _kvm_verdict_file(kver)
            if not verdict.is_file():
                partial = verdict.with_name(f".{verdict.name}.{os.getpid()}")
                partial.write_text(f"works: a KVM boot reached the initramfs in {seconds:.1f} s\n")
                os.replace(partial, verdict)
        accel = "kvm" if use_kvm else "tcg"
        if end == "timeout":
            raise VmError(
                "timeout",
                f"no power-off within {limit:.0f} s ({accel}); last console line: "
                f"{_last_line(text)!r}",
                workdir,
            )
        return _finish(text, outdir, workdir, seconds, accel, notes, qemu_log)
    raise VmError("boot", "no way to boot was left", workdir)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][-200:] if lines else "(console empty)"


def _finish(
    text: str,
    outdir: Path,
    workdir: Path,
    seconds: float,
    accel: str,
    notes: list[str],
    qemu_log: Path,
) -> VmResult:
    if f"{MARK}-BOOTED" not in text:
        qlog = qemu_log.read_text(errors="replace").strip() if qemu_log.exists() else ""
        raise VmError(
            "boot",
            f"the kernel never reached the initramfs; qemu said {qlog[-500:]!r}; "
            f"console ends {_last_line(text)!r}",
            workdir,
        )
    missing = re.findall(rf"{MARK}-(?:MODULE-MISSING|INSMOD-FAILED) (\S+)", text)
    if any(m in REQUIRED_LOADED for m in missing):
        raise VmError(
            "module", f"modules failed to load in the VM: {sorted(set(missing))}", workdir
        )
    errors = re.findall(rf"{MARK}-ERROR (.*)", text)
    if errors:
        raise VmError("boot", "; ".join(errors), workdir)
    status = re.findall(rf"{MARK}-EXIT=(\d+)", text)
    if not status:
        raise VmError(
            "boot",
            f"the script did not finish (kernel panic or crash?); console ends "
            f"{_last_line(text)!r}",
            workdir,
        )
    return VmResult(int(status[-1]), text, outdir, workdir, seconds, accel, notes)
