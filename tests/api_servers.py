"""One way for the API test modules to serve a tiny model: `api_server` starts `tandem serve`'s
app over a target (and its draft) in this process, with the clients a module talks through,
and stops it all; `scripted_server` does it for a target whose greedy answer is a script."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator, Mapping

from scripted_models import write_scripted_pair

KEY = "test-key"


@contextmanager
def api_server(target: Path, draft: Any, clients: Mapping[str, Callable[[str], Any]] | None = None, *,
               key: str | None = KEY, n_ctx: int = 1024, lookahead: Any = 4, name: str = "tiny-pair",
               mmproj: Path | None = None, config: Mapping[str, Any] | None = None,
               **served_kw: Any) -> Iterator[SimpleNamespace]:
    """A served engine as `s.eng`, `s.srv`, `s.url`, and one attribute per client
    (`clients[name](url)` makes it; closed at the end when it can be); `config`: more
    ServerConfig fields."""
    from engine import Engine
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(target, n_ctx=n_ctx, metrics_log=False, mmproj=mmproj)
    srv = ServerThread(create_app(ServedModel(eng, name, draft=draft, lookahead=lookahead, **served_kw),
                                  ServerConfig(api_key=key, **(config or {})))).start()
    made = {k: make(srv.url) for k, make in (clients or {}).items()}
    try:
        yield SimpleNamespace(eng=eng, srv=srv, url=srv.url, **made)
    finally:
        for client in made.values():
            if callable(getattr(client, "close", None)):
                client.close()
        srv.stop()
        eng.close()


def scripted_server(tmp_path_factory: Any, folder: str, script: list[str],
                    clients: Mapping[str, Callable[[str], Any]] | None = None, **kw: Any) -> Iterator[SimpleNamespace]:
    """For a module-scoped fixture (`yield from`): a server over a target whose greedy answer is
    `script`, then the end of its turn."""
    target, draft = write_scripted_pair(tmp_path_factory.mktemp(folder), script)
    with api_server(target, draft, clients, **kw) as s:
        yield s
