"""The one host model of a command's invocation (docs/architecture.md, "One host model").

:func:`model_of` gives the :class:`~sysverbs.model.HostModel` of the command line's
``args.host_root`` (built once, kept on ``args``); :func:`read_once` makes a command's
``run()`` one invocation of it: every sysfs file it reads, through the model's parts
or the library calls behind the command, is read once.  A command that repeats itself
(``metrics --interval``, ``--listen``; ``nfd --interval``) builds a model per round
instead (:func:`fresh_model`)."""

from __future__ import annotations

import functools

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, Callable, Optional

    from ..model import HostModel

    Run = Callable[[argparse.Namespace, dict[str, Any]], int]

__all__ = ["model_of", "fresh_model", "read_once", "say_link_layer"]


def fresh_model(args: argparse.Namespace) -> HostModel:
    """A new model of ``args.host_root`` (set by ``listing_options()``)."""
    from ..model import HostModel

    return HostModel(args.host_root)


def model_of(args: argparse.Namespace) -> HostModel:
    """The invocation's model: built on first use, then the same one."""
    model: HostModel | None = getattr(args, "host_model", None)
    if model is None or model.root is not args.host_root:
        model = args.host_model = fresh_model(args)
    return model


def read_once(run: Run) -> Run:
    """``run`` with its invocation's model in force (:meth:`HostModel.reading`)."""
    @functools.wraps(run)
    def once(args: argparse.Namespace, opts: dict[str, Any]) -> int:
        with model_of(args).reading():
            return run(args, opts)
    return once


def say_link_layer(args: argparse.Namespace, command: str, gpus: Optional[list[int]] = None,
                   **filters: Any) -> bool:
    """Warn, on a host of InfiniBand and RoCE ports, which ranks (GPUs, by index; only
    ``gpus`` when given) the host's one link layer costs their nearest NIC, and which it
    leaves none (:func:`~sysverbs.model.linklayer.host_link_layer_verdict` of the
    invocation's model).  False when no single link layer serves every rank."""
    from ..model.linklayer import host_link_layer_verdict
    from .contract import warning

    verdict = host_link_layer_verdict(model_of(args).placement, **filters)
    if verdict is None:
        return True
    for line in verdict.warnings(gpus):
        warning(command, line)
    return verdict.ok()
