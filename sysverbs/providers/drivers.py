"""Which providers libibverbs would load, and in which order (``init.c: load_drivers``).

libibverbs reads its config directory (``/etc/libibverbs.d``), then loads the
names in ``RDMAV_DRIVERS`` (or ``IBV_DRIVERS``), then the config names in reverse
(readdir x line) order; each library that loads registers its provider at the end
of the driver list.  sysverbs does the same without ``dlopen``: a library "loads"
when its file exists and looks like an ELF object, and registers the providers
of the table whose library name it carries.
"""

from __future__ import annotations

import errno
import os
import stat

from ..ground.messages import ConfigWarning, DriverLoadWarning, SysverbsWarning
from ..ground.records import RecordTuple
from .table import pabi_for, provider_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Optional

    from .table import Provider

    Message = tuple[bytes, type[SysverbsWarning]]

__all__ = [
    "DriverLoad",
    "load_drivers",
    "load_for_mode",
    "parse_config_file",
    "builtin_drivers",
]

class DriverLoad(RecordTuple, tuple["tuple[Provider, ...]", "tuple[Message, ...]"]):
    """The outcome of loading providers: the driver list and the messages to print."""

    __slots__ = ()
    _fields = ("providers", "messages")

    def __new__(cls, providers: tuple[Provider, ...], messages: tuple[Message, ...]
                ) -> DriverLoad:
        return tuple.__new__(cls, (providers, messages))

    @property
    def providers(self) -> tuple[Provider, ...]:
        return self[0]

    @property
    def messages(self) -> tuple[Message, ...]:
        return self[1]


def builtin_drivers(table: Sequence[Provider]) -> DriverLoad:
    """Every provider of the table, as if all were installed, with no message."""
    return DriverLoad(tuple(table), ())


def _token_end(text: bytes) -> int:
    """Length of the leading run of ``text`` without a newline, tab or space."""
    end = len(text)
    for sep in b"\n\t ":
        at = text.find(sep, 0, end)
        if at >= 0:
            end = at
    return end


def _lines(data: bytes) -> list[bytes]:
    """getline(): lines end at "\\n" only ("\\r" is part of the line, as in "siw\\r");
    each keeps its newline, and a last line without one counts if it is not empty."""
    pieces = data.split(b"\n")
    lines = [piece + b"\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def parse_config_file(data: bytes, path: bytes) -> tuple[list[bytes], list[Message]]:
    """The driver names of one config file (in line order) and its warnings."""
    names: list[bytes] = []
    messages: list[Message] = []
    for line in _lines(data):
        line = line.split(b"\0", 1)[0]
        config = line.lstrip(b" \t")
        if config[:1] in (b"\n", b"#"):
            continue
        end = _token_end(config)
        field = config[:end]
        rest: Optional[bytes] = config[end + 1 :] if end < len(config) else None
        if field == b"driver" and rest is not None:
            rest = rest.lstrip(b" \t")
            names.append(rest[: _token_end(rest)])
        else:
            messages.append(
                (
                    b"Warning: ignoring bad config directive '%s' in file '%s'.\n" % (field, path),
                    ConfigWarning,
                )
            )
    return names, messages


def _read_config(config_dir: bytes) -> tuple[list[bytes], list[Message]]:
    """``read_config``: the driver names in load order (reversed) and the warnings."""
    messages: list[Message] = []
    try:
        # readdir() also returns "." and ".." (first, on the usual filesystems) and
        # libibverbs stats them too: that fails, with a warning, in a directory that
        # can be read but not searched (mode 744 for the caller).
        entries = [b".", b"..", *os.listdir(config_dir)]
    except (OSError, ValueError):
        messages.append(
            (b"Warning: couldn't open config directory '%s'.\n" % config_dir, ConfigWarning)
        )
        return [], messages
    names: list[bytes] = []
    for entry in entries:
        path = config_dir + b"/" + entry
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            messages.append((b"Warning: couldn't stat config file '%s'.\n" % path, ConfigWarning))
            continue
        if not _is_reg(st.st_mode):
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            messages.append((b"Warning: couldn't read config file %s.\n" % path, ConfigWarning))
            continue
        chunks = []
        try:
            while True:
                chunk = os.read(fd, 65536)
                if chunk:
                    chunks.append(chunk)
                if len(chunk) < 65536:  # a regular file: a short read is its end
                    break
        except OSError:
            pass
        finally:
            os.close(fd)
        found, warned = parse_config_file(b"".join(chunks), path)
        names.extend(found)
        messages.extend(warned)
    names.reverse()
    return names, messages


def _is_reg(mode: int) -> bool:
    return stat.S_ISREG(mode)


_OPEN_FAIL = b"cannot open shared object file: "
#: open() errors after which glibc's library search goes on to the next directory.
_SEARCH_ON = (_OPEN_FAIL + b"No such file or directory", _OPEN_FAIL + b"Permission denied")


def _dl_error(path: bytes) -> Optional[bytes]:
    """What ``dlopen`` of an explicit path would say, or None when it would load."""
    try:
        st = os.stat(path)
    except OSError as e:  # glibc reports open()'s errno (ENAMETOOLONG, ELOOP, ...)
        return _OPEN_FAIL + os.strerror(e.errno or errno.ENOENT).encode()
    except ValueError:
        return _OPEN_FAIL + b"No such file or directory"
    if _is_reg(st.st_mode):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return b"cannot open shared object file: Permission denied"
        try:
            head = os.read(fd, 64)
        except OSError:
            head = b""
        finally:
            os.close(fd)
        if len(head) < 64:
            return b"file too short"
        if not head.startswith(b"\x7fELF"):
            return b"invalid ELF header"
        return None
    if stat.S_ISDIR(st.st_mode):
        return b"cannot read file data: Is a directory"
    return b"invalid ELF header"


def _search_dirs(env: Mapping[str, str]) -> list[bytes]:
    from .table import lib_dirs

    dirs = [os.fsencode(d) for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]
    return dirs + [os.fsencode(d) for d in lib_dirs()]


def _library_name(path: bytes) -> bytes:
    """The ``<name>`` of a provider library path ``.../lib<name>-rdmav<N>.so`` (the part
    the table's library names are compared with), else b""."""
    base = path.rsplit(b"/", 1)[-1]
    if not (base.startswith(b"lib") and base.endswith(b".so")):
        return b""
    stem = base[3:-3]
    at = stem.rfind(b"-rdmav")
    digits = stem[at + 6 :]
    if at < 0 or not digits.isdigit():
        return b""
    return stem[:at]


def load_drivers(
    table: Sequence[Provider],
    release: int,
    config_dir: bytes,
    env: Mapping[str, str],
    trust_env: bool,
    libdir: Optional[bytes] = None,
) -> DriverLoad:
    """Emulate ``load_drivers()`` for the installed rdma-core (``providers="installed"``)."""
    pabi = pabi_for(release)
    suffix = b"-rdmav%d.so" % pabi
    pdir = libdir if libdir is not None else os.fsencode(provider_dir())
    by_library: dict[bytes, list[Provider]] = {}
    for prov in table:
        by_library.setdefault(prov.library.encode(), []).append(prov)

    config_names, messages = _read_config(config_dir)
    names: list[bytes] = []
    if trust_env:
        value = env.get("RDMAV_DRIVERS")
        if value is None:
            value = env.get("IBV_DRIVERS")
        if value is not None:
            names += os.fsencode(value).replace(b";", b":").split(b":")
    names += config_names

    registered: list[Provider] = []
    search = _search_dirs(env)
    for name in names:
        loaded: Optional[bytes] = None
        if name.startswith(b"/"):
            path = name + suffix
            err = _dl_error(path)
            if err is None:
                loaded = path
            else:
                messages.append(
                    (
                        b"Warning: couldn't load driver '%s': %s: %s\n" % (path, path, err),
                        DriverLoadWarning,
                    )
                )
        else:
            soname = b"lib" + name + suffix
            if _dl_error(pdir + b"/" + soname) is None:
                loaded = pdir + b"/" + soname
            else:
                candidates = [soname] if b"/" in soname else [d + b"/" + soname for d in search]
                err = _SEARCH_ON[0]
                for cand in candidates:
                    e = _dl_error(cand)
                    if e is None:
                        loaded = cand
                        break
                    if b"/" in soname or not e.startswith(_OPEN_FAIL):
                        err = e  # a path is opened as is; a bad file ends the search
                        break
                    if e not in _SEARCH_ON and os.path.isdir(os.path.dirname(cand)):
                        err = e  # glibc's open_path gives up in an existing directory
                        break
                if loaded is None:
                    messages.append(
                        (
                            b"Warning: couldn't load driver '%s': %s: %s\n" % (soname, soname, err),
                            DriverLoadWarning,
                        )
                    )
        if loaded is None:
            continue
        for prov in by_library.get(_library_name(loaded), []):
            if prov not in registered:
                registered.append(prov)
    return DriverLoad(tuple(registered), tuple(messages))


def load_for_mode(
    mode: str, release: int, config_dir: bytes, env: Mapping[str, str],
    static: tuple[str, ...] = (),
) -> DriverLoad:
    """The driver list of ``providers=mode`` ("builtin", "installed" or "static", with
    the providers ``static`` names linked in) for a release."""
    from .table import provider_table

    if mode == "static":  # registered by constructors; load_drivers() is empty there
        from .static import static_drivers

        return DriverLoad(static_drivers(release, static), ())
    table = provider_table(release)
    if mode == "builtin":
        return builtin_drivers(table)
    trust = os.getuid() == os.geteuid()
    from ..ground.sysfs_read import current

    if current() is None:
        return load_drivers(table, release, config_dir, env, trust_env=trust)
    from ..ground.inputs import observe

    # inside a read-once scope, one input: the config files and libraries it reads are
    # asked again (the whole load) by a later scrape; the environment is the process's
    return observe("installed providers", (release, config_dir, trust, env.get("RDMAV_DRIVERS"),
                   env.get("IBV_DRIVERS"), env.get("LD_LIBRARY_PATH")),
                   lambda: load_drivers(table, release, config_dir, env, trust_env=trust))
