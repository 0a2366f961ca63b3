"""Drives `spark-lsp mcp` with the official MCP Python SDK (`mcp`, pinned by scripts/install-mcp-client.sh) as a
stdio client, the way a coding agent would, and checks each answer.

Usage: client.py SPARK_LSP_BIN ROOT LOG_DIR
ROOT is a scratch workspace prepared by tests/e2e/mcp.rs (a small crate with syntax errors, a symlink out of
it). Prints one table row per scenario and, last, one line of JSON: {"scenario": {"ok": bool, "detail": str}}.
Exits 1 when a scenario failed. No timing is asserted; every wait is generous.
"""

import asyncio
import json
import os
import sys
import traceback

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

BIN, ROOT, LOG_DIR = sys.argv[1], sys.argv[2], sys.argv[3]
GENEROUS = 240.0
TOOLS = {"complete", "fix", "generate_tests", "generate_regex", "check"}
results = {}


def record(name, ok, detail):
    results[name] = {"ok": bool(ok), "detail": str(detail)[:600]}
    print(f"| {name} | {'ok' if ok else 'FAILED'} | {str(detail)[:200]} |", flush=True)


def server(log_name, *extra):
    args = ["mcp", "--root", ROOT, "--strong-model", "none", *extra]
    env = {"SPARK_LOG": "info", "HOME": os.environ.get("HOME", "")}
    for key in ("SPARK_MODEL", "SPARK_MODEL_DIR", "XDG_DATA_HOME", "XDG_CACHE_HOME", "PATH"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    return StdioServerParameters(command=BIN, args=args, env=env), open(os.path.join(LOG_DIR, log_name), "w")


def text_of(result):
    return " ".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def call(session, name, arguments, timeout=GENEROUS):
    return await asyncio.wait_for(session.call_tool(name, arguments), timeout)


async def scenario(name, body):
    try:
        ok, detail = await body()
    except Exception as error:  # a scenario that raised failed; the others still run
        ok, detail = False, f"{type(error).__name__}: {error} {traceback.format_exc()[-400:]}"
    record(name, ok, detail)


async def main_session():
    params, log = server("server.log")
    async with stdio_client(params, errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), GENEROUS)

            async def list_tools():
                listed = await asyncio.wait_for(session.list_tools(), GENEROUS)
                names = {tool.name for tool in listed.tools}
                schemas = all(tool.input_schema.get("type") == "object" and tool.output_schema for tool in listed.tools)
                return names == TOOLS and schemas, sorted(names)

            async def fix():
                result = await call(session, "fix", {"file": "src/lib.rs", "line": 2, "column": 39})
                data = result.structured_content or {}
                diff = "".join(change["diff"] for change in data.get("changes", []))
                ok = not result.is_error and data.get("verified") and "+    let sum: u32 = prices.iter().sum();" in diff
                return ok, data.get("summary", text_of(result))

            async def fix_write_refused():
                result = await call(session, "fix", {"file": "src/other.rs", "line": 2, "column": 24, "write": True})
                data = result.structured_content or {}
                with open(os.path.join(ROOT, "src/other.rs")) as file:
                    untouched = "let n = items.len()\n" in file.read()
                ok = data.get("verified") and data.get("written") is False and untouched
                return ok, data.get("summary")

            async def regex():
                result = await call(
                    session,
                    "generate_regex",
                    {"description": "a date as year-month-day", "must_match": ["2024-01-31", "1999-12-01"],
                     "must_not_match": ["2024-1-31", "hello"], "dialect": "rust"},
                )
                data = result.structured_content or {}
                if result.is_error:
                    return False, text_of(result)
                # Examples with `,` `;` and `"` are carried exactly (JSON arrays), not refused.
                punctuated = await call(
                    session,
                    "generate_regex",
                    {"description": "a quoted pair", "must_match": ['"a,b"', '"c;d"'], "must_not_match": ["a,b"],
                     "dialect": "ecmascript"},
                )
                if punctuated.is_error:
                    return False, "punctuated examples: " + text_of(punctuated)
                punctuated_data = punctuated.structured_content or {}
                if punctuated_data.get("verified") and not all(row["ok"] for row in punctuated_data["examples"]):
                    return False, f"punctuated: {punctuated_data}"
                if data.get("verified"):
                    rows = data["examples"]
                    pattern = data["pattern"]
                    # Never the examples spelled out.
                    spelled = "2024-01-31" in pattern.replace("\\", "")
                    return len(rows) == 4 and all(row["ok"] for row in rows) and not spelled, f"pattern {pattern}"
                # Nothing verified is a valid answer when it says so plainly: no pattern is offered.
                return data.get("pattern") is None and "no verified regex" in data["summary"], data["summary"]

            async def check_good():
                result = await call(session, "check", {"file": "src/lib.rs", "old_text": "sum()\n", "new_text": "sum();\n"})
                data = result.structured_content or {}
                return not result.is_error and data.get("ok") is True, data.get("checks")

            async def check_bad():
                result = await call(
                    session, "check", {"file": "src/lib.rs", "old_text": "sum * count", "new_text": "sum * (count"}
                )
                data = result.structured_content or {}
                parses = [row for row in data.get("checks", []) if row["check"] == "parses"]
                return data.get("ok") is False and parses and not parses[0]["passed"], data.get("checks")

            async def check_regex():
                good = await call(session, "check", {
                    "file": "src/other.rs", "old_text": "let n = items.len()\n",
                    "new_text": "let n = items.len();\n    let _re = r\"^\\d{4}$\";\n",
                    "regex": {"pattern": "^\\d{4}$", "must_match": ["2024"], "must_not_match": ["24", "abcd"]}})
                bad = await call(session, "check", {
                    "file": "src/other.rs", "old_text": "let n = items.len()\n",
                    "new_text": "let n = items.len();\n    let _re = r\"^\\d+$\";\n",
                    "regex": {"pattern": "^\\d+$", "must_match": ["2024"], "must_not_match": ["24"]}})
                good_data, bad_data = good.structured_content or {}, bad.structured_content or {}
                bad_rows = [row for row in bad_data.get("examples", []) if not row["ok"]]
                ok = good_data.get("ok") is True and bad_data.get("ok") is False and [r["example"] for r in bad_rows] == ["24"]
                return ok, f"good {good_data.get('checks')} bad {bad_data.get('checks')}"

            async def complete():
                result = await call(session, "complete", {
                    "file": "src/scratch.rs", "text": "pub fn add(a: u32, b: u32) -> u32 {\n    $0\n}\n"})
                data = result.structured_content or {}
                checks = data.get("checks") or []
                ok = (not result.is_error and data.get("line") == 2 and data.get("column") == 5 and checks
                      and (data.get("suggestion") is None or isinstance(data.get("suggestion"), str)))
                return ok, f"suggestion {data.get('suggestion')!r}, checks {checks}"

            async def generate_tests():
                result = await call(session, "generate_tests", {"file": "src/tested.rs", "function": "double"})
                data = result.structured_content or {}
                if result.is_error:
                    return False, text_of(result)
                if data.get("verified"):
                    diff = "".join(change["diff"] for change in data["changes"])
                    return "double(" in diff and "#[test]" in diff, data["summary"]
                return data.get("changes") == [] and "no verified tests" in data["summary"], data["summary"]

            async def bad_arguments():
                wrong_type = await call(session, "fix", {"file": "src/lib.rs", "line": "two", "column": 39})
                unknown = await call(session, "check", {"file": "src/lib.rs", "old": "x", "new_text": "y"})
                missing = await call(session, "generate_regex", {"must_match": ["a"]})
                bad_position = await call(session, "fix", {"file": "src/lib.rs", "line": 900, "column": 1})
                after = await call(session, "check", {"file": "src/lib.rs", "old_text": "sum()\n", "new_text": "sum();\n"})
                errors = [wrong_type, unknown, missing, bad_position]
                ok = all(result.is_error for result in errors) and not after.is_error
                return ok, " / ".join(text_of(result)[:90] for result in errors)

            async def path_escapes():
                dotdot = await call(session, "fix", {"file": "../outside.rs", "line": 1, "column": 1})
                symlink = await call(session, "check", {"file": "src/link.rs", "old_text": "fn", "new_text": "fn"})
                absolute = await call(session, "generate_tests", {"file": os.path.join(os.path.dirname(ROOT), "outside.rs"), "function": "secret"})
                into_link_dir = await call(session, "complete", {"file": "up/outside.rs", "line": 1, "column": 1})
                refused = [dotdot, symlink, absolute, into_link_dir]
                ok = all(result.is_error and "outside the workspace root" in text_of(result) for result in refused)
                return ok, " / ".join(text_of(result)[:80] for result in refused)

            async def huge_input():
                huge = "x" * (6 << 20)
                big = await call(session, "check", {"file": "src/lib.rs", "old_text": "sum()\n", "new_text": huge})
                examples = await call(session, "generate_regex", {"description": "a", "must_match": ["a"] * 5000})
                after = await call(session, "check", {"file": "src/lib.rs", "old_text": "sum()\n", "new_text": "sum();\n"})
                ok = big.is_error and examples.is_error and not after.is_error
                return ok, f"{text_of(big)[:80]} / {text_of(examples)[:80]}"

            async def concurrent():
                first, second, third = await asyncio.wait_for(asyncio.gather(
                    session.call_tool("fix", {"file": "src/lib.rs", "line": 2, "column": 39}),
                    session.call_tool("fix", {"file": "src/other.rs", "line": 2, "column": 24}),
                    session.call_tool("complete", {"file": "src/scratch.rs", "text": "fn main() {\n    let x = 1;\n    $0\n}\n"}),
                ), GENEROUS)
                paths = [[change["path"] for change in (result.structured_content or {}).get("changes", [])] for result in (first, second)]
                ok = paths == [["src/lib.rs"], ["src/other.rs"]] and (third.structured_content or {}).get("line") == 3
                return ok, f"fix paths {paths}, complete line {(third.structured_content or {}).get('line')}"

            async def execution_tier():
                # The toolchain runs in a scratch copy: the first cargo build there takes a while.
                compiled = await call(session, "check", {
                    "file": "exec/src/lib.rs", "old_text": "x * 2", "new_text": "x * 3", "compile": True}, 600)
                refused = await call(session, "check", {
                    "file": "exec/src/lib.rs", "old_text": "x * 2", "new_text": "x * \"2\"", "compile": True}, 600)
                rows = {row["check"]: row for row in (compiled.structured_content or {}).get("checks", [])}
                compiles = rows.get("compiles", {})
                refused_rows = {row["check"]: row for row in (refused.structured_content or {}).get("checks", [])}
                type_error = refused_rows.get("compiles", {})
                tests = await call(session, "generate_tests", {
                    "file": "exec/src/lib.rs", "function": "double", "run": True, "deadline_ms": 500000}, 600)
                data = tests.structured_content or {}
                if data.get("verified"):
                    ran = "cargo test" in data["summary"]
                else:
                    ran = data.get("changes") == [] and "no verified tests" in data.get("summary", "")
                ok = (compiles.get("passed") is True and "cargo check" in compiles.get("detail", "")
                      and type_error.get("passed") is False and not tests.is_error and ran)
                return ok, f"check: {compiles}; type error: {type_error}; tests: {data.get('summary') or text_of(tests)}"

            for name, body in [
                ("list_tools", list_tools), ("fix", fix), ("fix_write_without_allow_write", fix_write_refused),
                ("generate_regex", regex), ("check_good_edit", check_good), ("check_bad_edit", check_bad),
                ("check_regex_examples", check_regex), ("complete", complete), ("generate_tests", generate_tests),
                ("bad_arguments", bad_arguments), ("path_escapes", path_escapes), ("huge_input", huge_input),
                ("concurrent_calls", concurrent), ("execution_tier", execution_tier),
            ]:
                await scenario(name, body)
    log.close()


async def cancel_session():
    # Many samples and a long budget: a task that cannot verify keeps the model busy until cancelled.
    params, log = server("cancel.log", "--samples", "256", "--budget-ms", "120000")
    async with stdio_client(params, errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), GENEROUS)

            async def cancellation():
                # Wait for the model: a trivial call that uses it.
                await call(session, "complete", {"file": "src/scratch.rs", "text": "fn f() {\n    $0\n}\n"})
                # Tests written by the model (no --run here): each sample is seconds of generation, so the call is
                # still sampling when it is cancelled 2 s in. (A regex with contradictory examples is refused at
                # once now, before any model call.)
                long_call = asyncio.ensure_future(session.call_tool("generate_tests", {
                    "file": "src/tested.rs", "function": "double"}))
                await asyncio.sleep(2.0)
                finished_early = long_call.done()
                early = text_of(long_call.result())[:300] if finished_early else ""
                long_call.cancel()
                try:
                    await long_call
                except asyncio.CancelledError:
                    pass
                # The next model call gets the model: with the cancelled task still sampling it would wait for
                # the 120 s budget and miss its own 90 s deadline.
                after = await call(session, "complete", {
                    "file": "src/scratch.rs", "text": "fn g() {\n    $0\n}\n", "deadline_ms": 90000})
                ok = not finished_early and not after.is_error
                return ok, f"finished before the cancel: {finished_early} {early}; next call: {text_of(after)[:120]}"

            await scenario("cancellation", cancellation)
    log.close()


async def write_session():
    params, log = server("write.log", "--allow-write")
    async with stdio_client(params, errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), GENEROUS)

            async def fix_write():
                result = await call(session, "fix", {"file": "src/written.rs", "line": 2, "column": 24, "write": True})
                data = result.structured_content or {}
                with open(os.path.join(ROOT, "src/written.rs")) as file:
                    fixed = "let n = items.len();\n" in file.read()
                return data.get("written") is True and fixed, data.get("summary")

            await scenario("fix_write_with_allow_write", fix_write)
    log.close()


async def main():
    print("| scenario | result | detail |\n|---|---|---|", flush=True)
    await main_session()
    await cancel_session()
    await write_session()
    print(json.dumps(results), flush=True)
    sys.exit(0 if all(result["ok"] for result in results.values()) else 1)


asyncio.run(main())
