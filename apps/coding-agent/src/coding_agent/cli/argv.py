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

pi's spellings of the same options are taken as they are (:func:`pi_words`): ``--mode json`` is
``--json``, ``--mode text`` is ``-p``, and ``--provider NAME --model ID`` is ``--model NAME/ID``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `from typing import`: the thin client does without typing

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

__all__ = [
    "WAIT_FLAG",
    "PiFlagError",
    "headless_flag",
    "is_headless",
    "pi_words",
    "split_wait_value",
    "wait_seconds",
]


class PiFlagError(ValueError):
    """A pi option with no counterpart here, or given without what it needs; the message
    says what to write instead."""


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


_PI_MODES = {"json": "--json", "text": "--print"}


def pi_words(argv: Sequence[str]) -> list[str]:
    """``argv`` with pi's spellings written as this command line's (module docstring), up to a
    ``--``. Raises :class:`PiFlagError` for ``--mode rpc`` (pi's RPC protocol: this agent speaks
    ACP and its own server instead), a mode that is neither, and ``--provider`` without a
    ``--model`` id."""
    out: list[str] = []
    provider: str | None = None
    words = list(argv)
    index = 0
    while index < len(words):
        arg = words[index]
        if arg == "--":
            out.extend(words[index:])
            break
        name, equals, value = arg.partition("=")
        if name in ("--mode", "--provider"):
            if not equals:
                index += 1
                value = words[index] if index < len(words) else ""
            if name == "--provider":
                provider = value
            elif value in _PI_MODES:
                out.append(_PI_MODES[value])
            elif value == "rpc":
                raise PiFlagError(
                    "--mode rpc is pi's RPC protocol, which this agent does not speak: "
                    "`coding-agent acp` speaks the Agent Client Protocol and `coding-agent "
                    "serve` hosts sessions (docs/server.md); --json streams events"
                )
            else:
                raise PiFlagError(f"--mode takes json or text (pi's), got {value!r}")
        else:
            out.append(arg)
        index += 1
    if provider is None:
        return out
    for index, arg in enumerate(out):
        name, equals, value = arg.partition("=")
        if name == "--model" and (equals or index + 1 < len(out)):
            model = value if equals else out[index + 1]
            if "/" not in model or not model.startswith(f"{provider}/"):
                model = f"{provider}/{model}"
            out[index : index + (1 if equals else 2)] = [f"--model={model}"]
            return out
    raise PiFlagError(f"--provider {provider} needs the model too: --model {provider}/ID")
