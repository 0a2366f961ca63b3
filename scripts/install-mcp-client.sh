#!/usr/bin/env bash
# The real MCP clients the tests drive `spark-lsp mcp` with (tests/e2e/mcp.rs): the official Python SDK (`mcp`,
# pinned) in a virtual environment at target/mcp-venv, and the MCP Inspector (pinned), whose CLI mode lists the
# tools once, under target/tools. Idempotent: pinned installs already there are kept. Packages come through pip
# and npm as configured on the machine. Needs python3 (with venv) and npm (scripts/install-deps.sh).
set -euo pipefail

mcp_version=2.3.0
inspector_version=2.12.0
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${SPARK_MCP_VENV:-$root/target/mcp-venv}
tools=${SPARK_TOOLS_DIR:-$root/target/tools}

command -v python3 >/dev/null 2>&1 || { echo "install-mcp-client: python3 is not installed" >&2; exit 1; }
if [ ! -x "$venv/bin/python" ] || [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null)" != "$mcp_version" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$mcp_version"
fi
echo "install-mcp-client: Python mcp $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))') at $venv"

inspector=$tools/node_modules/.bin/mcp-inspector
installed=$(node -p "require('$tools/node_modules/@modelcontextprotocol/inspector/package.json').version" 2>/dev/null || true)
if [ ! -x "$inspector" ] || [ "$installed" != "$inspector_version" ]; then
  command -v npm >/dev/null 2>&1 || { echo "install-mcp-client: npm is not installed (scripts/install-deps.sh)" >&2; exit 1; }
  mkdir -p "$tools"
  [ -f "$tools/package.json" ] || echo '{"name": "spark-tools", "private": true}' > "$tools/package.json"
  npm install --prefix "$tools" --no-audit --no-fund --save-exact "@modelcontextprotocol/inspector@$inspector_version" >/dev/null
fi
echo "install-mcp-client: MCP Inspector $inspector_version at $inspector"
