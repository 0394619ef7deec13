"""Where a headless prompt is on the command line (standard library only: the warm start's thin
client, :func:`coding_agent.warm.client.served`, asks the same question before it imports
anything).

``-p``/``--print`` and ``--json`` are flags that may also carry the prompt (``-p "prompt"``,
``-pPROMPT``, ``--print=PROMPT``), and the prompt may stand anywhere among the other options, as
in Claude Code: ``coding-agent -p --model faux/faux-1 "what is up"`` and ``coding-agent "what
is up" --json`` are the same run as ``coding-agent -p "what is up"``. With ``-p``/``--json`` the
subcommands are not parsed: a prompt word that names one is the prompt (``coding-agent -p
config``); a subcommand is the first word, before ``-p`` (``coding-agent sessions --json`` lists
the sessions).

``--wait-for-approval`` takes a number of seconds as an optional value: a next word that is not
one (``-p --wait-for-approval "prompt"``) is left for the prompt (:func:`split_wait_value`).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `from typing import`: the thin client does without typing

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

__all__ = ["WAIT_FLAG", "headless_flag", "is_headless", "split_wait_value", "wait_seconds"]

WAIT_FLAG = "--wait-for-approval"


def headless_flag(arg: str) -> bool:
    """Whether ``arg`` is ``-p``/``--print``/``--json`` (with or without its value: ``-pX``,
    ``--print=X``, ``--json=X``, or after ``-c``: ``-cp``)."""
    if arg in ("--print", "--json") or arg.startswith(("--print=", "--json=")):
        return True
    if arg.startswith("-") and not arg.startswith("--"):
        return arg[1:].lstrip("c").startswith("p")  # -p, -pPROMPT, -cp, -cpPROMPT
    return False


def is_headless(
    argv: Sequence[str],
    *,
    subcommands: Collection[str] = (),
    takes_value: Collection[str] = (),
) -> bool:
    """Whether ``argv`` is a headless run: ``-p``/``--print``/``--json`` comes before any
    ``--`` and no subcommand name stands as a word before it (``sessions --json`` is the
    ``sessions`` command). ``takes_value``: the options whose next word is their value (never
    a subcommand)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--":
            return False
        if headless_flag(arg):
            return True
        if arg.startswith("-"):
            skip = arg in takes_value
        elif arg in subcommands:
            return False
    return False


def wait_seconds(text: str) -> float:
    """``--wait-for-approval``'s value: seconds ``>= 0``, or ``inf`` (until answered)."""
    value = float(text)  # ValueError: not a number
    if value != value or value < 0:  # NaN (not math.isnan: the thin client imports no math)
        raise ValueError(f"{text!r} is not a number of seconds >= 0")
    return value


def split_wait_value(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--wait-for-approval WORD`` (WORD not a number of seconds: the prompt, a
    subcommand) written ``--wait-for-approval=inf WORD``, so the option leaves WORD alone."""
    out: list[str] = []
    for index, arg in enumerate(argv):
        if arg == "--":
            out.extend(argv[index:])
            break
        following = argv[index + 1] if index + 1 < len(argv) else None
        # an unambiguous abbreviation too (argparse takes --wait, and no other option is --w...)
        if (
            len(arg) >= 3
            and WAIT_FLAG.startswith(arg)
            and following is not None
            and not following.startswith("-")
            and not _is_seconds(following)
        ):
            arg = f"{WAIT_FLAG}=inf"
        out.append(arg)
    return out


def _is_seconds(text: str) -> bool:
    try:
        wait_seconds(text)
    except ValueError:
        return False
    return True
