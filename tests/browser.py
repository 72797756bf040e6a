"""Open a page in headless Chromium and report what a person would see: console errors,
network requests, the DOM after scripts ran, and a full-page screenshot.

Drives Debian's ``chromium`` over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: JSON messages ending in NUL on file descriptors 3 and 4),
with the standard library only.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_TRAMPOLINE = """
import fcntl, os, sys
read_fd, write_fd = (fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3])
os.dup2(read_fd, 3)
os.dup2(write_fd, 4)
os.execv(sys.argv[3], sys.argv[3:])
"""

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium_path() -> str | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageVisit:
    console_errors: list[str] = field(default_factory=list)
    console_messages: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    dialogs: list[str] = field(default_factory=list)  # alert(), confirm(), ... a script opened
    values: dict[str, Any] = field(default_factory=dict)  # expression -> its value


class _Pipe:
    def __init__(self, process: subprocess.Popen[bytes], write_fd: int, read_fd: int) -> None:
        self.process = process
        self.write_fd = write_fd
        self.read_fd = read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        for event in self.events:
            if event.get("method") == method:
                return event
        deadline = time.monotonic() + timeout
        while True:
            event = self._read(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if ready:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)


def visit(
    page: Path,
    screenshot: Path | None = None,
    expressions: tuple[str, ...] = (),
    element_screenshots: dict[str, Path] | None = None,
    width: int = 1280,
    height: int = 900,
    screenshot_height: int | None = None,
    ready_expression: str = "document.body && document.body.dataset.ready === '1'",
    timeout: float = 90.0,
) -> PageVisit:
    """Load ``page``, wait until ``ready_expression`` holds, evaluate ``expressions`` and take
    a screenshot of the whole page (or its top ``screenshot_height`` pixels) to ``screenshot``,
    and of single elements to ``element_screenshots`` (CSS selector -> file)."""
    binary = chromium_path()
    if binary is None:
        raise RuntimeError("no chromium binary")
    profile_dir = tempfile.mkdtemp(prefix="tpuperf-chromium-")
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile_dir}",
        "--remote-debugging-pipe",
        "about:blank",
    ]
    # The DevTools pipe: the browser reads fd 3 and writes fd 4. A small Python trampoline
    # puts the pipe ends there and execs the browser (no preexec_fn, so subprocess spawns
    # without forking this process, which may hold JAX's threads).
    process = subprocess.Popen(
        [sys.executable, "-c", _TRAMPOLINE, str(to_browser_r), str(from_browser_w), binary, *flags],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(to_browser_r, from_browser_w),
    )
    os.close(to_browser_r)
    os.close(from_browser_w)
    pipe = _Pipe(process, to_browser_w, from_browser_r)
    result = PageVisit()
    try:
        target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Runtime", "Log", "Network", "Page"):
            pipe.send(f"{domain}.enable", session=session)
        pipe.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        pipe.send("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
        pipe.wait_event("Page.loadEventFired", timeout)
        deadline = time.monotonic() + timeout
        while not _evaluate(pipe, session, ready_expression):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page never got ready ({ready_expression})")
            time.sleep(0.1)
        for expression in expressions:
            result.values[expression] = _evaluate(pipe, session, expression)
        if screenshot is not None:
            full = _evaluate(pipe, session, "document.documentElement.scrollHeight")
            full = min(full, screenshot_height or full)
            shot = pipe.send(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "captureBeyondViewport": True,
                    "clip": {"x": 0, "y": 0, "width": width, "height": full, "scale": 1},
                },
                session=session,
                timeout=timeout,
            )
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        for selector, path in (element_screenshots or {}).items():
            box = _evaluate(
                pipe,
                session,
                f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                ".getBoundingClientRect(); return {x: r.x + window.scrollX, "
                "y: r.y + window.scrollY, width: r.width, height: r.height}; })()",
            )
            shot = pipe.send(
                "Page.captureScreenshot",
                {"format": "png", "captureBeyondViewport": True, "clip": {**box, "scale": 1}},
                session=session,
                timeout=timeout,
            )
            path.write_bytes(base64.b64decode(shot["data"]))
        # Let late messages arrive, then collect what the page said and asked for.
        _evaluate(pipe, session, "1")
    finally:
        try:
            pipe.send("Browser.close", timeout=10)
        except Exception:
            process.kill()
        process.wait(timeout=30)
        os.close(to_browser_w)
        os.close(from_browser_r)
        shutil.rmtree(profile_dir, ignore_errors=True)
    for event in pipe.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            result.console_messages.append(f"{params['type']}: {text}")
            if params["type"] in ("error", "assert"):
                result.console_errors.append(text)
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            result.console_errors.append(
                details.get("exception", {}).get("description") or details.get("text", "")
            )
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            result.console_errors.append(params["entry"]["text"])
        elif method == "Network.requestWillBeSent":
            result.requests.append(params["request"]["url"])
        elif method == "Page.javascriptDialogOpening":
            result.dialogs.append(params.get("message", ""))
    return result


def _evaluate(pipe: _Pipe, session: str, expression: str) -> Any:
    reply = pipe.send(
        "Runtime.evaluate",
        {"expression": expression, "returnByValue": True, "awaitPromise": True},
        session=session,
    )
    if "exceptionDetails" in reply:
        raise RuntimeError(f"{expression}: {reply['exceptionDetails']}")
    return reply["result"].get("value")
