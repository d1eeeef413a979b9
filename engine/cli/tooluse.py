"""MCP tools on the command line: `tandem generate ... --mcp mcp.json --allow-tools ... --chat`
runs the tool loop without prompts, and `tandem tools mcp.json` lists the servers' tools.

Nothing runs that the user did not name: servers only from the given file, tools only those
`--allow-tools` names ('all' or a comma list; by default none, so a call is reported to the
model and on stderr, not run).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from .common import UsageError


def add_tool_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mcp", metavar="MCP_JSON", help="MCP servers to offer the model (mcp.json, LM Studio's and "
                   "Cursor's notation); runs the tool loop: needs --chat")
    p.add_argument("--allow-tools", metavar="all|NAME,...", help="which tools may run without asking: 'all' or a "
                   "comma list of tool names (default: none; a call of another tool is reported, not run)")
    p.add_argument("--tool-choice", default="auto", metavar="auto|required|NAME",
                   help="the first step: free (auto, default), a call of some tool (required), or of tool NAME")
    p.add_argument("--max-tool-steps", type=int, default=8, help="generations that may call tools (default 8); "
                   "then one more answers without tools")
    p.add_argument("--tool-timeout", type=float, default=60.0, help="seconds a tool may take (default 60)")
    p.add_argument("--mcp-allow-http", action="store_true",
                   help="allow plain http:// servers on other machines (default: https, or http on loopback only)")


def check_tool_flags(args: argparse.Namespace) -> None:
    """Refuse tool flags that cannot work together, before any server or model starts."""
    mcp = getattr(args, "mcp", None)
    if not mcp:
        if args.allow_tools is not None or args.tool_choice != "auto":
            raise UsageError("--allow-tools and --tool-choice need --mcp")
        return
    if not args.chat:
        raise UsageError("--mcp runs a chat with tools: add --chat")
    if getattr(args, "grammar", None):
        raise UsageError("--mcp cannot be combined with --grammar-file or --json-schema (the tool calls use a grammar)")
    if args.max_tool_steps < 1:
        raise UsageError("--max-tool-steps must be at least 1")
    if not args.tool_timeout > 0:
        raise UsageError("--tool-timeout must be a positive number of seconds")


def generate_with_tools(args: argparse.Namespace, request: Any, make_engine: Callable[[], Any],
                        on_sigint: Callable[[Any], Callable[[], None]], stats_line: Callable[[Any], str]) -> int:
    """Start the servers, load the model, run the loop; print the answer (or one JSON object)."""
    from ..decoding.cancel import CancelToken
    from ..tooluse.config import load_config
    from ..tooluse.hub import McpHub
    from ..tooluse.loop import CallEvent, LoopDone, ToolLoop
    from ..tooluse.toolset import Allowance

    allowance = Allowance.parse(args.allow_tools)
    servers = load_config(args.mcp, allow_http=args.mcp_allow_http)
    with McpHub(servers) as hub:
        eng = make_engine()
        try:
            loop = ToolLoop(eng, hub, allowance, choice=args.tool_choice, max_steps=args.max_tool_steps,
                            call_timeout=args.tool_timeout)
            for note in loop.tools.notes:
                print(f"tandem: warning: {note}", file=sys.stderr)
            cancel = CancelToken()
            restore = on_sigint(cancel)
            result = None
            try:
                for ev in loop.run(request, cancel=cancel):
                    if isinstance(ev, CallEvent) and not args.json:
                        print(f"tandem: {_call_line(ev.record)}", file=sys.stderr)
                    elif isinstance(ev, LoopDone):
                        result = ev.result
            finally:
                restore()
        finally:
            eng.close()
    assert result is not None
    last = result.steps[-1]
    if args.json:
        print(json.dumps({"text": result.text, "tokens": last.tokens, "stats": last.stats.to_dict(),
                          "steps": [d.stats.to_dict() for d in result.steps],
                          "tool_calls": [r.to_dict() for r in result.calls],
                          "step_limit_reached": result.step_limit_reached}, ensure_ascii=False))
    else:
        print(result.text)
        print(f"{stats_line(last.stats)} (last of {len(result.steps)} steps, {len(result.calls)} tool call(s))",
              file=sys.stderr)
        if result.step_limit_reached:
            print(f"tandem: warning: the model still called tools after {args.max_tool_steps} steps "
                  "(--max-tool-steps); it answered without them", file=sys.stderr)
    if result.cancelled:
        print("tandem: interrupted", file=sys.stderr)
        return 130
    return 0


def _call_line(record: Any) -> str:
    args = json.dumps(record.arguments, ensure_ascii=False)
    if not record.allowed:
        return f"tool {record.name} {args}: not run, not allowed (--allow-tools)"
    what = "error" if record.is_error else f"{len(record.result):,} characters"
    return f"tool {record.name} {args} -> {what} ({record.seconds:.2f} s)"


def cmd_tools(args: argparse.Namespace) -> int:
    """List each configured server's tools (starting the servers, then stopping them)."""
    from ..tooluse.config import load_config
    from ..tooluse.hub import McpHub

    servers = load_config(args.mcp_json, allow_http=args.mcp_allow_http)
    with McpHub(servers) as hub:
        tools = hub.tools
    if args.json:
        print(json.dumps({"servers": [{"name": s.name, "transport": s.transport, "where": s.where,
                                       "tools": [{"name": t.name, "description": t.description,
                                                  "parameters": dict(t.input_schema)}
                                                 for t in tools if t.server == s.name]} for s in servers]},
                         ensure_ascii=False))
        return 0
    for s in servers:
        mine = [t for t in tools if t.server == s.name]
        print(f"{s.name} ({s.transport}: {s.where}): {len(mine)} tool(s)")
        for t in mine:
            first = t.description.strip().splitlines()[0] if t.description.strip() else ""
            print(f"  {t.name}" + (f" - {first[:100]}" if first else ""))
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("tools", help="list the tools of the MCP servers in an mcp.json")
    p.add_argument("mcp_json", metavar="MCP_JSON", help="the mcp.json file")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--mcp-allow-http", action="store_true", help="allow plain http:// servers on other machines")
    p.set_defaults(func=cmd_tools)
