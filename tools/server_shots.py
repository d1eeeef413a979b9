"""The local server's slots in use, for the guide, with tools/screenshots.py (`--views server`):
the Local server switch on with four slots, three clients' requests, a chat answer in the
fourth slot and one more client waiting, so the status bar says "slots 4/4 busy, 1 waiting"
while the chat streams, at 1024x700,
light and dark (server-slots-THEME.png).
"""

from __future__ import annotations

import socket
import threading
from typing import Any

SIZE = (1024, 700)
CLIENTS = 4
QUESTION = "Write a short story about a lighthouse keeper and a storm."


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _client(url: str, out: list) -> None:
    import httpx

    try:
        out.append(httpx.post(url + "/v1/chat/completions", timeout=600, json={
            "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 400, "temperature": 0}).status_code)
    except Exception as e:  # printed once the shots are taken; a failed client spoils no shot
        out.append(repr(e))


def server_shots(shots: Any, win: Any, themes: list[str]) -> None:
    """In each theme: the server on with four slots, its clients and a chat answer running."""
    switch, chat = win.server_switch, win.chat
    ratio = win.devicePixelRatioF()
    win.resize(round(SIZE[0] / ratio), round(SIZE[1] / ratio))
    win.nav.setCurrentRow(0)
    switch.port.setValue(_free_port())
    switch.slots.setValue(CLIENTS)
    switch.set_on(True)
    shots.wait(lambda: switch.running)
    for theme in themes:
        win.set_theme(theme)
        chat.new_conversation()
        chat.apply_settings({**chat.settings(), "drafter": "lookup", "lookahead": "auto", "temperature": 0.0,
                             "max_tokens": 300})
        done: list = []
        threads = [threading.Thread(target=_client, args=(switch.server.url, done), daemon=True) for _ in range(CLIENTS)]
        for t in threads[:-1]:
            t.start()
        shots.wait(lambda: switch.in_use.text().startswith(f"slots {CLIENTS - 1}/{CLIENTS}"))
        chat.prompt.setPlainText(QUESTION)
        chat.send()  # the last slot: it streams beside the clients
        shots.wait(lambda: len(chat.stream.tokens) > 20)
        threads[-1].start()  # one more client: it waits for a slot
        shots.wait(lambda: switch.in_use.text() == f"slots {CLIENTS}/{CLIENTS} busy, 1 waiting")
        shots.shot(f"server-slots-{theme}", from_screen=True)
        chat.stop()
        shots.wait(lambda: chat.worker is None)
        win.session.engine.queue.cancel_all("server")
        for t in threads:
            t.join()
        print(f"clients: {done}")
    switch.set_on(False)
