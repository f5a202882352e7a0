"""NCCL's config files: ``NCCL_CONF_FILE`` or ``~/.nccl.conf``, then
``/etc/nccl.conf``, read as ``initEnvFunc`` and ``setEnvFile`` read them."""

from __future__ import annotations

import os

from ..engine.api import environ_arg
from ..ground.errors import WrongTypeError
from .ctext import text_arg
from .versions import V_CONF_COMMENTS, V_CONF_FGETS, V_CONF_FILE_ENV, parse_version

TYPE_CHECKING = False  # no typing at run time (rank/environment.py says why)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional

    from .versions import VersionArg

__all__ = ["read_conf_file", "nccl_environment"]

def read_conf_file(data: bytes, *, nccl_version: VersionArg = None) -> list[tuple[str, str]]:
    """``setEnvFile`` (src/misc/param.cc): the ``(name, value)`` pairs of a config file.

    Since 2.30.3 lines are read with ``fgets`` into 4096 bytes (a longer line is read
    as several lines) and one ``\\n`` then one ``\\r`` is removed; before, ``getline``
    read whole lines and only the ``\\n`` was removed.  Since 2.26.2 a line starting
    with ``#`` is skipped.  A line without ``=`` is skipped; the name is what precedes
    the first ``=`` (at most 1023 bytes) and the value the rest (at most 1023 bytes).
    Nothing is trimmed: ``A = b`` sets ``"A "`` to ``" b"``.  (A NUL byte ends a line
    there, as ``strlen`` does.)

    >>> read_conf_file(b"NCCL_DEBUG=WARN\\nNCCL_SOCKET_IFNAME==ens1f0\\n# x=1\\nA = b\\r\\n")
    [('NCCL_DEBUG', 'WARN'), ('NCCL_SOCKET_IFNAME', '=ens1f0'), ('A ', ' b')]
    """
    version = parse_version(nccl_version)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WrongTypeError(f"data must be bytes, not {type(data).__name__}")
    data = bytes(data)
    fgets = version >= V_CONF_FGETS
    pairs: list[tuple[str, str]] = []
    pos = 0
    n = len(data)
    while pos < n:
        limit = pos + 4095 if fgets else n
        end = data.find(b"\n", pos, limit)
        chunk = data[pos:end + 1] if end >= 0 else data[pos:limit]
        pos += len(chunk)
        if not fgets and chunk.startswith(b"#") and version >= V_CONF_COMMENTS:
            continue
        line = chunk.split(b"\0", 1)[0]
        if line.endswith(b"\n"):
            line = line[:-1]
        if fgets and line.endswith(b"\r"):
            line = line[:-1]
        if fgets and line.startswith(b"#"):
            continue
        s = line.find(b"=")
        if s < 0:
            continue
        name = line[:min(1023, s)]
        val = line[s + 1:s + 1 + 1023]
        pairs.append((os.fsdecode(name), os.fsdecode(val)))
    return pairs


def _whole(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _reroot(root: Optional[str], path: str) -> str:
    if not root or root == "/":
        return path
    return os.path.join(root, path.lstrip("/"))


def _passwd_home(root: Optional[str]) -> Optional[str]:
    """``getpwuid(getuid())->pw_dir``: from ``<root>/etc/passwd`` under an alternate root,
    else from the system's user database."""
    from ..ground import inputs

    uid = os.getuid()
    if not root or root == "/":
        import pwd

        def home() -> Optional[str]:
            try:
                return pwd.getpwuid(uid).pw_dir
            except KeyError:
                return None

        return inputs.observe("user database home", uid, home)  # NSS: asked once
    where = os.path.join(root, "etc", "passwd")
    try:
        data = inputs.observe("file", where, lambda: _whole(where))
    except (OSError, ValueError):
        return None
    text = data.decode("utf-8", "surrogateescape")  # as a text file reads it: universal
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):  # newlines
        f = line.split(":")
        if len(f) >= 6 and f[2] == str(uid):
            return f[5]
    return None


def nccl_environment(env: Optional[Mapping[str, str]] = None, *, root: Optional[str] = None,
                     nccl_version: VersionArg = None) -> tuple[dict[str, str], dict[str, str]]:
    """The environment NCCL reads after ``initEnvFunc`` (src/misc/param.cc), and where
    each value came from.

    NCCL reads ``$NCCL_CONF_FILE`` when set and non-empty (since 2.23), else
    ``~/.nccl.conf`` (``$HOME`` since 2.30.3, before it the user database's home of the
    real uid, ``getpwuid(getuid())``), then ``/etc/nccl.conf`` (:func:`read_conf_file`),
    setting each variable with ``setenv(name, value, 0)``: the environment wins over
    both files and the first file over ``/etc/nccl.conf``.
    ``root`` is an alternate root for the three paths (and ``/etc/passwd``).  Returns
    ``(environment, sources)``: ``sources`` maps each variable a file set to its path.
    """
    version = parse_version(nccl_version)
    base = environ_arg(env)
    if root is not None:
        if not isinstance(root, (str, os.PathLike)):
            raise WrongTypeError(f"root must be a path, not {type(root).__name__}")
        root = text_arg("root", os.fspath(root))
    result = dict(base)
    sources: dict[str, str] = {}
    user = base.get("NCCL_CONF_FILE") if version >= V_CONF_FILE_ENV else None
    files: list[str] = []
    home = base.get("HOME") if version >= V_CONF_FGETS else _passwd_home(root)
    if user:
        files.append(user[:1023])
    elif home is not None:
        files.append(f"{home}/.nccl.conf"[:1023])
    files.append("/etc/nccl.conf")
    from functools import partial

    from ..ground import inputs

    for path in files:
        try:
            where = _reroot(root, path)
            data = inputs.observe("file", where, partial(_whole, where))
        except (OSError, ValueError):  # ValueError: a NUL or odd surrogate, only in a
            continue                   # caller's env: no file NCCL could open either
        for name, value in read_conf_file(data, nccl_version=version):
            if not name or "=" in name or name in result:
                continue  # setenv fails on "" (EINVAL); an existing value is kept
            result[name] = value
            sources[name] = path
    return result, sources
