"""The Chat page in parts. page.py builds the columns (layout.py) and the settings panel
(settings_panel.py, its folded advanced sampling in advanced_sampling.py) and owns the components that act on them, each made with what it needs:
SidePanels (drawer.py: the drawer and the list's dock), ConversationList (conversations.py),
Composer (composer.py: attachments, meter, drafts, export, copy; its pictures with Pictures,
pictures.py, which also says how a question's pictures are kept, sent and counted), Asking
(asking.py: Send, Edit, Regenerate, Continue), AnswerStream (answering.py: the answer being written) and
ChatKeeping (keeping.py: export all, import, Delete and Fork under a message) and ChatTools
(tool_calls.py: the chat's MCP servers at work, with the drawer's Tools switch in tools_box.py
and the approval dialog in tool_approval.py); format.py words the stats line and a new chat's
title.

May import widgets/, history, app's core modules and engine/; never another page,
main_window or main. A new control of the chat goes in the column it shows in (layout.py),
its behaviour in the component it belongs to (a new one of its own beside them when it is a
new job), connected by page.py; a control other pages could use goes in widgets/controls/."""

from .format import stats_text
from .page import ChatView

__all__ = ["ChatView", "stats_text"]
