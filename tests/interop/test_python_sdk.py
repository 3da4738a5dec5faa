"""Interop: the official Python MCP SDK drives the real `filesystem` binary.

Both connection styles of the SDK are exercised: `mode="auto"` (probes `server/discover`, the 2026-07-28
stateless revision) and `mode="legacy"` (the `initialize` handshake). The SDK validates every tool result
against the tool's declared output schema, so a schema/structuredContent mismatch fails here. The opt-in
tools of `--tools extended` are each called once and their answers' shapes checked. A server started
without `--root` in `/` (as desktop clients start servers) takes its root from the SDK's `roots/list`
callback and follows `notifications/roots/list_changed`.
"""

import base64
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import ListRootsResult, Root

BINARY = os.environ.get("FILESYSTEM_BIN") or str(
    Path(__file__).resolve().parents[2] / "target" / "debug" / "filesystem"
)


@pytest.fixture()
def workspace():
    root = Path(tempfile.mkdtemp(prefix="fs-interop-"))
    (root / "hello.txt").write_text("hello from the workspace\n")
    (root / "app.log").write_text("".join(f"2026-01-0{i % 9 + 1} INFO svc{i} ok\n" for i in range(20))
                                  + "2026-01-02 ERROR db timeout\n2026-01-03 ERROR api refused\n")
    (root / "src").mkdir()
    (root / "src" / "main.rs").write_text("fn main() {}\n")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def server(root: Path, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(command=BINARY, args=["--root", str(root), *flags])


def text_of(result) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def exercise_filesystem(root: Path, mode: str, expect_version_prefix: str):
    async with Client(server(root, "--backup"), mode=mode) as client:
        assert client.protocol_version.startswith(expect_version_prefix), client.protocol_version
        tools = await client.list_tools()
        names = [t.name for t in tools.tools]
        assert len(names) == 14, names
        assert "read_text_file" in names and "undo_file" in names

        read = await client.call_tool("read_text_file", {"path": "hello.txt"})
        assert not read.is_error, text_of(read)
        assert text_of(read) == "hello from the workspace\n"

        wrote = await client.call_tool("write_file", {"path": "notes/todo.md", "content": "- ship it\n"})
        assert not wrote.is_error, text_of(wrote)
        assert (root / "notes" / "todo.md").read_text() == "- ship it\n"

        listing = await client.call_tool("list_directory", {"path": "."})
        assert "[FILE] hello.txt" in text_of(listing)

        escape = await client.call_tool("read_text_file", {"path": "../etc/passwd"})
        assert escape.is_error
        assert text_of(escape).startswith("PathEscape")


# A WAV header for 8 bytes of 8-bit mono samples, for read_media_file.
WAV = (
    b"RIFF\x2c\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x40\x1f\x00\x00"
    b"\x01\x00\x08\x00data\x08\x00\x00\x00" + bytes([128, 160, 190, 160, 128, 96, 66, 96])
)


async def exercise_extended(root: Path, mode: str):
    """Each opt-in tool of `--tools extended` once, with its answer's shape checked."""
    (root / "sound.wav").write_bytes(WAV)
    async with Client(server(root, "--tools", "extended"), mode=mode) as client:
        tools = await client.list_tools()
        names = [t.name for t in tools.tools]
        for name in ["read_multiple_files", "get_file_info", "list_directory_with_sizes", "find_files",
                     "read_media_file", "list_allowed_directories", "search_content", "copy_file",
                     "append_file", "list_operations", "revert_operation"]:
            assert name in names, names

        batch = await client.call_tool("read_multiple_files", {"paths": ["hello.txt", "nope.txt", "src/main.rs"]})
        assert not batch.is_error, text_of(batch)
        files = batch.structured_content["files"]
        assert [f["path"] for f in files] == ["hello.txt", "nope.txt", "src/main.rs"]
        assert files[0]["content"] == "hello from the workspace\n"
        assert files[1]["error"].startswith("NotFound")
        assert files[2]["content"] == "fn main() {}\n"

        info = await client.call_tool("get_file_info", {"path": "src"})
        assert not info.is_error, text_of(info)
        lines = dict(line.split(": ", 1) for line in text_of(info).splitlines())
        assert lines["path"] == "src" and lines["type"] == "directory" and lines["isDirectory"] == "true", lines

        sizes = await client.call_tool("list_directory_with_sizes", {"path": "."})
        assert not sizes.is_error, text_of(sizes)
        listing = text_of(sizes)
        assert any(line.startswith("[FILE] hello.txt") and line.endswith(" 25 B") for line in listing.splitlines()), listing
        assert "[DIR] src" in listing and "Total: 3 files, 1 directories" in listing, listing

        found = await client.call_tool("find_files", {"path": ".", "pattern": "**/*.rs", "excludePatterns": ["*.log"]})
        assert not found.is_error, text_of(found)
        assert text_of(found).splitlines() == ["src/main.rs"]

        media = await client.call_tool("read_media_file", {"path": "sound.wav"})
        assert not media.is_error, text_of(media)
        assert [block.type for block in media.content] == ["text", "audio"]
        audio = media.content[1]
        assert audio.mime_type == "audio/wav"
        assert base64.b64decode(audio.data) == WAV

        searched = await client.call_tool("search_content", {"pattern": "fn main", "fixedStrings": True})
        assert not searched.is_error, text_of(searched)
        assert text_of(searched).splitlines() == ["src/main.rs:1:fn main() {}"]
        assert searched.structured_content["matches"] == [{"path": "src/main.rs", "line": 1, "text": "fn main() {}"}]

        allowed = await client.call_tool("list_allowed_directories", {})
        assert not allowed.is_error, text_of(allowed)
        assert text_of(allowed).splitlines() == ["Allowed directories:", str(root.resolve())]
        assert allowed.structured_content["directories"] == [str(root.resolve())]

        refused = await client.call_tool("read_media_file", {"path": "hello.txt"})
        assert refused.is_error
        assert "UTF-8 text" in text_of(refused) and "read_text_file" in text_of(refused)

        copied = await client.call_tool("copy_file", {"source": "src", "destination": "src-copy"})
        assert not copied.is_error, text_of(copied)
        assert text_of(copied).startswith("Copied directory src to src-copy: 1 file"), text_of(copied)
        assert (root / "src-copy" / "main.rs").read_text() == "fn main() {}\n"

        appended = await client.call_tool("append_file", {"path": "hello.txt", "content": "and more"})
        assert not appended.is_error, text_of(appended)
        assert text_of(appended).startswith("Appended to hello.txt"), text_of(appended)
        assert (root / "hello.txt").read_text() == "hello from the workspace\nand more"

        # The operation log: the append and the copy, newest first; a dry run of reverting the
        # append names what it would do and changes nothing.
        listed = await client.call_tool("list_operations", {"limit": 10})
        assert not listed.is_error, text_of(listed)
        ops = listed.structured_content["operations"]
        assert [op["tool"] for op in ops] == ["append_file", "copy_file"], ops
        dry = await client.call_tool("revert_operation", {"id": ops[0]["id"], "dryRun": True})
        assert not dry.is_error, text_of(dry)
        assert (root / "hello.txt").read_text() == "hello from the workspace\nand more"


async def exercise_pipe(root: Path, mode: str):
    async with Client(server(root, "--legacy-pipe"), mode=mode) as client:
        tools = await client.list_tools()
        assert sorted(t.name for t in tools.tools) == ["shelpa_pipe", "shelpa_write"]
        result = await client.call_tool(
            "shelpa_pipe", {"command": "tail -n 100 app.log | rg ERROR | awk '{print $3}' | sort -u"}
        )
        assert not result.is_error, text_of(result)
        payload = json.loads(text_of(result))
        assert payload["stdout"] == "api\ndb\n"
        steps = payload["meta"]["steps"]
        assert [s["command"] for s in steps] == [
            "tail -n 100 app.log",
            "rg ERROR",
            "awk '{print $3}'",
            "sort -u",
        ]
        assert all(isinstance(s["output_size"], int) for s in steps), steps
        assert steps[-1]["output_size"] == len(payload["stdout"].encode())

        refused = await client.call_tool("shelpa_pipe", {"command": "rm -rf ."})
        assert refused.is_error
        assert json.loads(text_of(refused))["error"]["reason"] == "DISALLOWED_CMD"


async def exercise_all_shelpa_tools(root: Path, mode: str):
    async with Client(server(root, "--legacy-pipe", "--shelpa-tools", "all"), mode=mode) as client:
        tools = await client.list_tools()
        assert [t.name for t in tools.tools] == ["shelpa_pipe", "shelpa_tee", "shelpa_write", "shelpa"]
        teed = await client.call_tool("shelpa_tee", {"content": "teed\n", "paths": ["a.txt", "b.txt"]})
        assert not teed.is_error, text_of(teed)
        assert (root / "a.txt").read_text() == "teed\n" and (root / "b.txt").read_text() == "teed\n"
        assert (root / ".shelpa" / "a.txt").read_text().endswith("---\nteed\n")  # audit record
        moved = await client.call_tool("shelpa", {"command": "cd src"})
        assert not moved.is_error, text_of(moved)
        here = await client.call_tool("shelpa", {"command": "pwd"})
        assert json.loads(text_of(here))["stdout"].rstrip("\n").endswith("/src")
        refused = await client.call_tool("shelpa", {"command": "ls | head"})
        assert refused.is_error
        assert json.loads(text_of(refused))["error"]["reason"] == "NAV_IN_PIPELINE"


def test_all_shelpa_tools_with_the_stateless_probe(workspace):
    anyio.run(exercise_all_shelpa_tools, workspace, "auto")


def test_all_shelpa_tools_with_the_initialize_handshake(workspace):
    anyio.run(exercise_all_shelpa_tools, workspace, "legacy")


def test_filesystem_mode_with_the_stateless_probe(workspace):
    anyio.run(exercise_filesystem, workspace, "auto", "2026-07-28")


def test_filesystem_mode_with_the_initialize_handshake(workspace):
    anyio.run(exercise_filesystem, workspace, "legacy", "2025-11-25")


def test_extended_tools_with_the_stateless_probe(workspace):
    anyio.run(exercise_extended, workspace, "auto")


def test_extended_tools_with_the_initialize_handshake(workspace):
    anyio.run(exercise_extended, workspace, "legacy")


def test_pipe_mode_with_the_stateless_probe(workspace):
    anyio.run(exercise_pipe, workspace, "auto")


def test_pipe_mode_with_the_initialize_handshake(workspace):
    anyio.run(exercise_pipe, workspace, "legacy")


def rootless_server(*flags: str) -> StdioServerParameters:
    """The server as a desktop client starts it: no --root, no FILESYSTEM_ROOT, in `/`."""
    env = {k: v for k, v in os.environ.items() if k != "FILESYSTEM_ROOT"}
    return StdioServerParameters(command=BINARY, args=list(flags), cwd="/", env=env)


async def allowed_directories(client) -> list[str]:
    listed = await client.call_tool("list_allowed_directories", {})
    assert not listed.is_error, text_of(listed)
    return listed.structured_content["directories"]


async def exercise_roots(first: Path, second: Path):
    served = [first]

    async def list_roots(_context) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=p.as_uri(), name=p.name) for p in served])

    async with Client(rootless_server("--tools", "extended"), mode="legacy", list_roots_callback=list_roots) as client:
        read = await client.call_tool("read_text_file", {"path": "hello.txt"})
        assert not read.is_error, text_of(read)
        assert text_of(read) == "hello from the workspace\n"
        assert await allowed_directories(client) == [str(first.resolve())]

        wrote = await client.call_tool("write_file", {"path": "from-roots.txt", "content": "rooted\n"})
        assert not wrote.is_error, text_of(wrote)
        assert (first / "from-roots.txt").read_text() == "rooted\n"

        # The client changes its roots: the server asks again and serves the new first root. The
        # switch happens when the server's roots/list is answered, so look until it shows (for up
        # to a minute: a loaded machine may take a while, a broken server never shows it).
        served[:] = [second, first]
        await client.send_roots_list_changed()
        giving_up = time.monotonic() + 60
        while time.monotonic() < giving_up:
            if await allowed_directories(client) == [str(second.resolve()), str(first.resolve())]:
                break
            await anyio.sleep(0.05)
        assert await allowed_directories(client) == [str(second.resolve()), str(first.resolve())]
        read = await client.call_tool("read_text_file", {"path": "other.txt"})
        assert not read.is_error, text_of(read)
        assert text_of(read) == "the second root\n"
        # Only the first root is served: the old one's file is not reachable by a relative path.
        gone = await client.call_tool("read_text_file", {"path": "from-roots.txt"})
        assert gone.is_error


def test_roots_from_the_client_with_the_initialize_handshake(workspace):
    second = Path(tempfile.mkdtemp(prefix="fs-interop-second-"))
    try:
        (second / "other.txt").write_text("the second root\n")
        anyio.run(exercise_roots, workspace, second)
    finally:
        shutil.rmtree(second, ignore_errors=True)


async def exercise_roots_stateless():
    async with Client(rootless_server(), mode="auto") as client:
        assert client.protocol_version == "2026-07-28", client.protocol_version
        read = await client.call_tool("read_text_file", {"path": "hello.txt"})
        assert read.is_error
        assert "--root" in text_of(read), text_of(read)


def test_the_stateless_revision_without_a_root_says_root_is_needed():
    anyio.run(exercise_roots_stateless)
