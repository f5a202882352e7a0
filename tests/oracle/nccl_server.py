"""The real NCCL as an oracle, without a GPU (run as ``python -m tests.oracle.nccl_server LIB``).

The server loads ``libnccl.so.2`` once and then answers one JSON request per line on
stdin: ``{"netns": "/proc/<pid>/ns/net", "env": {...}, "files": {"/etc/nccl.conf":
"...", ...}}``.  For each request it forks a worker that

* enters the network namespace (``setns``), so the interfaces NCCL sees are the
  test's;
* enters a new mount namespace with a tmpfs on ``/etc`` holding only the request's
  files (so the host's ``/etc/nccl.conf`` never leaks in, and a test's does), and
  writes the other files (a ``HOME``'s ``.nccl.conf``, an ``NCCL_CONF_FILE``);
* replaces the environment with the request's and calls ``ncclGetUniqueId()`` with
  NCCL_DEBUG=INFO: NCCL's bootstrap then picks its socket interface with
  ``parseStringList``/``matchIfList`` and logs ``Bootstrap: Using <if>:<addr>`` or
  ``Bootstrap : no socket interface found``.

The reply is ``{"rc": <ncclResult_t>, "log": "<NCCL's output>"}``.  Nothing of NCCL
runs in the server itself (its once-only initialisations stay fresh for each fork).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18


def _worker(lib: ctypes.CDLL, libc: ctypes.CDLL, req: dict[str, object], wfd: int) -> None:
    os.dup2(wfd, 1)
    os.dup2(wfd, 2)
    netns = req.get("netns")
    if isinstance(netns, str):
        fd = os.open(netns, os.O_RDONLY)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            os.write(2, b"setns failed\n")
            os._exit(97)
        os.close(fd)
    if libc.unshare(CLONE_NEWNS) != 0:
        os.write(2, b"unshare(CLONE_NEWNS) failed\n")
        os._exit(97)
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        os._exit(97)
    if libc.mount(b"tmpfs", b"/etc", b"tmpfs", 0, None) != 0:
        os.write(2, b"mount tmpfs /etc failed\n")
        os._exit(97)
    files = req.get("files") or {}
    assert isinstance(files, dict)
    for path, text in files.items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
    env = req.get("env") or {}
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in env.items()})
    buf = ctypes.create_string_buffer(128)
    rc = lib.ncclGetUniqueId(buf)
    sys.stdout.flush()
    os.write(1, b"\nSERVER-RC %d\n" % rc)
    os._exit(0)


def main() -> None:
    lib = ctypes.CDLL(sys.argv[1])
    libc = ctypes.CDLL(None, use_errno=True)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        req = json.loads(line)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                _worker(lib, libc, req, w)
            finally:
                os._exit(98)
        os.close(w)
        chunks = []
        while True:
            data = os.read(r, 65536)
            if not data:
                break
            chunks.append(data)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        text = b"".join(chunks).decode("utf-8", "replace")
        rc = -1
        if "\nSERVER-RC " in text:
            text, _, tail = text.rpartition("\nSERVER-RC ")
            rc = int(tail.split()[0])
        sys.stdout.write(json.dumps({"rc": rc, "status": status, "log": text}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
