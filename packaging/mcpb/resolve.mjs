// Prints the command line a bundle host would start an unpacked bundle with: the manifest's
// mcp_config with the user's settings (and the manifest's defaults) substituted by the official
// library's own function, the one hosts use, so the bundle test runs what a host would run.
//
// usage: node resolve.mjs UNPACKED_DIR 'USER_CONFIG_JSON'
// prints: {"command": ..., "args": [...], "env": {...}}
import { readFile } from "node:fs/promises";
import path from "node:path";
import { getMcpConfigForManifest } from "@anthropic-ai/mcpb";

const [dir, userConfigJson] = process.argv.slice(2);
if (!dir || userConfigJson === undefined) {
    console.error("usage: node resolve.mjs UNPACKED_DIR 'USER_CONFIG_JSON'");
    process.exit(2);
}
const manifest = JSON.parse(await readFile(path.join(dir, "manifest.json"), "utf8"));
const config = await getMcpConfigForManifest({
    manifest,
    extensionPath: path.resolve(dir),
    systemDirs: {},
    userConfig: JSON.parse(userConfigJson),
    pathSeparator: path.sep,
});
if (config === undefined) {
    console.error("resolve.mjs: the manifest has no command for these settings (a required one missing?)");
    process.exit(1);
}
process.stdout.write(JSON.stringify(config) + "\n");
