"""The suite's scratch directories with fixed names, made without following links.

``/dev/shm/sysverbs-test`` (:func:`tests.conftest.fast_tmp`) and
``<tmp>/sysverbs-test-cache-<uid>`` (the fixture cache the suite points
``XDG_CACHE_HOME`` at) have names anyone can guess, in directories anyone can write.
``makedirs(exist_ok=True)`` then ``chmod`` follows a link planted at that name: a suite
run as root would make the link's target (``/etc``, say) world-writable.
:func:`scratch_dir` instead makes the directory with ``mkdir`` (which never follows a
link in its last component), opens it with ``O_NOFOLLOW | O_DIRECTORY`` and checks and
changes it only through that descriptor; it refuses, with :class:`ScratchError`, a link,
anything not a directory, and a directory of another user.  In a sticky directory
(``/dev/shm``, ``/tmp``) no one else can then rename or replace the checked entry.
"""

from __future__ import annotations

import os
import stat


class ScratchError(RuntimeError):
    """A scratch directory's name is taken by something the suite must not use."""


def scratch_dir(base: str, name: str, mode: int, shared: bool = False) -> str:
    """``base/name``, a real directory with exactly ``mode``: made if missing, else
    checked; returns its path.  It must belong to this user, or (``shared``: a
    directory every user's runs may use) to root with ``mode`` already; ``mode`` is set
    through a descriptor of the directory, never through a link."""
    path = os.path.join(base, name)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        st = os.lstat(path)
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise ScratchError(f"{path} is {what}: the test suite will not use it (someone "
                           f"may have planted it); remove it and run again") from e
    try:
        st = os.fstat(fd)
        mine = st.st_uid == os.getuid()
        if not mine and not (shared and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == mode):
            raise ScratchError(f"{path} belongs to uid {st.st_uid}, not to uid {os.getuid()}"
                               f" (mode {stat.S_IMODE(st.st_mode):o}): the test suite will "
                               "not use it; remove it and run again")
        if stat.S_IMODE(st.st_mode) != mode:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return path
