"""Checks a report in a real browser: headless Chromium loads the file, and we read back whether
every figure rendered, every console error, and a full-page screenshot.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: commands
on its fd 3, replies and events on its fd 4, each message JSON ended by a NUL byte), not through
``--dump-dom``/``--enable-logging``: its stderr log prints every console message at the same
level, so ``console.error`` could not be told from ``console.log`` there. Over the protocol:

- ``Runtime.exceptionThrown``: uncaught exceptions, including syntax errors;
- ``Runtime.consoleAPICalled`` of type ``error`` or ``assert``: ``console.error``, failed asserts;
- ``Log.entryAdded`` at level ``error``: what the browser itself reports, e.g. a resource that
  failed to load (so a report that reaches for the network is caught too);

are console errors. After the load event (and a short settle for timers), the page's
``document.body.dataset.figuresOk`` (``"<rendered>/<total>"``, set by the report's own script)
is read, and ``Page.captureScreenshot`` with ``captureBeyondViewport`` takes the whole page at
the window's width.

One Chromium process per check, in a temporary profile directory, killed (by its own pid) if it
outlives the time limit; nothing else is started or stopped.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dnscost.errors import MachineError

__all__ = ["BrowserCheck", "check", "find_chromium"]

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
_SETTLE_S = 0.5
"""Time given to timers and late scripts after the load event."""


@dataclass(frozen=True)
class BrowserCheck:
    """What the browser saw. ``figures_rendered``/``figures_total`` are None when the page did
    not set ``data-figures-ok``."""

    figures_rendered: int | None
    figures_total: int | None
    console_errors: list[str] = field(default_factory=list)
    screenshot: Path | None = None

    @property
    def ok(self) -> bool:
        """No console error, and every figure rendered."""
        return (
            not self.console_errors and self.figures_total is not None and self.figures_rendered == self.figures_total
        )


def find_chromium(chromium: str | None = None) -> str:
    """The Chromium binary to run: ``chromium`` if given, else the first on PATH. Raises
    :class:`MachineError` when there is none."""
    if chromium is not None:
        found = shutil.which(chromium)
        if found is None:
            raise MachineError(f"chromium not found at {chromium} (install the Debian package chromium)")
        return found
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found is not None:
            return found
    raise MachineError("chromium not found on PATH (install the Debian package chromium)")


class _Pipe:
    """The DevTools protocol over Chromium's pipe: numbered commands, events kept as they come."""

    def __init__(self, write_fd: int, read_fd: int, deadline: float) -> None:
        self._write_fd = write_fd
        self._read_fd = read_fd
        self._deadline = deadline
        self._buffer = b""
        self._next_id = 0
        self._selector = selectors.DefaultSelector()
        self._selector.register(read_fd, selectors.EVENT_READ)
        self.events: list[dict[str, object]] = []

    def close(self) -> None:
        self._selector.close()

    def _read_message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("chromium did not answer in time")
            if not self._selector.select(remaining):
                continue
            chunk = os.read(self._read_fd, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, object] = json.loads(raw)
        return message

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Sends one command and waits for its reply, keeping the events that arrive meanwhile."""
        self._next_id += 1
        message: dict[str, object] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._write_fd, data) :]
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error'].get('message', reply['error'])}")
                result: dict[str, object] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str, until: float) -> bool:
        """Reads events until ``method`` arrives (True) or ``until`` passes (False)."""
        if any(e.get("method") == method for e in self.events):
            return True
        while time.monotonic() < until:
            saved = self._deadline
            self._deadline = min(saved, until)
            try:
                event = self._read_message()
            except TimeoutError:
                return False
            finally:
                self._deadline = saved
            if "method" in event:
                self.events.append(event)
                if event["method"] == method:
                    return True
        return False


def _console_errors(events: list[dict[str, Any]]) -> list[str]:
    """The errors among the page's events, one line each."""
    errors: list[str] = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            exception = details.get("exception", {})
            text = exception.get("description") or details.get("text") or "exception"
            where = f" ({details.get('url', '')}:{details.get('lineNumber', 0) + 1})" if details.get("url") else ""
            errors.append(f"uncaught: {str(text).splitlines()[0]}{where}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = params.get("args", [])
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in args)
            errors.append(f"console.{params.get('type')}: {text}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            url = f" ({entry['url']})" if entry.get("url") else ""
            errors.append(f"{entry.get('source', 'browser')}: {entry.get('text', '')}{url}")
    return errors


def _figures(value: Any) -> tuple[int | None, int | None]:
    if not isinstance(value, str) or "/" not in value:
        return None, None
    rendered, total = value.split("/", 1)
    try:
        return int(rendered), int(total)
    except ValueError:
        return None, None


def _drive(pipe: _Pipe, url: str, screenshot: Path, width: int, deadline: float) -> BrowserCheck:
    target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
        pipe.send(f"{domain}.enable", session=session)
    pipe.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        session=session,
    )
    pipe.send("Page.navigate", {"url": url}, session=session)
    if not pipe.wait_for("Page.loadEventFired", deadline):
        raise TimeoutError("the page did not finish loading in time")
    pipe.wait_for("dnscost.never", min(deadline, time.monotonic() + _SETTLE_S))
    value = pipe.send(
        "Runtime.evaluate",
        {"expression": "document.body ? document.body.dataset.figuresOk : undefined", "returnByValue": True},
        session=session,
    )
    rendered, total = _figures(value.get("result", {}).get("value"))
    metrics = pipe.send("Page.getLayoutMetrics", session=session)
    size = metrics.get("cssContentSize") or metrics.get("contentSize") or {}
    height = max(1, int(size.get("height", 900)))
    shot = pipe.send(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        },
        session=session,
    )
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    errors = _console_errors(pipe.events)
    with contextlib.suppress(EOFError, RuntimeError, TimeoutError):
        pipe.send("Browser.close")
    return BrowserCheck(rendered, total, errors, screenshot)


def check(
    html: Path,
    screenshot: Path,
    *,
    chromium: str | None = None,
    timeout_s: float = 60,
    width: int = 1280,
) -> BrowserCheck:
    """Loads ``html`` in headless Chromium and reports the figures it rendered, its console
    errors, and a full-page screenshot written to ``screenshot`` (PNG, ``width`` CSS pixels
    wide). Raises :class:`MachineError` when Chromium is missing or fails to start, and
    :class:`TimeoutError` when the whole check takes longer than ``timeout_s``."""
    binary = find_chromium(chromium)
    deadline = time.monotonic() + timeout_s
    with tempfile.TemporaryDirectory(prefix="dnscost-chromium-") as profile:
        command = [
            binary,
            "--headless=new",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--mute-audio",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={width},900",
            "--remote-debugging-pipe",
        ]
        if os.geteuid() == 0:
            command.append("--no-sandbox")
        command.append("about:blank")
        # Chromium reads commands on fd 3 and writes replies on fd 4. Our ends and its ends are
        # first copied above fd 10, so that placing its ends on 3 and 4 cannot clobber one another.
        to_chromium_r, to_chromium_w = os.pipe()
        from_chromium_r, from_chromium_w = os.pipe()
        its_read = fcntl.fcntl(to_chromium_r, fcntl.F_DUPFD_CLOEXEC, 10)
        its_write = fcntl.fcntl(from_chromium_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_chromium_r)
        os.close(from_chromium_w)

        def place_fds() -> None:  # in the child, before exec; dup2 leaves 3 and 4 inheritable
            os.dup2(its_read, 3)
            os.dup2(its_write, 4)

        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=False,  # Python's own descriptors are not inheritable (PEP 446); 3 and 4 must stay
                preexec_fn=place_fds,
                start_new_session=True,
            )
        except OSError as e:
            for fd in (its_read, its_write, to_chromium_w, from_chromium_r):
                os.close(fd)
            raise MachineError(f"chromium failed to start: {e}") from None
        os.close(its_read)
        os.close(its_write)
        pipe = _Pipe(to_chromium_w, from_chromium_r, deadline)
        try:
            return _drive(pipe, html.resolve().as_uri(), screenshot, width, deadline)
        except EOFError:
            raise MachineError(f"chromium ({binary}) exited before the check finished") from None
        finally:
            pipe.close()
            os.close(to_chromium_w)
            os.close(from_chromium_r)
            try:
                process.wait(timeout=max(1.0, min(10.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                # Its own process group (start_new_session): the browser and its helpers, nothing else.
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
