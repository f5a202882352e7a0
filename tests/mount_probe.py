"""Mounts as a container runtime makes them, and writes through them (tests/test_deploy_mounts.py).

Run as root in a private mount namespace (``unshare -m --propagation private python -m
tests.mount_probe PLAN``), so that every mount it makes vanishes with it.  ``PLAN`` (JSON)
says where the stand-in host lies (``work``: a tmpfs is mounted there), which fixture
tree to copy into it as the host's ``/sys`` and ``/dev/infiniband``, the views to mount
(each a list of bind mounts: ``source`` one of ``sys``, ``dev``, ``features``; ``mode``
``rw``, ``ro`` or ``rro``), the writes to try and the commands to run, each as ``root``
(uid 0 with an empty capability bounding set, as ``capabilities: drop: [ALL]`` leaves it)
or ``nobody`` (uid and gid 65534, no groups, no capability).  It prints one JSON object.

The stand-in host's ``/sys`` has a submount, a tmpfs at ``fs/cgroup`` (a host's
``/sys/fs/cgroup``) holding ``pids.max`` (root's, mode 0644, as the kernel makes it).
The top of ``/sys`` and ``/dev/infiniband`` hold ``root-only`` (root's, mode 0644) in the
same way, and all three ``open-to-all`` (mode 0666): a file that only the mount can keep
uid 65534 from writing.

The mounts are made as runc makes them: a recursive bind (``MS_BIND|MS_REC``), then for
``readOnly`` a remount of its top with ``MS_RDONLY`` (``ro``: the mounts beneath stay
writable), and for ``recursiveReadOnly`` ``mount_setattr(AT_RECURSIVE,
MOUNT_ATTR_RDONLY)`` (``rro``, Linux >= 5.12).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import subprocess
import sys
from typing import Any

MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (a syscall of Linux 5.12)
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
NOBODY = 65534
#: setpriv options: no capability in any set, for the command and whatever it runs.
NO_CAPS = ["--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"]
AS = {"root": ["setpriv", *NO_CAPS],
      "nobody": ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *NO_CAPS]}
#: What a write attempt runs (as ``echo 5 > FILE`` opens it): prints ``written`` or the
#: errno's name.
WRITE = ("import errno, os, sys\n"
         "try:\n"
         "    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)\n"
         "    os.write(fd, b'5\\n')\n"
         "    os.close(fd)\n"
         "    print('written')\n"
         "except OSError as e:\n"
         "    print(errno.errorcode.get(e.errno, str(e.errno)))\n")

_libc = ctypes.CDLL(None, use_errno=True)


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    enc = [None if s is None else os.fsencode(s) for s in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]),
           f"mount {source} {target}")


def recursive_read_only(target: str) -> None:
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    _check(_libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD),
                         os.fsencode(target), ctypes.c_uint(AT_RECURSIVE),
                         ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))),
           f"mount_setattr {target}")


def bind(source: str, target: str, mode: str) -> None:
    os.makedirs(target, exist_ok=True)
    mount(source, target, None, MS_BIND | MS_REC)
    if mode == "ro":
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    elif mode == "rro":
        recursive_read_only(target)


def make_host(plan: dict[str, Any]) -> dict[str, str]:
    """The stand-in host in a fresh tmpfs at ``work``: its paths by source name."""
    work = plan["work"]
    mount("tmpfs", work, "tmpfs", 0, "mode=0755")
    paths = {"sys": os.path.join(work, "host", "sys"),
             "dev": os.path.join(work, "host", "dev", "infiniband"),
             "features": os.path.join(work, "host", "features.d")}
    shutil.copytree(plan["sysfs"], paths["sys"], symlinks=True)
    shutil.copytree(plan["dev"], paths["dev"], symlinks=True)
    cgroup = os.path.join(paths["sys"], "fs", "cgroup")
    os.makedirs(cgroup, exist_ok=True)
    mount("tmpfs", cgroup, "tmpfs", 0, "mode=0755")
    for path, mode in ((os.path.join(cgroup, "pids.max"), 0o644),
                       *((os.path.join(d, "root-only"), 0o644)
                         for d in (paths["sys"], paths["dev"])),
                       *((os.path.join(d, "open-to-all"), 0o666)
                         for d in (cgroup, paths["sys"], paths["dev"]))):
        with open(path, "w") as f:
            f.write("max\n")
        os.chmod(path, mode)
    os.mkdir(paths["features"], 0o755)
    os.chown(paths["features"], NOBODY, NOBODY)
    return paths


def run(plan: dict[str, Any]) -> dict[str, Any]:
    paths = make_host(plan)
    try:
        for mounts in plan["views"].values():
            for m in mounts:
                bind(paths[m["source"]], m["target"], m["mode"])
    except OSError as e:
        if e.errno == errno.ENOSYS:  # Linux < 5.12, or a seccomp filter that hides it
            return {"unsupported": str(e)}
        raise
    writes = []
    for w in plan["writes"]:
        p = subprocess.run([*AS[w["as"]], plan["python"], "-I", "-S", "-c", WRITE, w["path"]],
                           capture_output=True, text=True, timeout=60, cwd="/")
        writes.append(p.stdout.strip() or p.stderr.strip())
    commands = []
    for c in plan["commands"]:
        p = subprocess.run([*AS[c["as"]], plan["python"], "-m", *c["argv"]], capture_output=True,
                           text=True, timeout=120, cwd="/", env=plan["env"])
        commands.append({"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr})
    features = {name: open(os.path.join(paths["features"], name)).read()
                for name in sorted(os.listdir(paths["features"]))}
    with open(os.path.join(paths["sys"], "fs", "cgroup", "pids.max")) as f:
        pids_max = f.read()
    return {"writes": writes, "commands": commands, "features": features,
            "pids.max": pids_max}


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1]))))
