# make test-clients: python-sandbox-mcp inside real MCP clients, offline
# (Claude Code, Codex, Gemini CLI, opencode, the MCP Inspector, the MCP
# conformance suite, --venv).
# See test/clients/README.md.
.PHONY: test-clients
## test-clients: the server inside Claude Code, Codex, Gemini CLI, opencode, the Inspector and conformance suite
test-clients: $(BIN)
	test/clients/run.sh $(BIN)
