# make test-clients: python-sandbox-mcp inside real MCP clients, offline
# (the v2 and v1 TypeScript SDK clients in the 2026-07-28 and legacy eras,
# Claude Code, Codex, Gemini CLI, opencode, the MCP Inspector, the MCP
# conformance suite, --venv).
# See test/clients/README.md.
.PHONY: test-clients
## test-clients: the server through both SDK clients, inside Claude Code, Codex, Gemini CLI, opencode, the Inspector, conformance
test-clients: $(BIN)
	test/clients/run.sh $(BIN)
