"""The tmux helpers of the real-binary tests: a private tmux server (:class:`Terminal`) whose
panes a test types into and reads back as a person would, and the checks that make a wait on a
screen sound (:meth:`Terminal.wait_dialog`: a whole dialog box, proven fresh by what the program
wrote since the last key). Used by ``test_tmux.py`` (which holds the ``terminal`` fixture) and
the other tmux tests.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path

TIMEOUT = 90.0
ESCAPES = re.compile(
    r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|.)"
)
"""A terminal's escape sequences (CSI, OSC, DCS and the rest, two-byte escapes)."""
BINARY = Path(sys.executable).with_name("coding-agent")


ARMING = "(keys typed now stay in the editor)"
"""The end of a chord dialog's key line while it arms (``chord.textual_dialogs.ARMING_LINE``):
written whenever a dialog appears (and again after each text key typed at it)."""


def cells(line: str) -> list[str]:
    """``line`` as terminal cells: a wide character (CJK, most emoji) takes its cell and an empty
    one after it, as tmux lays it out, so columns line up across lines."""
    out: list[str] = []
    for char in line:
        if unicodedata.combining(char) and out:
            out[-1] += char
            continue
        out.append(char)
        if unicodedata.east_asian_width(char) in ("W", "F"):
            out.append("")
    return out


def dialog_boxes(screen: str) -> list[list[str]]:
    """Every whole dialog box on ``screen`` (a chord dialog's thick border: a top row
    ``█▀▀…▀█``, both sides on every row, a bottom row ``█▄▄…▄█`` of the same columns), each as
    the text of its inner rows, stripped. A box whose bottom or a side is missing (a frame still
    being drawn, a box half covered by another) is not one."""
    grid = [cells(line) for line in screen.splitlines()]
    boxes: list[list[str]] = []
    for top, row in enumerate(grid):
        text = "".join(cell or "\0" for cell in row)  # one character per cell
        for found in re.finditer(r"█▀{3,}█", text):
            left, right = found.start(), found.end() - 1
            inner: list[str] = []
            for below in grid[top + 1 :]:
                if len(below) <= right or below[left] != "█" or below[right] != "█":
                    break
                middle = below[left + 1 : right]
                if set(middle) == {"▄"}:
                    boxes.append(inner)
                    break
                inner.append("".join(middle).strip())
    return boxes


def key_line(rows: list[str]) -> str:
    """The key line of a dialog box's rows: the last block of rows (it may wrap) after a blank
    one, the bottom padding left out."""
    filled = list(rows)
    while filled and not filled[-1]:
        filled.pop()
    start = len(filled)
    while start > 0 and filled[start - 1]:
        start -= 1
    return " ".join(filled[start:])


class Terminal:
    """One private tmux server (its own socket), with helpers to type and to read panes.

    Every window's output is also recorded (``tmux pipe-pane``, in ``<socket>.logs/``): what a
    program wrote, in order, is what proves a screen is not stale (see :meth:`wait_dialog`).
    """

    def __init__(self, socket: Path, env: dict[str, str]) -> None:
        self.socket = socket
        self.env = env
        self.logs = Path(f"{socket}.logs")
        self._marks: dict[str, int] = {}

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", str(self.socket), *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return done.stdout

    def start(self, window: str, cwd: Path, command: str) -> None:
        """Run ``command`` in a new window (the first call starts the server); what it writes
        is recorded from the start (the pipe is opened in the same tmux command list, before
        the server reads the pane)."""
        # The shell stays after the program exits, so its exit line can be read (a Ctrl+C the
        # program left unread does not end it).
        line = f"{command}; status=$?; trap '' INT; echo EXITED $status; exec sleep 600"
        self.logs.mkdir(exist_ok=True)
        log = self.log(window)
        log.touch()
        pipe = ("pipe-pane", "-o", "-t", f"main:{window}", f"cat >> {shlex.quote(str(log))}")
        if self.socket.exists():
            self.tmux("new-window", "-d", "-n", window, "-c", str(cwd), line, ";", *pipe)
        else:
            self.tmux(
                "new-session", "-d", "-s", "main", "-n", window, "-x", "120", "-y", "45",
                "-c", str(cwd), line, ";", *pipe,
            )  # fmt: skip

    def close(self) -> None:
        """End the tmux server (and every program in it) and remove its socket and logs."""
        if self.socket.exists():
            subprocess.run(
                ["tmux", "-S", str(self.socket), "kill-server"], env=self.env, check=False
            )
            self.socket.unlink(missing_ok=True)
        shutil.rmtree(self.logs, ignore_errors=True)

    def log(self, window: str) -> Path:
        """The file recording everything the program in ``window`` wrote (raw, escapes kept)."""
        return self.logs / f"{window}.log"

    def _size(self, window: str) -> int:
        try:
            return self.log(window).stat().st_size
        except FileNotFoundError:
            return 0

    def screen(self, window: str) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", f"main:{window}")

    def type(self, window: str, text: str) -> None:
        self._marks[window] = self._size(window)
        self.tmux("send-keys", "-t", f"main:{window}", "-l", text)

    def press(self, window: str, *keys: str) -> None:
        self._marks[window] = self._size(window)
        self.tmux("send-keys", "-t", f"main:{window}", *keys)

    def wait(self, window: str, check: Callable[[str], bool], what: str) -> str:
        """Poll the pane until ``check(text)``; fail with the last screen after the deadline."""
        deadline = time.monotonic() + TIMEOUT
        text = ""
        while time.monotonic() < deadline:
            text = self.screen(window)
            if check(text):
                return text
            time.sleep(0.1)  # polling the pane; the condition is what is waited on
        raise AssertionError(f"timed out waiting for {what}; the screen was:\n{text}")

    def wait_text(self, window: str, needle: str) -> str:
        return self.wait(window, lambda text: needle in text, repr(needle))

    def written(self, window: str, start: int = 0) -> str:
        """What the program in ``window`` wrote from byte ``start`` of its log, escapes removed."""
        with self.log(window).open("rb") as log:
            log.seek(start)
            raw = log.read()
        return ESCAPES.sub("", raw.decode("utf-8", "replace"))

    def wait_written(self, window: str, needle: str) -> str:
        """Poll what ``window``'s program wrote since the last key sent to it until ``needle``
        was written (escapes removed): a line on the screen only briefly (a toast) may come and
        go between two polls of the pane on a loaded machine, but it stays in the log."""
        start = self._marks.get(window, 0)
        deadline = time.monotonic() + TIMEOUT
        text = ""
        while time.monotonic() < deadline:
            text = self.written(window, start)
            if needle in text:
                return text
            time.sleep(0.1)  # polling the file; the condition is what is waited on
        raise AssertionError(f"timed out waiting for {needle!r} to be written:\n{text[-2000:]}")

    def wait_dialog(
        self,
        window: str,
        title: str,
        keys: str = "enter answers",
        body: str = "",
        *,
        timeout: float = TIMEOUT,
    ) -> str:
        """Wait until the dialog titled ``title`` takes answers, and return the screen.

        A chord dialog answers nothing while it arms (its key line reads "… (keys typed now stay
        in the editor)", keys then are dropped or go to the editor), so keys may be sent only
        once the *whole* dialog shows armed. Two checks make that so by construction:

        * **the whole box**: the screen shows one complete dialog box (top, both sides, bottom)
          holding ``title`` (and ``body`` when given) above a key line that holds ``keys``;
        * **fresh**: since this window's last key (or the last dialog waited for), the program
          wrote a dialog's arming line, or ``title`` and after it ``keys``; and the log was
          read before the screen. A dialog writes its arming line where its key line goes when
          it appears (or when a typed key arms it again), and its armed key line after its
          title; the screen, which is at least as new as the log, then shows this dialog's own
          key line (or a newer one), never the armed key line of the dialog before it under a
          new frame still half drawn (tmux can show the top of a frame before its bottom
          arrives: the new title above the old dialog's armed key line). When the dialog opens
          over another one whose key line also holds ``keys`` (drawn dimmed behind it), pass a
          ``keys`` only the new dialog's key line holds.

        Each call consumes one appearance: a second dialog waits for its own arming line. So
        call it once per dialog, after the key that brings the dialog up, and give ``body``
        when two dialogs in a row have the same title.
        """
        start = self._marks.get(window, 0)
        deadline = time.monotonic() + timeout
        text = ""
        fresh = False
        while time.monotonic() < deadline:
            end = self._size(window)  # read before the screen: the screen is at least as new
            if not fresh:
                since = self.written(window, start)
                after_title = since.find(title)
                fresh = ARMING in since or (after_title >= 0 and keys in since[after_title:])
            text = self.screen(window)
            if fresh and any(
                keys in key_line(rows)
                and any(title in row for row in rows)
                and (not body or any(body in row for row in rows))
                for rows in dialog_boxes(text)
            ):
                self._marks[window] = end
                return text
            time.sleep(0.1)  # polling the pane; the condition is what is waited on
        state = (
            "armed in a whole box"
            if fresh
            else "to appear (since the last key, no arming line was written, nor its title then"
            f" {keys!r})"
        )
        raise AssertionError(
            f"timed out waiting for dialog {title!r} {state}; the screen was:\n{text}"
        )
