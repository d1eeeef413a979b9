"""Settings › MCP servers: the file the chat reads, its servers, their tools listed on demand
(each server started alone; one that does not start says why in one line), and a broken
file named in one line in Settings and in the chat's Tools box (pytest-qt, offscreen)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("mcp")

from PySide6.QtCore import QSettings  # noqa: E402

SERVER = Path(__file__).parent / "chat" / "mcp_chat_server.py"


@pytest.fixture
def box(qtbot, tmp_path):
    from app.tool_servers import ToolServers
    from app.views.mcp_settings import McpServersBox

    servers = ToolServers(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    b = McpServersBox(servers, open_url=lambda url: True)
    qtbot.addWidget(b)
    return b


def test_the_default_file_is_in_the_data_folder_and_made_on_demand(box):
    from engine.paths import data_dir

    assert box.config.is_default and box.config.path == data_dir() / "mcp.json"
    assert "No servers configured" in box.status.text() and box.open_btn.text() == "Create and open"
    box.open_file()
    assert json.loads(box.config.path.read_text()) == {"mcpServers": {}}


def test_servers_and_their_tools_are_listed_and_a_failure_is_one_line(qtbot, box, tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "ships": {"command": sys.executable, "args": [str(SERVER)], "env": {"TOUCH_FILE": str(tmp_path / "t")}},
        "gone": {"command": str(tmp_path / "no-such-program")}}}), encoding="utf-8")
    changed = []
    box.changed.connect(lambda: changed.append(True))
    box.choose(str(path))
    assert changed and box.tree.topLevelItemCount() == 2 and "2 servers configured" in box.status.text()
    box.list_tools()
    qtbot.waitUntil(lambda: box._worker is None, timeout=60000)
    ships, gone = (box.tree.topLevelItem(i) for i in range(2))
    assert ships.text(1) == "3 tools" and [ships.child(i).text(0) for i in range(3)] == ["server_pid", "touch", "hang"]
    assert gone.text(1).startswith("MCP server 'gone'") and "\n" not in gone.text(1)
    assert "1 of 2 servers" in box.status.text()


def test_a_broken_file_is_one_line_in_settings_and_in_the_chats_tools(qtbot, box, tmp_path):
    from app.views.chat.tools_box import ToolsBox
    from app.views.chat.tool_calls import ChatTools

    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"x": {"command": "a", "url": "https://h/mcp"}}}', encoding="utf-8")
    box.choose(str(path))
    assert "server 'x'" in box.status.text() and "\n" not in box.status.text() and not box.list_btn.isEnabled()
    tools = ToolsBox()
    qtbot.addWidget(tools)
    ChatTools(box.config, tools, tools, stop=lambda: None)
    assert "server 'x'" in tools.note.text() and not tools.boxes
