"""What ``tpuperf capture`` and ``tpuperf demo`` show while they capture and after: reading
``--duration``/``--delay``, the live display of the hosts, the table of saved files and the
report of the session. Shared by both commands (no command imports another)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from tpuperf.capturing import CaptureEvent, CaptureResult, Target

_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_seconds(text: str, option: str, allow_zero: bool = False) -> float:
    """``500ms``, ``2s``, ``1.5`` (seconds), ``1m`` -> seconds."""
    from tpuperf.errors import UsageError

    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|min|m|h)?\s*", text)
    if match is None:
        raise UsageError(f"{option}: cannot read {text!r} as a time; write e.g. 500ms, 2s, 1m")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise UsageError(f"{option} must be more than zero, got {text!r}")
    return seconds


def stdout_console() -> Console:
    from tpuperf.output import console

    return console()


def stderr_console() -> Console:
    from tpuperf.output import console

    return console(stderr=True)


def capture_with_display(targets: list[Target], **options: Any) -> CaptureResult:
    """Run :func:`tpuperf.capturing.run_capture` with a live display on stderr."""
    from rich.live import Live

    from tpuperf.capturing import run_capture

    console = stderr_console()
    view = _CaptureView(targets, options.get("duration_s", 0.0))
    if console.is_terminal:
        with Live(view, console=console, refresh_per_second=10, transient=False) as live:
            try:
                return run_capture(targets, progress=view.update, **options)
            finally:
                view.finished = True
                live.refresh()
    # Not a terminal (a log, CI): one line per event instead of an animation.
    return run_capture(targets, progress=lambda event: _print_event(console, event), **options)


def _print_event(console: Console, event: CaptureEvent) -> None:
    if event.kind == "window":
        seconds = (event.stop_ns - event.start_ns) / 1e9
        console.print(
            f"tpuperf: tracing a {seconds:g} s window on every host", markup=False, soft_wrap=True
        )
    elif event.kind == "saved":
        console.print(
            f"tpuperf: {event.address}: saved {_size(event.size_bytes)} to {event.path}",
            markup=False,
            soft_wrap=True,
        )
    elif event.kind in ("failed", "note", "retry"):
        where = f"{event.address}: " if event.address else ""
        console.print(f"tpuperf: {where}{event.message}", markup=False, soft_wrap=True)


class _CaptureView:
    """What the live display shows: a countdown of the window, then each host's state."""

    def __init__(self, targets: list[Target], duration_s: float) -> None:
        self._lock = threading.Lock()
        self._state = {t.address: "connecting" for t in targets}
        self._detail = {t.address: "" for t in targets}
        self._window: tuple[int, int] | None = None
        self._duration_s = duration_s
        self._notes: list[str] = []
        self.finished = False

    def update(self, event: CaptureEvent) -> None:
        with self._lock:
            address = event.address or ""
            if event.kind == "window":
                self._window = (event.start_ns, event.stop_ns)
                for key, state in self._state.items():
                    if state not in ("failed", "saved"):
                        self._state[key] = "waiting"
            elif event.kind == "writing":
                self._state[address], self._detail[address] = "writing", _size(event.size_bytes)
            elif event.kind == "saved":
                self._state[address], self._detail[address] = "saved", _size(event.size_bytes)
            elif event.kind == "failed":
                self._state[address], self._detail[address] = "failed", event.message
            elif event.kind in ("note", "retry"):
                self._notes.append(event.message)
                if event.kind == "retry":
                    for key, state in self._state.items():
                        if state == "failed":
                            self._state[key] = "connecting"

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        now = time.time_ns()
        with self._lock:
            window = self._window
            if self.finished:
                header = Text("done")
            elif window is None:
                header = Text("connecting…")
            elif now < window[0]:
                header = Text(f"window starts in {(window[0] - now) / 1e9:.1f} s")
            elif now < window[1]:
                left = (window[1] - now) / 1e9
                done = int(20 * (1 - left / max(self._duration_s, 1e-9)))
                header = Text(f"tracing {'█' * done}{'░' * (20 - done)} {left:.1f} s left")
            else:
                header = Text("receiving profiles…")
            table = Table.grid(padding=(0, 2))
            for address, state in self._state.items():
                if state == "waiting" and window is not None and now >= window[0]:
                    state = "tracing" if now < window[1] else "receiving"
                style = {"saved": "green", "failed": "red"}.get(state, "")
                table.add_row(address, Text(state, style=style), self._detail[address])
            notes = [Text(note, style="yellow") for note in self._notes]
        return Group(header, table, *notes)


def _size(size_bytes: float) -> str:
    if size_bytes < 1024:
        return f"{size_bytes:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        size_bytes /= 1024
        if size_bytes < 1024 or unit == "GiB":
            break
    return f"{size_bytes:.1f} {unit}"


def count_events(path: Path) -> int:
    """How many trace events a saved profile holds (every line of every plane)."""
    from tpuperf._xspace_schema import XSpace

    space = XSpace.FromString(path.read_bytes())
    return sum(len(line.events) for plane in space.planes for line in plane.lines)


def print_summary(result: CaptureResult, console: Console) -> None:
    """The table of what was saved, on ``console`` (stdout)."""
    from rich.text import Text

    from tpuperf.render.fit import Column, fit

    saved = [h for h in result.hosts if h.path is not None]
    if not saved:
        return
    spec = [Column("host", "key"), Column("size"), Column("events"), Column("file", "text")]
    rows = []
    for host in saved:
        assert host.path is not None
        rows.append(
            [host.address, _size(host.size_bytes), f"{count_events(host.path):,}", host.path.name]
        )
    fit(spec, rows, console.width).print(console, rows, title=f"session {result.session}")
    console.print(Text(f"saved to {result.session_dir}"), soft_wrap=True)
    for host in result.hosts:
        for note in host.notes:
            console.print(Text(note), soft_wrap=True)


def analyze_session(session_dir: Path, out: Console, err: Console) -> bool:
    """Analyze and print the report of ``session_dir``; False (with a note) if analysis is
    not available in this build."""
    try:
        from tpuperf.analysis import analyze
        from tpuperf.profiles import load
        from tpuperf.render.terminal import render_report
    except ImportError as exc:
        err.print(
            f"tpuperf: analysis is not available in this build ({exc}); skipped", markup=False
        )
        return False
    render_report(analyze(load(session_dir)), out)
    return True


def show_result(result: CaptureResult, out: Console, err: Console, analyze: bool) -> bool:
    """After a capture: the table of saved files, the session's report when ``analyze`` and a
    host was saved, then :class:`~tpuperf.capturing.CaptureIncomplete` if any host failed (the
    display said why each failed). True when the report was printed."""
    from tpuperf.capturing import raise_for_failures

    print_summary(result, out)
    shown = analyze and bool(result.saved) and analyze_session(result.session_dir, out, err)
    raise_for_failures(result, reasons_shown=True)
    return shown
