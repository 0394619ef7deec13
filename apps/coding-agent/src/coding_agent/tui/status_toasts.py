"""What the TUI says about its session worker's status and about hot reloads, as toasts.

:class:`WorkerStatusToasts` listens to the worker's status (``RemoteConversationClient.on_status``):
failed reloads, a storage failure, an unavailable sandbox, a model switched to text tool calls.
:func:`tui_reload_toast` toasts the TUI's own hot reloads (``--dev``). :func:`pi_setup_toasts`
folds the warnings about pi's setup shown at start into one toast when there are several.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from coding_agent.settings.package_reload import PackageReloader
from coding_agent.tui.app import CodingAgentApp

if TYPE_CHECKING:  # start-up time: chord.facet_packages loads after the first frame
    from chord import ReloadReport

__all__ = ["WorkerStatusToasts", "pi_setup_toasts", "tui_reload_toast"]

_OWN_TOAST = ("trust", "approv", "sandbox", "safety", "private (mode", "runs a command")
"""Words of a warning that concerns safety or a secret: it keeps a toast of its own."""
_WHERE = re.compile(r"^(?:~|/|[A-Za-z]:\\)\S*?: ")
"""The file (``path`` or ``path:line``) a warning starts with."""
_LABEL_END = re.compile(r"; |: | \(")
LABEL_WIDTH = 60
"""How much of one warning a folded toast shows."""


def _label(warning: str) -> str:
    """``warning`` short: without the file it names, up to its first ``;``, ``:`` or ``(``."""
    text = _WHERE.sub("", warning, count=1)
    text = _LABEL_END.split(text, maxsplit=1)[0]
    return text if len(text) <= LABEL_WIDTH else text[: LABEL_WIDTH - 1] + "…"


def pi_setup_toasts(warnings: Sequence[str]) -> list[str]:
    """The toasts for the warnings about pi's setup shown at start
    (:attr:`~coding_agent.settings.config.EffectiveConfig.warnings`): two or more are one toast,
    a count and each one short, pointing at ``coding-agent config``, which prints each whole
    (``# warning: …``). A lone warning, and one that concerns safety or a secret (a key file
    that is not private, a key read by running a command), is a toast of its own, whole."""
    folded = [w for w in warnings if not any(word in w for word in _OWN_TOAST)]
    if len(folded) < 2:
        return list(warnings)
    summary = (
        f"{len(folded)} things of pi's setup are not used here: "
        f"{'; '.join(_label(w) for w in folded)} — `coding-agent config` lists why"
    )
    return [summary, *(w for w in warnings if w not in folded)]


def tui_reload_toast(
    app: CodingAgentApp, reloader: PackageReloader
) -> Callable[[ReloadReport], None]:
    """``--dev`` in the TUI: toast each hot reload, a short notice when it worked, an error
    when it failed (``/reload`` toasts its own summary)."""

    def on_report(report: ReloadReport) -> None:
        if reloader.busy:
            return
        if report.ok:
            app.tui.notify(f"Reloaded {report.package} (TUI)")
        else:
            app.tui.notify(
                f"Reload of {report.package} (TUI) failed: {report.message}", severity="error"
            )

    return on_report


class WorkerStatusToasts:
    """The status listener: repaint the footer (a context window may have become known), toast
    every failed reload the worker reports (each once, by its ``number``), and say once per
    model when one switched to text tool calls.

    While ``/reload`` runs it reports the worker's outcomes itself: :meth:`hold` keeps failures
    back until its release, which drops those of the packages the summary named.
    """

    def __init__(self, app: CodingAgentApp) -> None:
        self._app = app
        self._seen = 0  # the highest report number handled
        self._pid: Any = None  # the worker the numbers belong to
        self._holds = 0
        self._held: list[dict[str, Any]] = []
        self._text_tools: set[str] = set()  # models already said to call tools through text
        self._storage_failure: str | None = None  # the last storage failure said
        self._sandbox_said = False  # "the sandbox is unavailable" said once

    def listener(self, status: dict[str, Any]) -> None:
        self._app.footer.repaint()
        pid = status.get("pid")
        fresh = pid != self._pid  # reports from before this TUI saw the worker: no notices
        if fresh:  # a new worker counts its reports from 1 again
            self._seen, self._pid = 0, pid
        failure = status.get("storageFailure")
        if isinstance(failure, str) and failure != self._storage_failure:
            self._storage_failure = failure
            self._app.tui.notify(
                f"{failure}. The session worker stops; it is started again and resumes from "
                "what was stored (nothing acknowledged is lost) once the cause is fixed",
                severity="error",
            )
        sandbox = status.get("sandbox")
        if (
            isinstance(sandbox, dict)
            and sandbox.get("available") is False
            and not self._sandbox_said
        ):
            self._sandbox_said = True
            self._app.tui.notify(
                f"The OS sandbox is unavailable: {sandbox.get('reason')}. Commands are not "
                "sandboxed; the sandbox permission mode asks as ask mode does (/sandbox)",
                severity="warning",
            )
        switched = status.get("textToolCalling")
        for model in cast(list[Any], switched) if isinstance(switched, list) else []:
            if isinstance(model, str) and model not in self._text_tools:
                self._text_tools.add(model)
                self._app.tui.notify(
                    f"{model} does not take native tool calls: it now calls tools through "
                    "text blocks (--tool-calling text skips the first refusal)",
                    severity="warning",
                )
        reloads = status.get("reloads")
        for report in cast(list[Any], reloads) if isinstance(reloads, list) else []:
            number = report.get("number") if isinstance(report, dict) else None
            if type(number) is not int or number <= self._seen:
                continue
            self._seen = number
            if report.get("ok") is True and not fresh and not self._holds:
                self._app.tui.notify(f"Reloaded {report.get('package')}")  # a hot reload worked
            elif report.get("ok") is False:
                if self._holds:
                    self._held.append(cast(dict[str, Any], report))
                else:
                    self._toast(cast(dict[str, Any], report))

    def hold(self) -> Callable[[Iterable[str]], None]:
        self._holds += 1
        released = False

        def release(covered: Iterable[str]) -> None:
            nonlocal released
            if released:
                return
            released = True
            named = set(covered)
            self._held = [report for report in self._held if report.get("package") not in named]
            self._holds -= 1
            if not self._holds:
                held, self._held = self._held, []
                for report in held:
                    self._toast(report)

        return release

    def _toast(self, report: dict[str, Any]) -> None:
        self._app.tui.notify(
            f"Reload of {report.get('package')} failed: {report.get('message')}",
            severity="error",
        )
