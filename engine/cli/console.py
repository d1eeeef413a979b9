"""The terminal one command writes to: the answer streams to stdout, warnings go to stderr as
`tandem: warning:` lines, and a warning never lands in the middle of the answer's line.

Both streams usually share one terminal. A warning that comes while the answer's last line is
open (the suffix draft's history not saved, at the end of a generation) waits until the answer's
line ends; one that comes at the start of a line is written at once. Warnings from the engine
reach here through the `logging` handler `main` installs for the command's duration.
"""

from __future__ import annotations

import logging
import sys


class Console:
    """Where the answer's cursor is, and the warnings held until its line ends."""

    def __init__(self) -> None:
        self.mid_line = False  # the answer has written text after its last newline
        self.held: list[str] = []

    def reset(self) -> None:
        """A fresh state for the next command (tests run several in one process)."""
        self.mid_line, self.held = False, []

    def answer(self, text: str) -> None:
        """Write answer text to stdout (flushed: it streams)."""
        if not text:
            return
        sys.stdout.write(text)
        sys.stdout.flush()
        self.mid_line = not text.endswith("\n")
        if not self.mid_line:
            self.flush()

    def end_answer(self) -> None:
        """Close the answer with its newline, then write the warnings that waited for it."""
        sys.stdout.write("\n")
        sys.stdout.flush()
        self.mid_line = False
        self.flush()

    def warn(self, line: str) -> None:
        """One `tandem: warning:` line, now or when the answer's line ends."""
        text = f"tandem: warning: {line}"
        if self.mid_line:
            self.held.append(text)
        else:
            print(text, file=sys.stderr)

    def close(self) -> None:
        """The command ends (or fails): end an open answer line, write what was held."""
        if self.mid_line:
            self.end_answer()
        self.flush()

    def flush(self) -> None:
        """Write the held warnings."""
        held, self.held = self.held, []
        for text in held:
            print(text, file=sys.stderr)


CONSOLE = Console()


class WarningLines(logging.Handler):
    """Log records of WARNING and above as the console's warning lines (message only)."""

    def __init__(self, console: Console = CONSOLE):
        super().__init__(logging.WARNING)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.warn(record.getMessage())
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)
