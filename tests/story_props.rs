#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Property: for every path ever seen, `search_file` says where the last thing that left it is
//! now, exactly as a simple model of things tells it: moves of files and of directories that
//! carry their contents, deletes (a directory with everything in it) and restores, at the
//! original path or elsewhere. Random short sequences run through the real binary, one server
//! per case.
//!
//! The logs record what moved where, not what kind of thing it was nor what was in a directory
//! before the first logged event; the story takes a path beneath a moved directory to have been
//! there unless the logs show it had left. The world of the model is chosen so that assumption
//! is true: directories live at the root under the names `d`, `e`, `f`, files are named `x`
//! or `y` (at the root or in a directory), and every such path under `d` and `e` exists at the
//! start (`f` appears only by a move or a restore). Destinations always have an existing
//! parent: a move or restore that must create parent directories creates them unlogged.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::{json, Value};

use test_support::mcp::Session;
use test_support::temp::canonical_temp_dir;

/// Where a thing of the model is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    At(String),
    /// In the trash entry with this id.
    Trash(u64),
}

/// Things (files and directories) by identity, where they are, and what last left each path.
#[derive(Debug, Default)]
struct Model {
    /// Path → thing, for everything in the workspace (directories included).
    at: BTreeMap<String, usize>,
    /// Directories among the things.
    dirs: BTreeSet<usize>,
    /// Trash id → (original path, the things in it by path below that path, "" for itself).
    trash: BTreeMap<u64, (String, Vec<(String, usize)>)>,
    /// Path → the last thing that left it.
    left: BTreeMap<String, usize>,
    /// Every path anything was ever at.
    seen: BTreeSet<String>,
    next: usize,
}

/// `path` below `top` ("" for `top` itself), if it is `top` or inside it.
fn below<'a>(path: &'a str, top: &str) -> Option<&'a str> {
    if path == top {
        Some("")
    } else {
        path.strip_prefix(top)?.strip_prefix('/')
    }
}

fn join(top: &str, rest: &str) -> String {
    match (top.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_string(),
        (_, true) => top.to_string(),
        _ => format!("{top}/{rest}"),
    }
}

fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

impl Model {
    fn add(&mut self, path: &str, dir: bool) {
        let id = self.next;
        self.next += 1;
        if dir {
            self.dirs.insert(id);
        }
        self.at.insert(path.to_string(), id);
        self.seen.insert(path.to_string());
    }

    /// Takes `top` and everything inside it out of the workspace, as (path below, thing).
    fn take(&mut self, top: &str) -> Vec<(String, usize)> {
        let inside: Vec<String> = self
            .at
            .keys()
            .filter(|p| below(p, top).is_some())
            .cloned()
            .collect();
        inside
            .into_iter()
            .map(|p| {
                let thing = self.at.remove(&p).unwrap_or_default();
                self.left.insert(p.clone(), thing);
                (below(&p, top).unwrap_or_default().to_string(), thing)
            })
            .collect()
    }

    fn put(&mut self, top: &str, things: Vec<(String, usize)>) {
        for (rest, thing) in things {
            let p = join(top, &rest);
            self.seen.insert(p.clone());
            self.at.insert(p, thing);
        }
    }

    /// Whether `path` can receive something: free, and its parent an existing directory.
    fn free(&self, path: &str) -> bool {
        let p = parent(path);
        !self.at.contains_key(path)
            && (p.is_empty() || self.at.get(p).is_some_and(|t| self.dirs.contains(t)))
    }

    /// Where the thing `t` is now.
    fn place(&self, t: usize) -> Place {
        if let Some((p, _)) = self.at.iter().find(|(_, &x)| x == t) {
            return Place::At(p.clone());
        }
        for (id, (_, things)) in &self.trash {
            if things.iter().any(|(_, x)| *x == t) {
                return Place::Trash(*id);
            }
        }
        panic!("thing {t} is nowhere")
    }
}

/// One step, as raw choices the model turns into a valid operation (or skips).
#[derive(Debug, Clone)]
enum Op {
    Move {
        what: usize,
        into: usize,
        name: usize,
    },
    Delete {
        what: usize,
    },
    Restore {
        which: usize,
        elsewhere: Option<(usize, usize)>,
    },
}

/// File names, and names of directories (which live at the root).
const FILES: [&str; 2] = ["x", "y"];
const DIRS: [&str; 3] = ["d", "e", "f"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..16usize, 0..8usize, 0..6usize)
            .prop_map(|(what, into, name)| Op::Move { what, into, name }),
        1 => (0..16usize).prop_map(|what| Op::Delete { what }),
        2 => (0..4usize, prop::option::of((0..8usize, 0..6usize)))
            .prop_map(|(which, elsewhere)| Op::Restore { which, elsewhere }),
    ]
}

/// A destination for a thing of kind `dir`: a directory at the root, a file in the root or in
/// an existing directory.
fn destination(m: &Model, dir: bool, into: usize, name: usize) -> String {
    if dir {
        return DIRS[name % DIRS.len()].to_string();
    }
    let ds = dirs(m);
    join(&ds[into % ds.len()], FILES[name % FILES.len()])
}

/// The existing directories, the root ("") first.
fn dirs(m: &Model) -> Vec<String> {
    std::iter::once(String::new())
        .chain(
            m.at.iter()
                .filter(|(_, t)| m.dirs.contains(t))
                .map(|(p, _)| p.clone()),
        )
        .collect()
}

struct Run {
    server: Session,
    id: i64,
}

impl Run {
    fn call(&mut self, tool: &str, args: Value) -> Value {
        self.id += 1;
        self.server.call(self.id, tool, args)
    }

    fn ok(&mut self, tool: &str, args: Value) -> String {
        let r = self.call(tool, args.clone());
        let text = test_support::mcp::text(&r);
        assert_ne!(r["isError"], json!(true), "{tool} {args}: {text}");
        text
    }
}

fn check(ops: &[Op]) -> Result<(), TestCaseError> {
    let (_tmp, root) = canonical_temp_dir();
    let mut m = Model::default();
    for d in ["d", "e"] {
        std::fs::create_dir(root.join(d)).expect("mkdir");
        m.add(d, true);
    }
    for f in ["d/x", "d/y", "e/x", "e/y", "x", "y"] {
        std::fs::write(root.join(f), f).expect("write");
        m.add(f, false);
    }
    let mut run = Run {
        server: Session::start_in(&root, &[]),
        id: 1,
    };
    run.server.initialize("2025-06-18");
    let mut log = Vec::new();
    for op in ops {
        match op {
            Op::Move { what, into, name } => {
                let paths: Vec<String> = m.at.keys().cloned().collect();
                let Some(src) = paths.get(what % paths.len().max(1)).cloned() else {
                    continue;
                };
                let dir = m.dirs.contains(&m.at[&src]);
                let dst = destination(&m, dir, *into, *name);
                if !m.free(&dst) || below(&dst, &src).is_some() {
                    continue;
                }
                run.ok("move_file", json!({"source": src, "destination": dst}));
                let things = m.take(&src);
                m.put(&dst, things);
                log.push(format!("move {src} {dst}"));
            }
            Op::Delete { what } => {
                let paths: Vec<String> = m.at.keys().cloned().collect();
                let Some(src) = paths.get(what % paths.len().max(1)).cloned() else {
                    continue;
                };
                let text = run.ok("delete_file", json!({"path": src}));
                let id: u64 = text
                    .split("as id ")
                    .nth(1)
                    .and_then(|s| s.split(';').next())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("no trash id in {text}"));
                let things = m.take(&src);
                m.trash.insert(id, (src.clone(), things));
                log.push(format!("delete {src} = {id}"));
            }
            Op::Restore { which, elsewhere } => {
                let ids: Vec<u64> = m.trash.keys().copied().collect();
                let Some(&id) = ids.get(which % ids.len().max(1)) else {
                    continue;
                };
                let dst = match elsewhere {
                    None => m.trash[&id].0.clone(),
                    Some((into, name)) => {
                        let (_, things) = &m.trash[&id];
                        let dir = things
                            .iter()
                            .any(|(rest, t)| rest.is_empty() && m.dirs.contains(t));
                        destination(&m, dir, *into, *name)
                    }
                };
                if !m.free(&dst) {
                    continue;
                }
                let mut args = json!({"id": id});
                if elsewhere.is_some() {
                    args["destination"] = json!(dst);
                }
                run.ok("restore_file", args);
                let (_, things) = m.trash.remove(&id).unwrap_or_default();
                m.put(&dst, things);
                log.push(format!("restore {id} {dst}"));
            }
        }
    }
    for p in m.seen.clone() {
        let r = run.call("search_file", json!({"path": p}));
        let s = &r["structuredContent"];
        let text = test_support::mcp::text(&r);
        let ctx = format!("{p} after {log:?}: {text}");
        prop_assert_eq!(&s["existsNow"], &json!(m.at.contains_key(&p)), "{}", ctx);
        match m.left.get(&p) {
            None => {
                prop_assert_eq!(&s["status"], &json!("exists"), "{}", ctx);
            }
            Some(&t) => match m.place(t) {
                Place::At(q) => {
                    prop_assert_eq!(&s["status"], &json!("moved"), "{}", ctx);
                    prop_assert_eq!(&s["currentPath"], &json!(q), "{}", ctx);
                    let elsewhere = m.at.contains_key(&p) && q != p;
                    prop_assert_eq!(text.contains("Something else is at"), elsewhere, "{}", ctx);
                }
                Place::Trash(id) => {
                    prop_assert_eq!(&s["status"], &json!("in_trash"), "{}", ctx);
                    prop_assert_eq!(&s["trashId"], &json!(id), "{}", ctx);
                }
            },
        }
    }
    drop(run.server.stdin.take());
    let _ = run.server.child.wait();
    Ok(())
}

#[test]
fn search_file_follows_every_path_as_the_model_does() {
    // A server per case: a few dozen cases keep this to seconds.
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    });
    let outcome = runner.run(&prop::collection::vec(op(), 1..12), |ops| check(&ops));
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
