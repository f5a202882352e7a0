"""Bash completion for ``sysverbs``, written from the command line's own parser.

    eval "$(sysverbs --completion bash)"     # or save it under bash-completion's dir

Commands, each command's options, the choices of an option (``--source``, ``--format``,
...), the bundled fixtures' names for ``--fixture``, directories for ``DIR`` options and
files for ``FILE`` ones: everything comes from the parser that parses the words, so the
completion cannot drift from the commands.  No dependency beyond bash itself.
"""

from __future__ import annotations

import argparse
import shlex

__all__ = ["bash_script", "command_words"]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_words(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``"devices"``, ..., ``"nccl check"`` -> the parser of that command (a command
    with subcommands, ``nccl``, stands for itself too, with its subcommands' names)."""
    out: dict[str, argparse.ArgumentParser] = {}
    for name, sub in _subcommands(parser).items():
        out[name] = sub
        for inner, subsub in _subcommands(sub).items():
            out[f"{name} {inner}"] = subsub
    return out


def _values(action: argparse.Action) -> str:
    """The bash that completes the value of an option that takes one ("" for a flag)."""
    from ..testing.host import fixture_names

    if action.nargs == 0:
        return ""
    if action.choices is not None:
        words = " ".join(str(c) for c in action.choices)
    elif "--fixture" in action.option_strings:
        words = " ".join(fixture_names())
    elif action.metavar == "DIR":
        return 'COMPREPLY=($(compgen -d -- "$cur"))'
    elif action.metavar == "FILE":
        return 'COMPREPLY=($(compgen -f -- "$cur"))'
    else:
        return "COMPREPLY=()"
    return f'COMPREPLY=($(compgen -W {shlex.quote(words)} -- "$cur"))'


def bash_script(parser: argparse.ArgumentParser) -> str:
    """The completion script for ``parser`` (``sysverbs.cli``'s whole parser)."""
    top = [o for a in parser._actions for o in a.option_strings]
    commands = command_words(parser)
    cases: list[str] = []
    value_cases: list[str] = []
    for word, sub in commands.items():
        if " " not in word and _subcommands(sub):
            inner = " ".join(_subcommands(sub))
            cases.append(f'    {shlex.quote(word)}) words={shlex.quote(inner)} ;;')
            continue
        opts = [o for a in sub._actions for o in a.option_strings]
        cases.append(f'    {shlex.quote(word)}) words={shlex.quote(" ".join(opts))} ;;')
        for action in sub._actions:
            body = _values(action)
            if body and action.option_strings:
                pattern = "|".join(shlex.quote(f"{word}:{o}") for o in action.option_strings)
                value_cases.append(f"    {pattern}) {body}; return ;;")
    names = " ".join(w for w in commands if " " not in w)
    return f"""# bash completion for sysverbs (sysverbs --completion bash)
_sysverbs() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
  local cmd="" i w words
  # the command: the first word that is no option (and, after nccl, the next one)
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${{COMP_WORDS[i]}}"
    case "$w" in
      -*) ;;
      *) if [[ -z "$cmd" ]]; then cmd="$w";
         elif [[ "$cmd" == nccl ]]; then cmd="$cmd $w"; fi ;;
    esac
  done
  case "$cmd:$prev" in
{chr(10).join(value_cases)}
  esac
  case "$cmd" in
    "") words={shlex.quote(names + " " + " ".join(top))} ;;
{chr(10).join(cases)}
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -F _sysverbs sysverbs
"""
