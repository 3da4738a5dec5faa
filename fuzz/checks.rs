//! The properties each fuzz target checks, shared with `tests/fuzz_regressions.rs`, which replays
//! every saved crash input through the same code in the normal test suite.
#![allow(dead_code)]
// Fuzz properties build their fixtures by name in temporary directories, as the tests do.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use mcp_core::server::{serve, ServerConfig};
use mcp_core::toolset::{CallContext, Effects, ToolDef, ToolOutput, Toolset};
use mcp_core::wire::{Frame, FrameReader};
use shelpa::plan::{CommandName, Plan, Step};
use shelpa::policy::{check, PolicyContext, ToolPaths};
use workspace::guard::PathGuard;

/// The frame reader never panics, never returns more than its limit, and always reaches the end.
pub fn framing(data: &[u8]) {
    let limit = 4096;
    let mut reader = FrameReader::new(data, limit);
    // Each frame consumes at least one byte, so this many reads always reach the end.
    for _ in 0..=data.len() {
        match reader.read_frame() {
            Ok(Some(Frame::Message(bytes))) => assert!(bytes.len() <= limit),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
    panic!("reader did not reach the end of its input");
}

/// The whole JSON-RPC loop answers or skips whatever arrives, returns at the end of input, and
/// everything it writes in line framing is JSON — including tool results carrying whatever text
/// the input smuggled into a call (the hand-written reply path).
pub fn dispatch(data: &[u8]) {
    let toolset: Arc<dyn Toolset> = Arc::new(Echo);
    let config = ServerConfig {
        max_message_bytes: 64 * 1024,
        page_size: 2,
        ..ServerConfig::default()
    };
    let out = SharedOut::default();
    let _ = serve(
        toolset,
        config,
        None,
        std::io::Cursor::new(data.to_vec()),
        out.clone(),
    );
    let written = out.0.lock().map(|b| b.clone()).unwrap_or_default();
    if written.starts_with(b"Content-Length") {
        return; // header framing: each body is checked by the same code, framed differently
    }
    for line in written.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(line) {
            panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(line));
        }
    }
}

/// One tool, `echo`, whose text is the `text` argument as given (or the arguments as JSON), and
/// whose structured content is the arguments: client-chosen strings, escaped on the way out.
struct Echo;

impl Toolset for Echo {
    fn mode(&self) -> String {
        "echo".into()
    }
    fn instructions(&self) -> String {
        String::new()
    }
    fn tools(&self) -> Vec<ToolDef> {
        vec![ToolDef {
            name: "echo".into(),
            title: "Echo".into(),
            description: "Returns its arguments.".into(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            effects: Effects::READ_ONLY,
        }]
    }
    fn call(
        &self,
        _name: &str,
        args: &serde_json::Map<String, serde_json::Value>,
        _ctx: &CallContext,
    ) -> ToolOutput {
        let text = match args.get("text") {
            Some(serde_json::Value::String(t)) => t.clone(),
            _ => serde_json::Value::Object(args.clone()).to_string(),
        };
        ToolOutput {
            text,
            structured: Some(serde_json::Value::Object(args.clone())),
            is_error: args.contains_key("fail"),
            ..ToolOutput::default()
        }
    }
}

/// An output the fuzz target can read back after the server (which owns its writer) is done.
#[derive(Clone, Default)]
struct SharedOut(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.lock() {
            Ok(mut out) => out.extend_from_slice(buf),
            Err(_) => return Err(std::io::Error::other("poisoned")),
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    guard: PathGuard,
}

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("tmp");
        let base = tmp.path().canonicalize().expect("canonical");
        let root = base.join("ws");
        std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
        std::fs::create_dir_all(base.join("outside")).expect("mkdir");
        symlink(base.join("outside"), root.join("out")).expect("link");
        symlink("../../..", root.join("a/b/up")).expect("link");
        symlink("b", root.join("a/in")).expect("link");
        symlink("/", root.join("slash")).expect("link");
        let guard = PathGuard::new(&root).expect("guard");
        Tree {
            _tmp: tmp,
            root,
            guard,
        }
    })
}

/// A path the guard accepts is always inside the root, in a tree with escaping symlinks.
pub fn guard(data: &[u8]) {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let t = tree();
    for resolved in [t.guard.resolve(input), t.guard.resolve_no_follow(input)]
        .into_iter()
        .flatten()
    {
        assert!(
            resolved.path.starts_with(&t.root),
            "{input:?} -> {:?}",
            resolved.path
        );
    }
}

/// A pipeline string the lexer and policy accept becomes a plan whose programs are absolute,
/// whose directories and tee targets are inside the root (never in `.shelpa/`), and whose every
/// absolute-path operand is inside the root. Operands are what follows the `--` the policy always
/// inserts; option values before it (`tail -n /t`) are not paths and the tool itself rejects them.
/// For rg, fd, awk and sed the first operand may be a pattern or program rather than a path, so it
/// is left out; tr's and jq's operands are not paths at all (sets, `--args` strings). Leaving data
/// out only weakens the check, never makes it wrong.
pub fn pipeline(data: &[u8]) {
    static TOOLS: OnceLock<ToolPaths> = OnceLock::new();
    let Ok(command) = std::str::from_utf8(data) else {
        return;
    };
    let t = tree();
    let tools = TOOLS.get_or_init(ToolPaths::discover);
    let Ok(stages) = shelpa::parse::parse(command) else {
        return;
    };
    let cx = PolicyContext {
        guard: &t.guard,
        cwd: &t.root,
        tools,
    };
    let Ok(Plan::Pipeline(steps)) = check(&stages, &cx) else {
        return;
    };
    for step in steps {
        match step {
            Step::Run {
                argv,
                cwd,
                command: name,
            } => {
                assert!(PathBuf::from(&argv[0]).is_absolute(), "{command:?}");
                assert!(cwd.starts_with(&t.root), "{command:?}");
                let skip = match name {
                    CommandName::Tr | CommandName::Jq => usize::MAX,
                    CommandName::Rg | CommandName::Fd | CommandName::Awk | CommandName::Sed => 2,
                    _ => 1,
                };
                let operands = argv.iter().skip_while(|a| a.as_os_str() != "--").skip(skip);
                for arg in operands {
                    let p = PathBuf::from(arg);
                    if p.is_absolute() {
                        assert!(p.starts_with(&t.root), "{command:?} passes {p:?}");
                    }
                }
            }
            Step::Tee { targets, .. } => {
                for target in targets {
                    assert!(target.starts_with(&t.root), "{command:?}");
                    assert!(!target.starts_with(t.root.join(".shelpa")), "{command:?}");
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The workspace layer on a tree that another thread keeps changing.
// ---------------------------------------------------------------------------------------------

/// The content of every canary file a redirected operation could reach. No operation writes
/// anything containing it, so a read that returns it read the canary.
const SECRET: &[u8] = b"CANARY-SECRET-never-inside";
/// A canary file whose name no operation ever uses: a listing that shows it listed the canary.
const SECRET_NAME: &str = "zz-canary-only-outside";
/// The outside file the mutator hard-links into the root. Its name is not in the path alphabet,
/// so no path through `s` reaches it; its in-root names are legitimately the same file, so its
/// content may be read and is not secret.
const SHARED_NAME: &str = "shared";
const SHARED: &[u8] = b"shared inode, linked in by the mutator\n";
/// Fewest bytes per operation, so an input of any length stays a short run.
const MAX_OPS: usize = 64;

/// Root-relative paths the operations act on. `d` and `d/e` are real directories the mutator
/// swaps for symlinks to the canary; `s` is such a symlink from the start (`s/…` must always be
/// refused); `h` and `d/h` are where the mutator plants hard links; the last one is not plain.
const PATHS: [&str; 16] = [
    "",
    "a",
    "b",
    "d",
    "d/e",
    "d/e/f",
    "d/f",
    "d/h",
    "e",
    "f",
    "h",
    "s",
    "s/f",
    "s/x",
    "s/x/a",
    "../outside/f",
];
/// Entry names for operations on an opened [`workspace::Dir`].
const NAMES: [&str; 8] = ["a", "b", "e", "f", "h", "x", "g", "s"];
/// What the operations write: small, and never containing [`SECRET`].
const CONTENTS: [&[u8]; 4] = [b"", b"1", b"two\n", b"three three three\n"];
/// Modes `set_mode` and `replace_file` may give; all keep the owner's `rwx`, so a directory never
/// becomes impossible to clean up for a non-root test run.
const MODES: [u32; 4] = [0o700, 0o755, 0o750, 0o777];

/// Operations of the workspace layer, decoded from fuzz bytes, run on a fresh root while a second
/// thread exchanges `d` with the symlink `s -> ../outside`, replaces `d/e` with such a symlink and
/// back, and plants and removes hard links to an outside file at `h`, `d/h` and over `f`.
///
/// The property is the layer's guarantee: a swap can make an operation fail, never redirect it.
/// No panic; afterwards the canary `outside/` is what it was — the same names, kinds, contents,
/// sizes, modes, link counts, inodes and modification times, nothing added (no temporaries); no
/// successful read returned [`SECRET`], no listing showed [`SECRET_NAME`], no stat described a
/// canary inode; and the root holds no leftover temporary. The hard-linked `shared` file is the
/// one allowed difference, because its in-root names are the same file: its link count may grow
/// by exactly the number of names it has inside the root at the end, and its mode may change
/// (a `set_mode` of one of those names changes the one inode; only appends refuse a linked file).
///
/// Input encoding, so seeds can be written by hand: a sequence of operations, each an opcode byte
/// (low 4 bits select the operation) followed by its argument bytes; a path byte indexes
/// [`PATHS`] (low 4 bits), a content byte [`CONTENTS`], a mode byte [`MODES`], a name byte
/// [`NAMES`]. Missing bytes read as 0. See [`LayerRun::step`] for each operation's arguments.
pub fn workspace(data: &[u8]) {
    let arena = LayerArena::new();
    let before = arena.canary_snapshot();
    let ws = workspace::Workspace::open(&arena.root).expect("open workspace");
    let mut run = LayerRun {
        guard: PathGuard::for_workspace(ws.clone()),
        ws,
        arena: &arena,
        canary_inodes: before
            .iter()
            .filter(|i| i.name != std::path::Path::new(SHARED_NAME))
            .map(|i| (i.dev, i.ino))
            .collect(),
    };
    let mutator = Mutator::start(&arena);
    let mut input = Input { data, pos: 0 };
    for _ in 0..MAX_OPS {
        if input.pos >= data.len() {
            break;
        }
        run.step(&mut input);
    }
    mutator.finish();
    arena.assert_canary_unchanged(&before);
    arena.assert_no_temporaries_in_root();
}

/// [`workspace`] with the per-component `O_NOFOLLOW` walk instead of `openat2`. The layer reads
/// `FILESYSTEM_NO_OPENAT2` once per process, so this must be the process's first use of the
/// layer (its own fuzz target, its own test binary); the assertion proves it was.
pub fn workspace_walk(data: &[u8]) {
    static WALK: std::sync::Once = std::sync::Once::new();
    WALK.call_once(|| {
        std::env::set_var(workspace::beneath::NO_OPENAT2_ENV, "1");
    });
    assert!(
        workspace::resolution_method().contains("walk"),
        "the layer decided on openat2 before FILESYSTEM_NO_OPENAT2 was set"
    );
    workspace(data);
}

/// Fuzz bytes read one at a time; past the end every byte is 0, so every input decodes.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn path(&mut self) -> &'static std::path::Path {
        std::path::Path::new(PATHS[usize::from(self.byte() & 15)])
    }
    fn name(&mut self) -> &'static std::ffi::OsStr {
        std::ffi::OsStr::new(NAMES[usize::from(self.byte() & 7)])
    }
    fn content(&mut self) -> &'static [u8] {
        CONTENTS[usize::from(self.byte() & 3)]
    }
    fn mode(&mut self) -> u32 {
        MODES[usize::from(self.byte() & 3)]
    }
}

/// A fresh temporary directory holding the root `ws/` and its sibling canary `outside/`.
struct LayerArena {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

/// One entry of the canary as it is on disk, compared field by field before and after.
#[derive(Debug, PartialEq, Eq)]
struct CanaryItem {
    name: PathBuf,
    kind: &'static str,
    mode: u32,
    nlink: u64,
    size: u64,
    mtime: (i64, i64),
    dev: u64,
    ino: u64,
    content: Vec<u8>,
}

impl LayerArena {
    fn new() -> LayerArena {
        // tmpfs when there is one: the layer syncs after every replacement, and a disk-backed
        // fsync per operation would make each input far slower than the ~50 ms it should take.
        let shm = std::path::Path::new("/dev/shm");
        let builder = tempfile::Builder::new().prefix("fuzz-layer-").to_owned();
        let tmp = if shm.is_dir() {
            builder.tempdir_in(shm)
        } else {
            builder.tempdir()
        }
        .expect("tmp");
        let base = tmp.path().canonicalize().expect("canonical");
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("d/e")).expect("mkdir");
        std::fs::write(root.join("a"), "1").expect("write");
        std::fs::write(root.join("f"), "two\n").expect("write");
        std::fs::write(root.join("d/f"), "1").expect("write");
        std::fs::write(root.join("d/e/f"), "two\n").expect("write");
        // The canary holds every name a path through a symlink to it could reach.
        std::fs::create_dir_all(outside.join("x")).expect("mkdir");
        for name in ["a", "e", "f", "x/a", SECRET_NAME] {
            std::fs::write(outside.join(name), SECRET).expect("write");
        }
        std::fs::write(outside.join(SHARED_NAME), SHARED).expect("write");
        symlink(&outside, root.join("s")).expect("link");
        LayerArena {
            _tmp: tmp,
            root,
            outside,
        }
    }

    /// Every entry of the canary (and the canary directory itself, named ``), sorted, without
    /// following any symlink.
    fn canary_snapshot(&self) -> Vec<CanaryItem> {
        use std::os::unix::fs::MetadataExt;
        let mut items = Vec::new();
        let mut todo = vec![PathBuf::new()];
        while let Some(rel) = todo.pop() {
            let path = self.outside.join(&rel);
            let meta = std::fs::symlink_metadata(&path).expect("canary stat");
            let (kind, content) = if meta.is_dir() {
                for e in std::fs::read_dir(&path).expect("canary list") {
                    todo.push(rel.join(e.expect("entry").file_name()));
                }
                ("dir", Vec::new())
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).expect("readlink");
                ("symlink", target.into_os_string().into_encoded_bytes())
            } else if meta.is_file() {
                ("file", std::fs::read(&path).expect("canary read"))
            } else {
                ("other", Vec::new())
            };
            items.push(CanaryItem {
                name: rel,
                kind,
                mode: meta.mode() & 0o7777,
                nlink: meta.nlink(),
                size: meta.size(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
                dev: meta.dev(),
                ino: meta.ino(),
                content,
            });
        }
        items.sort_by(|a, b| a.name.cmp(&b.name));
        items
    }

    /// Paths inside the root (symlinks not followed) that are the inode `ino`.
    fn names_in_root(&self, ino: u64) -> u64 {
        self.root_entries()
            .iter()
            .filter(|(_, meta)| {
                use std::os::unix::fs::MetadataExt;
                meta.is_file() && meta.ino() == ino
            })
            .count() as u64
    }

    /// Every entry below the root, without following symlinks.
    fn root_entries(&self) -> Vec<(PathBuf, std::fs::Metadata)> {
        let mut out = Vec::new();
        let mut todo = vec![self.root.clone()];
        while let Some(dir) = todo.pop() {
            for e in std::fs::read_dir(&dir).expect("list root") {
                let path = e.expect("entry").path();
                let meta = std::fs::symlink_metadata(&path).expect("stat");
                if meta.is_dir() {
                    todo.push(path.clone());
                }
                out.push((path, meta));
            }
        }
        out
    }

    fn assert_canary_unchanged(&self, before: &[CanaryItem]) {
        let mut after = self.canary_snapshot();
        for (old, new) in before.iter().zip(after.iter_mut()) {
            if old.name == std::path::Path::new(SHARED_NAME) && new.name == old.name {
                let inside = self.names_in_root(old.ino);
                assert_eq!(
                    new.nlink,
                    old.nlink + inside,
                    "the shared file has links that are neither outside nor inside the root"
                );
                new.nlink = old.nlink;
                new.mode = old.mode;
            }
        }
        assert_eq!(before, &after[..], "the canary outside the root changed");
    }

    fn assert_no_temporaries_in_root(&self) {
        use std::os::unix::ffi::OsStrExt;
        for (path, _) in self.root_entries() {
            let name = path.file_name().expect("name").as_bytes();
            assert!(
                !workspace::temp::is_temp_name(name),
                "a temporary was left behind: {}",
                path.display()
            );
        }
    }
}

/// The operations' side: the layer, a guard on the same root, and what no answer may show.
struct LayerRun<'a> {
    ws: workspace::Workspace,
    guard: PathGuard,
    arena: &'a LayerArena,
    /// Device and inode of every canary entry but the shared file.
    canary_inodes: std::collections::HashSet<(u64, u64)>,
}

impl LayerRun<'_> {
    fn screen_content(&self, what: &str, data: &[u8]) {
        assert!(
            !data.windows(SECRET.len()).any(|w| w == SECRET),
            "{what} returned the canary's secret content"
        );
    }

    fn screen_stat(&self, what: &str, stat: &workspace::Stat) {
        assert!(
            !self.canary_inodes.contains(&(stat.dev, stat.ino)),
            "{what} described a canary inode"
        );
    }

    fn screen_entries(&self, what: &str, entries: &[workspace::Entry]) {
        for e in entries {
            assert!(e.name != SECRET_NAME, "{what} listed the canary");
            self.screen_stat(what, &e.stat);
        }
    }

    fn screen_file(&self, what: &str, file: &mut std::fs::File) {
        use std::io::Read;
        if let Ok(stat) = workspace::Stat::of(file) {
            self.screen_stat(what, &stat);
        }
        let mut data = Vec::new();
        if file.read_to_end(&mut data).is_ok() {
            self.screen_content(what, &data);
        }
    }

    /// Decodes and runs one operation. Errors are fine (a swap may make any operation fail);
    /// what succeeded is screened.
    fn step(&mut self, input: &mut Input) {
        use std::io::Write;
        let op = input.byte();
        match op & 15 {
            0 => {
                let p = input.path();
                if let Ok(Some(st)) = self.ws.stat(p) {
                    self.screen_stat("stat", &st);
                }
            }
            1 => {
                let p = input.path();
                if let Ok(data) = self.ws.read(p) {
                    self.screen_content("read", &data);
                }
            }
            2 => {
                let p = input.path();
                if let Ok(mut file) = self.ws.open_read(p) {
                    self.screen_file("open_read", &mut file);
                }
            }
            3 => {
                let p = input.path();
                if let Ok(entries) = self.ws.entries(p) {
                    self.screen_entries("entries", &entries);
                }
            }
            4 => {
                let p = input.path();
                let _ = self.ws.create_dirs(p);
            }
            5 => {
                let (p, content, flags) = (input.path(), input.content(), input.byte());
                let mode = (flags & 2 != 0).then(|| MODES[usize::from(flags >> 2 & 3)]);
                let _ = self.ws.replace_file(p, content, mode, flags & 1 != 0);
            }
            6 => {
                let (p, q) = (input.path(), input.path());
                let _ = self.ws.rename_no_replace(p, q);
            }
            7 => {
                let (p, q) = (input.path(), input.path());
                let _ = self.ws.rename_replace(p, q);
            }
            8 => {
                let (p, q) = (input.path(), input.path());
                let _ = self.ws.hard_link(p, q);
            }
            9 => {
                let p = input.path();
                let _ = self.ws.remove_file(p);
            }
            10 => {
                let (p, content) = (input.path(), input.content());
                if let Ok(mut file) = self.ws.open_append(p) {
                    let _ = file.write_all(content);
                }
            }
            11 => {
                let (p, content) = (input.path(), input.content());
                if let Ok(mut file) = self.ws.open_for_update(p) {
                    self.screen_file("open_for_update", &mut file);
                    let _ = file.write_all(content);
                }
            }
            12 => {
                let (p, mode) = (input.path(), input.mode());
                let _ = self.ws.set_mode(p, mode);
            }
            13 => {
                // No exact expectation under a concurrent mutator; this checks it neither panics
                // nor runs away.
                let (p, budget) = (input.path(), input.byte());
                let _ = self.ws.tree_size(p, usize::from(budget));
            }
            14 => self.dir_step(input),
            _ => self.guard_step(op, input),
        }
    }

    /// An operation on an entry of a directory opened with `Workspace::dir`: the descriptor keeps
    /// naming the same (in-root) directory however the tree is rearranged meanwhile.
    fn dir_step(&mut self, input: &mut Input) {
        use std::io::Write;
        let (p, sub, name) = (input.path(), input.byte(), input.name());
        let Ok(dir) = self.ws.dir(p) else { return };
        match sub % 12 {
            0 => {
                if let Ok(Some(st)) = dir.stat(name) {
                    self.screen_stat("Dir::stat", &st);
                }
            }
            1 => {
                if let Ok(data) = dir.read(name) {
                    self.screen_content("Dir::read", &data);
                }
            }
            2 => {
                if let Ok(entries) = dir.subdir(name).and_then(|d| d.entries()) {
                    self.screen_entries("Dir::subdir entries", &entries);
                }
            }
            3 => {
                let _ = dir.mkdir(name);
            }
            4 => {
                let _ = dir.unlink(name);
            }
            5 => {
                let _ = dir.rmdir(name);
            }
            6 => {
                let content = input.content();
                let _ = dir.replace_file(name, content, None, false);
            }
            7 => {
                let content = input.content();
                if let Ok(mut file) = dir.open_append(name) {
                    let _ = file.write_all(content);
                }
            }
            8 => {
                let to = input.name();
                let _ = dir.rename_no_replace(name, &dir, to);
            }
            9 => {
                let to = input.name();
                let _ = dir.hard_link(name, &dir, to);
            }
            10 => {
                let _ = dir.read_link(name);
            }
            _ => {
                if let Ok(entries) = dir.entries() {
                    self.screen_entries("Dir::entries", &entries);
                }
            }
        }
    }

    /// A client string through the guard, then the layer on its `.relative`: the guard's check
    /// and the layer's act are exactly the two steps a swap can come between. The opcode's high
    /// bits pick the string's source and what is done with it.
    fn guard_step(&mut self, op: u8, input: &mut Input) {
        let text = if op & 16 != 0 {
            PATHS[usize::from(input.byte() & 15)].to_string()
        } else {
            let len = usize::from(input.byte() % 12);
            let bytes: Vec<u8> = (0..len).map(|_| input.byte()).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        let change = op & 32 != 0;
        let resolved = if change {
            self.guard.resolve_for_change(&text)
        } else {
            self.guard.resolve(&text)
        };
        let Ok(resolved) = resolved else { return };
        assert!(
            resolved.path.starts_with(&self.arena.root),
            "{text:?} -> {:?}",
            resolved.path
        );
        let rel = resolved.relative.as_path();
        match (change, op >> 6) {
            (false, 0 | 1) => {
                if let Ok(data) = self.ws.read(rel) {
                    self.screen_content("guard + read", &data);
                }
            }
            (false, _) => {
                if let Ok(entries) = self.ws.entries(rel) {
                    self.screen_entries("guard + entries", &entries);
                }
            }
            (true, 0) => {
                let content = input.content();
                let _ = self.ws.replace_file(rel, content, None, false);
            }
            (true, 1) => {
                let _ = self.ws.create_dirs(rel);
            }
            (true, 2) => {
                let _ = self.ws.remove_file(rel);
            }
            (true, _) => {
                let to = input.path();
                let _ = self.ws.rename_no_replace(rel, to);
            }
        }
    }
}

/// The second thread: rearranges the root as fast as it can until told to stop, only ever by
/// descriptors of real in-root directories (the root and the original `d`), so the mutator itself
/// never touches the canary except as the source of a hard link.
struct Mutator {
    stop: Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Mutator {
    fn start(arena: &LayerArena) -> Mutator {
        use rustix::fs::{Mode, OFlags};
        let open = |p: &std::path::Path| {
            rustix::fs::open(
                p,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .expect("open dir")
        };
        let root = open(&arena.root);
        let d = open(&arena.root.join("d"));
        let outside_fd = open(&arena.outside);
        let outside = arena.outside.clone();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Both sides start together, so even a short input runs against a moving tree.
        let ready = Arc::new(std::sync::Barrier::new(2));
        let handle = {
            let (stop, ready) = (stop.clone(), ready.clone());
            std::thread::spawn(move || {
                ready.wait();
                let mut step = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    mutate(step, &root, &d, &outside_fd, &outside);
                    step = step.wrapping_add(1);
                }
            })
        };
        ready.wait();
        Mutator {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops the thread and waits for it: after this nothing changes the tree but the check.
    fn finish(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.join().expect("mutator panicked");
        }
    }
}

impl Drop for Mutator {
    /// A failing check must not leave the thread running into the next input.
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// One change of the mutator's cycle. Every change may fail (the operations rearrange the tree
/// too); failures are ignored.
fn mutate(
    step: u32,
    root: &std::os::fd::OwnedFd,
    d: &std::os::fd::OwnedFd,
    outside_fd: &std::os::fd::OwnedFd,
    outside: &std::path::Path,
) {
    use rustix::fs::{renameat, renameat_with, statat, symlinkat, unlinkat, AtFlags, RenameFlags};
    match step % 8 {
        // A directory swapped for the symlink to the canary, and back, in one atomic step each.
        0 | 4 => {
            let _ = renameat_with(root, "d", root, "s", RenameFlags::EXCHANGE);
        }
        // `d/e` replaced by a symlink to the canary (not atomically: parked, link made) ...
        1 => {
            if renameat(d, "e", d, ".park").is_ok() {
                let _ = symlinkat(outside, d, "e");
            }
        }
        // ... and put back.
        5 => {
            if statat(d, "e", AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_symlink())
            {
                let _ = unlinkat(d, "e", AtFlags::empty());
            }
            let _ = renameat_with(d, ".park", d, "e", RenameFlags::NOREPLACE);
        }
        // Hard links to an outside file planted where appends and updates may land.
        2 => {
            let _ = rustix::fs::linkat(outside_fd, SHARED_NAME, root, "h", AtFlags::empty());
            let _ = rustix::fs::linkat(outside_fd, SHARED_NAME, d, "h", AtFlags::empty());
        }
        3 => {
            if rustix::fs::linkat(outside_fd, SHARED_NAME, root, ".hl", AtFlags::empty()).is_ok()
                && renameat(root, ".hl", root, "f").is_err()
            {
                let _ = unlinkat(root, ".hl", AtFlags::empty());
            }
        }
        // ... and removed again, so a link count seen once may be different a moment later.
        6 => {
            let _ = unlinkat(root, "h", AtFlags::empty());
            let _ = unlinkat(d, "h", AtFlags::empty());
        }
        _ => {
            let _ = unlinkat(root, "f", AtFlags::empty());
        }
    }
}
