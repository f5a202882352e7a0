"""One host, read once: :class:`~sysverbs.model.host.HostModel`, the facts of one
invocation, between the rank layer and the fleet layer (docs/architecture.md, "One host
model")."""

from __future__ import annotations

from .host import HostModel

__all__ = ["HostModel"]
