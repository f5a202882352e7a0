"""Read-only access to a git repository, and rdma-core's release tags in it."""

from __future__ import annotations

import re
import subprocess
from typing import Optional

# ---------------------------------------------------------------------------
# git access


class Git:
    """Read-only access to a (possibly bare) git repository."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._blobs: dict[str, str] = {}
        self._trees: dict[tuple[str, str], dict[str, str]] = {}
        self._batch: Optional[subprocess.Popen[bytes]] = None

    def run(self, *args: str) -> str:
        out = subprocess.run(
            ["git", "-C", self.path, *args], check=True, capture_output=True
        ).stdout
        return out.decode("utf-8", "replace")

    def tags(self) -> list[str]:
        return self.run("tag", "-l", "v*").split()

    def tree(self, ref: str, prefix: str = "") -> dict[str, str]:
        """Map of path -> blob id for every file under ``prefix`` at ``ref``."""
        key = (ref, prefix)
        if key not in self._trees:
            args = ["ls-tree", "-r", ref]
            if prefix:
                args += ["--", prefix]
            files: dict[str, str] = {}
            for line in self.run(*args).splitlines():
                meta, _, path = line.partition("\t")
                parts = meta.split()
                if len(parts) == 3 and parts[1] == "blob":
                    files[path] = parts[2]
            self._trees[key] = files
        return self._trees[key]

    def blob(self, sha: str) -> str:
        if sha in self._blobs:
            return self._blobs[sha]
        if self._batch is None:
            self._batch = subprocess.Popen(
                ["git", "-C", self.path, "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        proc = self._batch
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(sha.encode() + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            raise KeyError(sha)
        data = proc.stdout.read(int(header[2]))
        proc.stdout.read(1)
        text = data.decode("utf-8", "replace")
        self._blobs[sha] = text
        return text

    def file(self, ref: str, path: str) -> Optional[str]:
        sha = self.tree(ref).get(path)
        return None if sha is None else self.blob(sha)

    def close(self) -> None:
        if self._batch is not None:
            if self._batch.stdin is not None:
                self._batch.stdin.close()
            self._batch.wait()
            self._batch = None


# ---------------------------------------------------------------------------
# releases


TAG_RE = re.compile(r"v(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-rc(\d+))?\Z")


def release_refs(git: Git, head: Optional[str]) -> dict[int, str]:
    """One ref per major release: vN.0 / vN if tagged, else the newest vN-rcM."""
    best: dict[int, tuple[tuple[int, int], str]] = {}
    for tag in git.tags():
        m = TAG_RE.match(tag)
        if not m:
            continue
        major = int(m.group(1))
        if m.group(3) is not None or (m.group(2) not in (None, "0")):
            continue  # stable point releases (vN.M, M > 0)
        rank = (1, 0) if m.group(4) is None else (0, int(m.group(4)))
        if major not in best or rank > best[major][0]:
            best[major] = (rank, tag)
    refs = {major: tag for major, (_, tag) in best.items()}
    if head is not None:
        cmake = git.run("show", f"{head}:CMakeLists.txt")
        m = re.search(r'set\(PACKAGE_VERSION\s+"(\d+)', cmake)
        if m and int(m.group(1)) not in refs:
            refs[int(m.group(1))] = head
    return dict(sorted(refs.items()))
