"""The MCP server of the tool-loop suite (tools/tool_loop_suite/): a small operations desk written
with the official SDK's FastMCP (1.x), over stdio. Its answers are fixed tables, so a run of the
suite is repeatable; `tools.tool_loop_bench` starts it from an mcp.json it writes."""

from __future__ import annotations

import json

from mcp.server.fastmcp import FastMCP

SHIPMENTS = {
    "NX-4471": {"location": "Rotterdam container terminal, berth 7", "status": "cleared customs",
                "eta": "Thursday 14 March, 10:00", "carrier": "Maersk"},
    "KQ-1020": {"location": "Port of Singapore", "status": "delayed by a storm", "eta": "Tuesday 2 April", "carrier": "CMA CGM"},
    "TR-5582": {"location": "Hamburg rail hub", "status": "on a train to Munich", "eta": "Monday 11 March, 16:00",
                "carrier": "DB Cargo"},
}
INVOICES = {
    "INV-2024-0815": {"customer": "Brandt Logistics GmbH", "amount_eur": 12840.50, "due": "30 April",
                      "status": "unpaid, first reminder sent 2 April"},
    "INV-2024-0907": {"customer": "Okafor Foods Ltd", "amount_eur": 3120.00, "due": "15 May", "status": "paid on 9 May"},
}
STOCK = {("SKU-88120", "Lyon"): 412, ("SKU-88120", "Leeds"): 0, ("SKU-40007", "Lyon"): 57, ("SKU-40007", "Leeds"): 1290}
ROOMS = {"Atlas": "free until 15:00, then booked by the finance team until 17:30",
         "Meridian": "booked all day by the board (quarterly review)"}

desk = FastMCP("operations-desk", log_level="WARNING")


@desk.tool()
def track_shipment(shipment_id: str) -> str:
    """Where a shipment is now, its status, carrier and estimated arrival, by its id."""
    found = SHIPMENTS.get(shipment_id.strip().upper())
    return json.dumps({"shipment_id": shipment_id, **found}) if found else f"no shipment {shipment_id!r}"


@desk.tool()
def get_invoice(invoice_id: str) -> str:
    """An invoice's customer, amount in euros, due date and payment status."""
    found = INVOICES.get(invoice_id.strip().upper())
    return json.dumps({"invoice_id": invoice_id, **found}) if found else f"no invoice {invoice_id!r}"


@desk.tool()
def stock_level(sku: str, warehouse: str) -> str:
    """Units of an article (SKU) in stock at one warehouse (Lyon or Leeds)."""
    n = STOCK.get((sku.strip().upper(), warehouse.strip().title()))
    return f"{n} units of {sku} at {warehouse}" if n is not None else f"no stock record for {sku} at {warehouse}"


@desk.tool()
def room_schedule(room: str) -> str:
    """Today's bookings of a meeting room."""
    return ROOMS.get(room.strip().title(), f"no room named {room!r}")


if __name__ == "__main__":
    desk.run("stdio")
