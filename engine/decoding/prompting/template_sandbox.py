"""Render an untrusted Jinja template with bounded time, output and intermediate values.

Chat templates come from downloaded GGUF files. Jinja's sandbox stops attribute escapes
but not cost: nested `range(99999)` loops run for ever, `'x' * 10**10` or a string doubled
in a loop exhaust memory, and one `str()` of a self-nested list builds gigabytes in C.
Here, in the calling thread (the CLI's main thread, the app's generation worker):

* time: a `sys.settrace` hook raises `TemplateLimitError` once the rendering thread has
  spent the deadline's CPU time, at the next traced line (every loop iteration of a compiled
  template is one). CPU time, not the clock: on a busy machine (other processes, the
  engine's own threads) a real model's template waited past a 2 s wall-clock deadline and
  the prompt silently became ChatML; a runaway template spends CPU and is stopped all the
  same. A wall-clock backstop (WALL_FACTOR times the deadline) still ends a render whose
  thread is starved for good;
* size: operators (`+ * % **` and `~`), calls, filters and every printed value are
  checked before and after, so no value grows past `max_chars`, and the output is
  streamed and cut at `max_chars`.

Why not a subprocess: spawning one costs a tenth of a second or more per render
(docs/benchmarks.md, section 13), a PyInstaller build has no Python to spawn, and the checks
above leave no unbounded step that a template can reach (what remains are single C calls on
bounded values).
"""

from __future__ import annotations

import functools
import numbers
import re
import sys
import time
from typing import Any, Callable, Mapping

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.ext import loopcontrols
from jinja2.runtime import Context
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

DEADLINE_S = 2.0  # CPU seconds of the rendering thread
WALL_FACTOR = 30  # ...and at most this many times that on the clock, however busy the machine
CHECK_EVERY = 64  # traced events between two looks at the clocks (each a few microseconds)
MAX_CHARS = 8_000_000  # ~2M tokens: beyond any context window; bounds output and every value
MAX_INT_BITS = 1 << 16  # ints in templates are counters and indices
# A format spec or %-directive with a 7+ digit width/precision allocates that much in C.
_HUGE_SPEC = re.compile(r"(%[-#0 +]*\d{7,})|(%[-#0 +]*\d*\.\d{7,})|(\{[^{}]*:[^{}]*\d{7,}[^{}]*\})")


class TemplateLimitError(Exception):
    """The template ran past its deadline or built a value larger than allowed."""


class OutputLimitError(TemplateLimitError):
    """The template wrote more than the caller's output bound (a prompt that cannot fit the context)."""


def weight(value: Any, budget: int = MAX_CHARS) -> int:
    """Characters/elements `value` would print as, refused past `budget`.

    Shared parts count each time they appear (printing repeats them), but each distinct
    container is walked once, so `[x, x]` doubled 60 times costs 60 steps, not 2**60."""
    memo: dict[int, int] = {}

    def size(x: Any) -> int:
        if isinstance(x, (str, bytes)):
            return len(x)
        if isinstance(x, bool) or x is None:
            return 1
        if isinstance(x, int):
            return 1 + x.bit_length() // 4
        if isinstance(x, range):
            return len(x)
        if isinstance(x, Mapping):
            children: Any = [*x.keys(), *x.values()]
        elif isinstance(x, (list, tuple, set, frozenset)):
            children = x
        else:
            return 1
        key = id(x)
        if key in memo:
            return memo[key]
        memo[key] = 1  # while in progress: a cycle counts once
        total = 1
        for c in children:
            total += size(c)
            if total > budget:
                break
        memo[key] = total
        return total

    n = size(value)
    if n > budget:
        raise TemplateLimitError(f"a template value grew past {budget:,} characters/items")
    return n


def _check_ints(args: tuple, kwargs: Mapping[str, Any], limit: int) -> int:
    """The largest int argument, refused when it alone could allocate past `limit`."""
    big = 0
    for a in (*args, *kwargs.values()):
        if isinstance(a, numbers.Integral) and not isinstance(a, bool):
            big = max(big, abs(int(a)))
        elif isinstance(a, str) and _HUGE_SPEC.search(a):
            raise TemplateLimitError("a format width or precision of 7+ digits")
    if big > limit:
        raise TemplateLimitError(f"an argument of {big:,} is larger than a template needs")
    return big


class _BoundedCodeGenerator(CodeGenerator):
    """`~` and list, tuple and dict literals go through the environment's size checks
    (`[x, x]` doubled in a loop is tiny in memory but gigantic to print or compare)."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def visit_List(self, node: nodes.List, frame: Frame) -> None:
        self.write("environment.bounded_value(")
        super().visit_List(node, frame)
        self.write(")")

    def visit_Dict(self, node: nodes.Dict, frame: Frame) -> None:
        self.write("environment.bounded_value(")
        super().visit_Dict(node, frame)
        self.write(")")

    def visit_Tuple(self, node: nodes.Tuple, frame: Frame) -> None:
        if node.ctx != "load":  # an assignment target (`{% for a, b in ... %}`)
            super().visit_Tuple(node, frame)
            return
        self.write("environment.bounded_value(")
        super().visit_Tuple(node, frame)
        self.write(")")


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with size checks on operators, calls, filters and output."""

    intercepted_binops = frozenset({"+", "*", "%", "**", "//", "/", "-"})
    code_generator_class = _BoundedCodeGenerator

    def __init__(self, *, max_chars: int = MAX_CHARS, **kw: Any):
        kw.setdefault("extensions", [loopcontrols])
        super().__init__(finalize=self._finalize, **kw)
        self.max_chars = max_chars

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        """A blocked attribute (`__class__`, `mro`, ...) fails the render, so the caller's
        fallback and its warning apply, instead of printing '' silently as Jinja does."""
        raise SecurityError(f"access to attribute {attribute!r} of a {type(obj).__name__} is not allowed in a template")

    def _finalize(self, value: Any) -> Any:
        weight(value, self.max_chars)  # before str(): printing a nested list happens in C
        return value

    def guard_filters(self) -> None:
        """Wrap every filter (call after adding your own) with the same checks as calls."""
        for name, f in list(self.filters.items()):
            self.filters[name] = self._guarded(f)

    def _guarded(self, f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)  # keeps jinja_pass_arg (pass_context & co.)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return self._checked(f, args, kwargs, lambda: f(*args, **kwargs))

        return wrapper

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        if not __self.is_safe_callable(__obj):
            return super().call(__context, __obj, *args, **kwargs)  # raises SecurityError
        return __self._checked(__obj, args, kwargs, lambda: __context.call(__obj, *args, **kwargs))

    def _checked(self, f: Any, args: tuple, kwargs: Mapping[str, Any], invoke: Callable[[], Any]) -> Any:
        """Refuse a call whose arguments are too big or could multiply into too much; check
        the result too."""
        data = [a for a in (*args, *kwargs.values()) if not isinstance(a, (Context, BoundedEnvironment))]
        size = weight(data, self.max_chars)
        big = _check_ints(args, kwargs, self.max_chars)
        owner = getattr(getattr(f, "__wrapped__", f), "__self__", None)  # 'fmt'.format -> 'fmt'
        if isinstance(owner, str):
            size += len(owner)
            if _HUGE_SPEC.search(owner):
                raise TemplateLimitError("a format width or precision of 7+ digits")
        if getattr(f, "__name__", "") in ("replace", "do_replace"):  # s.replace(old, new): count x len(new)
            strs = [a for a in (owner, *data) if isinstance(a, str)]
            if len(strs) >= 3 and strs[1]:
                size = max(size, strs[0].count(strs[1]) * len(strs[2]))
        if size > self.max_chars or (big > 1 and size * big > 8 * self.max_chars):
            raise TemplateLimitError("a call would build a value far larger than a prompt")
        result = invoke()
        weight(result, self.max_chars)
        return result

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        weight(left, self.max_chars)
        weight(right, self.max_chars)
        if operator == "*":
            if _is_int(left) and _is_int(right):
                if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                    raise TemplateLimitError("a product far larger than a template needs")
            else:
                for seq, n in ((left, right), (right, left)):
                    if _is_int(n) and weight(seq, self.max_chars) * max(0, n) > self.max_chars:
                        raise TemplateLimitError("a repetition would build a value far larger than a prompt")
        elif operator == "**" and _is_int(left) and _is_int(right) and abs(left) > 1 and right > 0:
            if right * abs(left).bit_length() > MAX_INT_BITS:
                raise TemplateLimitError("a power far larger than a template needs")
        elif operator == "%" and isinstance(left, str) and _HUGE_SPEC.search(left):
            raise TemplateLimitError("a format width or precision of 7+ digits")
        result = self.binop_table[operator](left, right)
        weight(result, self.max_chars)
        return result

    def concat(self, parts: Any) -> str:  # type: ignore[override]
        """Joins the output buffers of macros, `{% set %}` blocks and call blocks."""
        out: list[str] = []
        total = 0
        for p in parts:
            total += len(p)
            if total > self.max_chars:
                raise TemplateLimitError(f"a template block wrote more than {self.max_chars:,} characters")
            out.append(p)
        return "".join(out)

    def bounded_value(self, value: Any) -> Any:
        weight(value, self.max_chars)
        return value

    def bounded_concat(self, parts: tuple) -> str:
        """`a ~ b`: sizes checked before anything is joined."""
        total = 0
        for p in parts:
            total += weight(p, self.max_chars)
            if total > self.max_chars:
                raise TemplateLimitError(f"a template string grew past {self.max_chars:,} characters")
        return "".join(str(p) for p in parts)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def render_bounded(env: BoundedEnvironment, source: str, context: Mapping[str, Any], *, deadline_s: float = DEADLINE_S,
                   max_output: int | None = None) -> str:
    """Render `source` with `context`; TemplateLimitError past the deadline or size limit,
    `OutputLimitError` once the output passes `max_output` characters (when given).

    Every other failure propagates as the exception the template raised: callers that
    treat the template as untrusted catch `Exception`."""
    end = time.thread_time() + deadline_s
    wall_end = time.monotonic() + deadline_s * WALL_FACTOR
    cap = env.max_chars if max_output is None else min(env.max_chars, max_output)

    events = [0]

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        events[0] += 1
        if events[0] % CHECK_EVERY:  # reading a thread's CPU clock is a system call: not every line
            return tracer
        if time.thread_time() > end:
            raise TemplateLimitError(f"the template ran for more than {deadline_s:g} s")
        if time.monotonic() > wall_end:
            raise TemplateLimitError(f"the template ran for more than {deadline_s * WALL_FACTOR:g} s on the clock")
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        template = env.from_string(source)
        out: list[str] = []
        n = 0
        for chunk in template.generate(**context):
            n += len(chunk)
            if n > cap:
                error = OutputLimitError if cap == max_output else TemplateLimitError
                raise error(f"the template wrote more than {cap:,} characters")
            out.append(chunk)
        return "".join(out)
    finally:
        sys.settrace(previous)
