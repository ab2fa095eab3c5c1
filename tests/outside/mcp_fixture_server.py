"""An MCP server built with the official SDK (`MCPServer`, formerly FastMCP) for the
`mcp_search` tests: run as a script it serves stdio; `build()` gives the server for streamable
HTTP in a test's thread. What the `search` tool does depends on the query: `nothing` finds
nothing, `fail` raises (the SDK returns an isError result quoting the exception), `slow`
never finishes, `big` returns a large text; anything else finds two passages.
`library_search` answers as koinon's own MCP `search` tool does (structured `results`;
`broken`: every retrieval tool failed)."""

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import TextContent

SECRET = "SECRET-PROVIDER-DETAIL sk-live-51Habc0123456789 /srv/index/private.db"
FINANCE = "Invoices are kept for seven years."
LEGAL = "Contracts are kept for ten years after they end."


def build() -> MCPServer:
    server = MCPServer("outside-fixture")

    @server.tool()
    async def search(query: str) -> list[TextContent]:
        """Search the fixture's passages."""
        if query == "nothing":
            return []
        if query == "fail":
            raise ValueError(SECRET)
        if query == "slow":
            await anyio.sleep(600)
        if query == "big":
            return [TextContent(type="text", text="w" * 200_000)]
        return [TextContent(type="text", text=FINANCE), TextContent(type="text", text=LEGAL)]

    @server.tool()
    async def library_search(query: str, limit: int = 10) -> dict[str, object]:
        """koinon's search result shape."""
        rows = [
            {
                "fact_id": "passage:101",
                "passage_id": 101,
                "document_id": 11,
                "document_title": "Retention policy",
                "space_id": 1,
                "private": False,
                "revision_id": 21,
                "extraction_id": 31,
                "char_start": 0,
                "char_end": len(FINANCE),
                "locator": {"page": 1},
                "text": FINANCE,
                "score": 0.03,
                "contributions": {},
            },
            {
                "fact_id": "passage:202",
                "passage_id": 202,
                "document_id": 12,
                "document_title": "Contracts",
                "space_id": 1,
                "private": False,
                "revision_id": 22,
                "extraction_id": 32,
                "char_start": 0,
                "char_end": len(LEGAL),
                "locator": {"page": 2},
                "text": LEGAL,
                "score": 0.02,
                "contributions": {},
            },
        ]
        if query == "broken":  # every retrieval tool of that koinon failed
            failed = {"state": "failed", "code": "embedding_unavailable", "retryable": True}
            outcomes = [{"tool": "vector_search", "result_count": 0, **failed}]
            return {"label": "unverified", "note": "data", "results": [], "outcomes": outcomes}
        return {"label": "unverified", "note": "data", "results": rows[:limit], "outcomes": []}

    return server


if __name__ == "__main__":
    build().run("stdio")
