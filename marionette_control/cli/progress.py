"""Progress display of an optimization: live on a terminal, plain lines otherwise.

One :class:`Progress` receives ``update(stage, record)`` after every iteration (the
``callback`` of :func:`marionette_control.ocp.spec_problem.solve_spec`) and ``log(message)`` for
everything else. Modes:

* ``live`` — a status line rewritten in place (stage, iteration, cost, constraint violation,
  descent norm, step, method, elapsed), with a table drawn by ``rich`` when that package is installed; the final
  line of every stage stays on screen;
* ``plain`` — one line per iteration, nothing rewritten (logs, CI, pipes);
* ``quiet`` — messages only;
* ``auto`` — ``live`` when the stream is a terminal, else ``plain``.
"""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

MODES = ("auto", "live", "plain", "quiet")


def _rich_available() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def format_record(stage: str, rec) -> str:
    """``<stage>  iter <i>  cost <c>  [viol <v>  mu <w>]  |Dh.dxi| <n>  step <s>  <method>  <t> s``.

    With inequality constraints (a barrier weight mu > 0) the largest normalized constraint
    violation of the iterate stands next to its cost (0 = every constraint satisfied)."""
    constrained = getattr(rec, "barrier_weight", 0.0) > 0
    extra = f"viol {rec.violation:.1e}  mu {rec.barrier_weight:.1e}  " if constrained else ""
    return (f"{stage}  iter {rec.iteration:3d}  cost {rec.cost:.6e}  {extra}|Dh.dxi| {rec.descent_norm:.2e}  "
            f"step {rec.step_length:.3g}  {rec.method}  {rec.elapsed:.1f} s")


class Progress:
    """See the module docstring. ``prefix`` starts every plain line (``[optimize] ...``)."""

    def __init__(self, stream: Optional[TextIO] = None, mode: str = "auto", prefix: str = "optimize",
                 use_rich: Optional[bool] = None):
        if mode not in MODES:
            raise ValueError(f"progress mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.stream = stream if stream is not None else sys.stdout
        if mode == "auto":
            isatty = getattr(self.stream, "isatty", None)
            mode = "live" if (isatty is not None and isatty()) else "plain"
        self.mode = mode
        self.prefix = prefix
        self.use_rich = (mode == "live") and (_rich_available() if use_rich is None else use_rich)
        self._stage = None
        self._line_open = False
        self._live = None
        self._table_rows = []
        self._t0 = time.perf_counter()

    # -- public ------------------------------------------------------------------------------------

    def log(self, message: str) -> None:
        """A message on its own line (the live line, if any, is kept above it)."""
        if self.use_rich and self._live is not None:
            self._live.console.print(f"[{self.prefix}] {message}")
            return
        self._end_line()
        self._write(f"[{self.prefix}] {message}\n")

    def update(self, stage: str, record) -> None:
        """One optimizer iteration (an ``IterationRecord``) of ``stage``."""
        if self.mode == "quiet":
            self._stage = stage
            return
        if self.mode == "plain":
            self._write(f"[{self.prefix}] {format_record(stage, record)}\n")
            self._stage = stage
            return
        if self.use_rich:
            self._rich_update(stage, record)
            return
        if stage != self._stage:
            self._end_line()
        self._write("\r\x1b[K" + format_record(stage, record))
        self._line_open = True
        self._stage = stage

    def close(self) -> None:
        """Ends the live display (leaves the last line/table on screen)."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        self._end_line()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- helpers -----------------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _end_line(self) -> None:
        if self._line_open:
            self._write("\n")
            self._line_open = False

    def _rich_update(self, stage: str, rec) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.table import Table

        row = (stage, str(rec.iteration), f"{rec.cost:.6e}", f"{getattr(rec, 'violation', 0.0):.1e}",
               f"{rec.descent_norm:.2e}", f"{rec.step_length:.3g}", rec.method, f"{rec.elapsed:.1f}")
        if stage != self._stage:
            self._table_rows.append(row)
        else:
            self._table_rows[-1] = row
        self._stage = stage
        table = Table(title="optimization progress", expand=False)
        for col in ("stage", "iteration", "cost", "violation", "|Dh.dxi|", "step", "method", "elapsed [s]"):
            table.add_column(col, justify="left" if col in ("stage", "method") else "right")
        for r in self._table_rows:
            table.add_row(*r)
        if self._live is None:
            self._live = Live(table, console=Console(file=self.stream), refresh_per_second=8, transient=False)
            self._live.start()
        else:
            self._live.update(table)
