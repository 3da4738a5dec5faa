// Interop: the official TypeScript MCP SDK client drives the real `filesystem` binary in every mode,
// lists the tools (the SDK validates every tool definition) and calls each tool once (the SDK checks
// structuredContent against each declared outputSchema); the opt-in tools of `--tools extended` also
// have their answers' shapes checked. A server started without `--root` in `/` (as desktop clients
// start servers) takes its root from the client's `roots/list` handler and follows
// `notifications/roots/list_changed`.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { mkdtempSync, writeFileSync, mkdirSync, rmSync, readFileSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const binary = process.env.FILESYSTEM_BIN;
if (!binary) {
  console.error("set FILESYSTEM_BIN to the filesystem binary");
  process.exit(2);
}

let passed = 0;
let failed = 0;
function check(ok, what) {
  if (ok) {
    passed += 1;
  } else {
    failed += 1;
    console.error(`FAIL ${what}`);
  }
}

// A 1x1 PNG, for read_media_file.
const PIXEL_PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
  "base64",
);

function workspace(extraFiles = {}) {
  const root = mkdtempSync(join(tmpdir(), "fs-ts-interop-"));
  writeFileSync(join(root, "hello.txt"), "hello world\n");
  writeFileSync(join(root, "app.log"), "a INFO x\nb ERROR db\nc ERROR api\n");
  mkdirSync(join(root, "src"));
  writeFileSync(join(root, "src", "main.rs"), "fn main() {}\n");
  for (const [name, content] of Object.entries(extraFiles)) {
    writeFileSync(join(root, name), content);
  }
  return root;
}

const text = (result) => (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");

// One call per tool, in an order where each builds on the last (delete, then restore what was deleted).
const filesystemCalls = [
  ["read_text_file", { path: "hello.txt" }],
  ["create_file", { path: "new/created.txt", content: "created\n" }],
  ["write_file", { path: "hello.txt", content: "hello again\n" }],
  ["edit_file", { path: "hello.txt", edits: [{ oldText: "again", newText: "once more" }] }],
  ["create_directory", { path: "dir1/dir2" }],
  ["list_directory", { path: "." }],
  ["directory_tree", { path: "." }],
  ["move_file", { source: "new/created.txt", destination: "new/moved.txt" }],
  ["delete_file", { path: "new/moved.txt" }],
  ["list_trash", {}],
  ["restore_file", (state) => ({ id: state.trashId })],
  ["search_file", { path: "new/created.txt" }],
  ["undo_file", { path: "hello.txt" }],
  ["redo_file", { path: "hello.txt" }],
];

// The opt-in tools of `--tools extended`, each with a check of its answer's shape (`root` is the
// workspace, for comparing bytes).
const extendedCalls = [
  [
    "read_multiple_files",
    { paths: ["src/main.rs", "app.log", "missing.txt"] },
    (r) => {
      const files = r.structuredContent?.files ?? [];
      return (
        files.length === 3 &&
        files[0].path === "src/main.rs" &&
        files[0].content === "fn main() {}\n" &&
        files[1].content === "a INFO x\nb ERROR db\nc ERROR api\n" &&
        typeof files[2].error === "string" &&
        text(r).includes("src/main.rs:\nfn main() {}\n") &&
        text(r).includes("missing.txt: Error - NotFound")
      );
    },
  ],
  [
    "get_file_info",
    { path: "src/main.rs" },
    (r) => /^path: src\/main\.rs\ntype: file\nsize: 13\n/.test(text(r)) && /\npermissions: [0-7]{3}/.test(text(r)),
  ],
  [
    "list_directory_with_sizes",
    { path: ".", sortBy: "size" },
    (r) => /\[FILE\] app\.log +32 B/.test(text(r)) && /\[DIR\] src/.test(text(r)) && /Total: \d+ files, \d+ directories/.test(text(r)),
  ],
  ["find_files", { path: ".", pattern: "**/*.rs" }, (r) => text(r).split("\n").includes("src/main.rs")],
  [
    "search_content",
    { pattern: "ERROR", path: "." },
    (r) => {
      const matches = r.structuredContent?.matches ?? [];
      return (
        text(r) === "app.log:2:b ERROR db\napp.log:3:c ERROR api" &&
        matches.length === 2 &&
        matches[0].path === "app.log" &&
        matches[0].line === 2 &&
        r.structuredContent.truncated === false
      );
    },
  ],
  [
    "list_allowed_directories",
    {},
    (r, root) => {
      const dirs = r.structuredContent?.directories ?? [];
      return text(r).startsWith("Allowed directories:\n") && dirs.length === 1 && dirs[0] === realpathSync(root);
    },
  ],
  [
    "read_media_file",
    { path: "pixel.png" },
    (r, root) => {
      const image = (r.content ?? []).find((c) => c.type === "image");
      return (
        image?.mimeType === "image/png" &&
        Buffer.from(image.data, "base64").equals(readFileSync(join(root, "pixel.png"))) &&
        r.content[0].type === "text"
      );
    },
  ],
  [
    "copy_file",
    { source: "src", destination: "src-copy" },
    (r, root) =>
      text(r).startsWith("Copied directory src to src-copy: 1 file") &&
      readFileSync(join(root, "src-copy", "main.rs"), "utf8") === "fn main() {}\n",
  ],
  [
    "append_file",
    { path: "app.log", content: "d INFO y\n" },
    (r, root) =>
      text(r).startsWith("Appended to app.log: 41 bytes") &&
      readFileSync(join(root, "app.log"), "utf8") === "a INFO x\nb ERROR db\nc ERROR api\nd INFO y\n",
  ],
  [
    "list_operations",
    { limit: 10 },
    (r) => {
      // Newest first: the append, then the copy, each one entry of the log.
      const ops = r.structuredContent?.operations ?? [];
      lastOperation = ops[0]?.id;
      return ops.length === 2 && ops[0].tool === "append_file" && ops[1].tool === "copy_file";
    },
  ],
  [
    "revert_operation",
    () => ({ id: lastOperation, dryRun: true }),
    (r, root) =>
      text(r).length > 0 &&
      readFileSync(join(root, "app.log"), "utf8") === "a INFO x\nb ERROR db\nc ERROR api\nd INFO y\n",
  ],
];

// The id list_operations showed last, for revert_operation to name.
let lastOperation;

const pipeCalls = [
  ["shelpa_pipe", { command: "tail -n 2 app.log | rg ERROR | awk '{print $3}' | sort -u" }],
  ["shelpa_write", { path: "notes.txt", content: "written by shelpa\n" }],
];

const allPipeCalls = [
  ...pipeCalls,
  ["shelpa_tee", { content: "teed by shelpa\n", paths: ["teed.txt", "teed-copy.txt"] }],
  ["shelpa", { command: "pwd" }],
];

// shelpa's original surface (the default of --legacy-pipe) announces itself as shelpa-mcp, as the
// design notes record; every other mode, and shelpa's modern surface, as filesystem.
async function runMode(label, flags, calls, serverName = "filesystem", extraFiles = {}) {
  const root = workspace(extraFiles);
  const transport = new StdioClientTransport({ command: binary, args: ["--root", root, ...flags], stderr: "pipe" });
  const client = new Client({ name: "ts-interop", version: "1.0.0" });
  try {
    await client.connect(transport);
    const version = client.getServerVersion();
    check(version?.name === serverName, `${label}: serverInfo.name is ${serverName} (got ${version?.name})`);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    const state = {};
    for (const [name, argsOrFn, shape] of calls) {
      if (!names.includes(name)) {
        check(false, `${label}: tool ${name} listed (got ${names.join(", ")})`);
        continue;
      }
      const args = typeof argsOrFn === "function" ? argsOrFn(state) : argsOrFn;
      try {
        const result = await client.callTool({ name, arguments: args });
        check(!result.isError, `${label}: ${name} succeeded: ${text(result)}`);
        if (shape) {
          check(shape(result, root), `${label}: ${name} answered in its shape: ${JSON.stringify(result).slice(0, 400)}`);
        }
        if (name === "list_trash") {
          const entries = result.structuredContent?.entries ?? [];
          state.trashId = entries.length ? entries[entries.length - 1].id : undefined;
          check(state.trashId !== undefined, `${label}: list_trash returned the deleted entry`);
        }
      } catch (err) {
        check(false, `${label}: ${name} raised ${err}`);
      }
    }
    check(names.length === calls.length || flags.includes("--with-filesystem"), `${label}: tool count ${names.length}`);
  } catch (err) {
    check(false, `${label}: session failed: ${err}`);
  } finally {
    await client.close().catch(() => {});
    rmSync(root, { recursive: true, force: true });
  }
}

await runMode("filesystem --backup", ["--backup"], filesystemCalls);
await runMode("filesystem", [], filesystemCalls.filter(([n]) => n !== "undo_file" && n !== "redo_file"));
await runMode(
  "filesystem --tools extended",
  ["--tools", "extended"],
  [...extendedCalls, ...filesystemCalls.filter(([n]) => n !== "undo_file" && n !== "redo_file")],
  "filesystem",
  { "pixel.png": PIXEL_PNG },
);
await runMode("legacy-pipe", ["--legacy-pipe"], pipeCalls, "shelpa-mcp");
await runMode("legacy-pipe, all four tools", ["--legacy-pipe", "--shelpa-tools", "all"], allPipeCalls, "shelpa-mcp");
await runMode("legacy-pipe, modern surface", ["--legacy-pipe", "--surface", "modern"], pipeCalls);
await runMode("combined", ["--legacy-pipe", "--with-filesystem"], [...pipeCalls, ["read_text_file", { path: "hello.txt" }]]);

// MCP roots: no --root, no FILESYSTEM_ROOT, started in `/`; the client declares `roots` and answers
// roots/list from `served`, which the test changes before announcing list_changed.
async function runRoots() {
  const first = workspace({});
  const second = workspace({ "other.txt": "the second root\n" });
  let served = [first];
  const env = { ...process.env };
  delete env.FILESYSTEM_ROOT;
  const transport = new StdioClientTransport({ command: binary, args: ["--tools", "extended"], cwd: "/", env, stderr: "pipe" });
  const client = new Client({ name: "ts-interop-roots", version: "1.0.0" }, { capabilities: { roots: { listChanged: true } } });
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: served.map((dir) => ({ uri: pathToFileURL(dir).href, name: dir })),
  }));
  const allowed = async () => (await client.callTool({ name: "list_allowed_directories", arguments: {} })).structuredContent?.directories ?? [];
  try {
    await client.connect(transport);
    const read = await client.callTool({ name: "read_text_file", arguments: { path: "hello.txt" } });
    check(!read.isError && text(read) === "hello world\n", `roots: read from the client's root: ${text(read)}`);
    check(JSON.stringify(await allowed()) === JSON.stringify([realpathSync(first)]), "roots: the first root is listed");

    served = [second, first];
    await client.sendRootsListChanged();
    const want = JSON.stringify([realpathSync(second), realpathSync(first)]);
    let seen = "";
    // The switch happens when the server's roots/list is answered: look until it shows (for up
    // to a minute: a loaded machine may take a while, a broken server never shows it).
    const givingUp = Date.now() + 60_000;
    while (seen !== want && Date.now() < givingUp) {
      seen = JSON.stringify(await allowed());
      if (seen !== want) await new Promise((r) => setTimeout(r, 50));
    }
    check(seen === want, `roots: list_changed switched the roots (got ${seen})`);
    const other = await client.callTool({ name: "read_text_file", arguments: { path: "other.txt" } });
    check(!other.isError && text(other) === "the second root\n", `roots: the new first root is served: ${text(other)}`);
  } catch (err) {
    check(false, `roots: session failed: ${err}`);
  } finally {
    await client.close().catch(() => {});
    rmSync(first, { recursive: true, force: true });
    rmSync(second, { recursive: true, force: true });
  }
}
await runRoots();

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
