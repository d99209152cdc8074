/* Floor 3: the benchmark's own MCP client against a process that answers
 * every request line at once with a canned execute_python result (no JSON
 * parsing beyond finding the id).  What remains of a warm call above this
 * is the server's and the interpreter's.  Reads lines on stdin, writes one
 * reply line per line that carries an "id". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	char *line = NULL;
	size_t cap = 0;
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	while (getline(&line, &cap, stdin) > 0) {
		const char *p = strstr(line, "\"id\":");
		if (!p)
			continue;
		long id = strtol(p + 5, NULL, 10);
		if (strstr(line, "\"initialize\""))
			printf("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"protocolVersion\":\"2025-06-18\","
			       "\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"echo\",\"version\":\"0\"}}}\n", id);
		else
			printf("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"content\":[{\"type\":\"text\",\"text\":"
			       "\"ok \\u00b7 exit 0 \\u00b7 0 ms \\u00b7 session default \\u00b7 cell 1\\n\\nresult:\\n2\\n\"}],"
			       "\"isError\":false}}\n", id);
		fflush(stdout);
	}
	free(line);
	return 0;
}
