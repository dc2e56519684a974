"""The support desk's FAQ, an MCP server on stdio (the agent launches it).

Run alone it waits for an MCP client on its standard input. mcp 2.x names
its high-level server ``MCPServer`` (mcp 1.x called it ``FastMCP``).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

ANSWERS = {
    "returns": "Items can be returned within 30 days of delivery, unused and in their box.",
    "shipping": "Orders ship within 2 working days; delivery takes 3 to 5 more.",
    "warranty": "Every item has a 2-year warranty from the delivery date.",
}

server = MCPServer("support-faq")


@server.tool()
def faq(topic: str) -> str:
    """The shop's answer about a topic: returns, shipping or warranty."""
    answer = ANSWERS.get(topic.strip().lower())
    if answer is None:
        return f"No FAQ entry for {topic!r}; the topics are: {', '.join(sorted(ANSWERS))}."
    return answer


if __name__ == "__main__":
    server.run()  # stdio
