"""One view per page (chat, race, models, bench, settings with its MCP servers box, draft optimiser). May import
widgets/, app's core modules and engine/; never main_window or main."""
