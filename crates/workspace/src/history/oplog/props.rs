//! Property tests of the operation log against a model of the tree: random runs of writes,
//! directory creations, moves, deletes and restores through the store, each its own lock (its
//! own entry). After every step the disk must be what the model says, and the entry must name
//! each path the step changed with the model's states before and after it; reverting the whole
//! run must give back the first tree, and reverting that revert the last one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::file::NewestFirst;
use super::journal::sha256_hex;
use super::record::State;
use super::revert::{select, Selection};
use crate::history::{LockWait, Store};
use crate::Workspace;

/// What the model holds at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File(Vec<u8>),
    Dir,
}

type Model = BTreeMap<PathBuf, Node>;

/// What the model keeps of a trash entry: its id, the nodes it took, where it was.
type Trashed = (u64, Vec<(PathBuf, Node)>, PathBuf);

#[derive(Debug, Clone)]
enum Step {
    Write(usize, u8),
    Mkdir(usize),
    Move(usize, usize),
    Trash(usize),
    Restore,
}

const PATHS: [&str; 6] = ["a", "b", "d/c", "d/e/f", "g", "d/e"];

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..PATHS.len(), 0u8..4).prop_map(|(p, c)| Step::Write(p, c)),
        1 => (0..PATHS.len()).prop_map(Step::Mkdir),
        2 => (0..PATHS.len(), 0..PATHS.len()).prop_map(|(a, b)| Step::Move(a, b)),
        2 => (0..PATHS.len()).prop_map(Step::Trash),
        1 => Just(Step::Restore),
    ]
}

/// The tree on disk, outside the store.
#[allow(clippy::disallowed_methods)] // The test reads its own temporary tree by name.
fn disk(root: &Path) -> Model {
    let mut out = Model::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let e = e.expect("entry");
            let rel = e.path().strip_prefix(root).expect("under").to_path_buf();
            if rel == Path::new(".filesystem") {
                continue;
            }
            if e.file_type().expect("type").is_dir() {
                stack.push(e.path());
                out.insert(rel, Node::Dir);
            } else {
                out.insert(rel, Node::File(std::fs::read(e.path()).expect("read")));
            }
        }
    }
    out
}

/// Adds the missing parents of `p` to the model.
fn parents(m: &mut Model, p: &Path) {
    let mut a = p.parent();
    while let Some(dir) = a.filter(|d| !d.as_os_str().is_empty()) {
        m.insert(dir.to_path_buf(), Node::Dir);
        a = dir.parent();
    }
}

/// The model's entries at or below `p`, taken out of it.
fn take_subtree(m: &mut Model, p: &Path) -> Vec<(PathBuf, Node)> {
    let keys: Vec<PathBuf> = m.keys().filter(|k| k.starts_with(p)).cloned().collect();
    keys.into_iter()
        .map(|k| {
            let n = m.remove(&k).expect("present");
            (k, n)
        })
        .collect()
}

/// True when the model says `state` is what is at `p`.
fn agrees(m: &Model, p: &Path, state: &State) -> bool {
    match (m.get(p), state) {
        (None, s) => s.is_absent(),
        (Some(Node::Dir), State::Dir { .. }) => true,
        (Some(Node::File(c)), State::File { sha256, .. }) => &sha256_hex(c) == sha256,
        _ => false,
    }
}

fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let store = Store::new(Workspace::open(&root).expect("ws"), true);
    let mut model = Model::new();
    let mut trash: Vec<Trashed> = Vec::new();
    let first = model.clone();
    let mut last_id = 0;
    for s in steps {
        let before = model.clone();
        let lock = store.lock().expect("lock");
        let p = |i: usize| PathBuf::from(PATHS[i]);
        let done = match &s {
            Step::Write(i, c) => {
                let content = vec![b'a' + c; usize::from(*c) + 1];
                match store.write(&lock, &p(*i), &content, false) {
                    Ok(_) => {
                        parents(&mut model, &p(*i));
                        model.insert(p(*i), Node::File(content));
                        true
                    }
                    Err(_) => false,
                }
            }
            Step::Mkdir(i) => match store.create_dirs(&lock, &p(*i)) {
                Ok(_) => {
                    parents(&mut model, &p(*i));
                    model.insert(p(*i), Node::Dir);
                    true
                }
                Err(_) => false,
            },
            Step::Move(a, b) => match store.rename(&lock, &p(*a), &p(*b)) {
                Ok(_) => {
                    let moved = take_subtree(&mut model, &p(*a));
                    parents(&mut model, &p(*b));
                    for (k, n) in moved {
                        let rest = k.strip_prefix(p(*a)).expect("under").to_path_buf();
                        let to = if rest.as_os_str().is_empty() {
                            p(*b)
                        } else {
                            p(*b).join(rest)
                        };
                        model.insert(to, n);
                    }
                    true
                }
                Err(_) => false,
            },
            Step::Trash(i) => match store.trash(&lock, &p(*i)) {
                Ok(entry) => {
                    trash.push((entry.id, take_subtree(&mut model, &p(*i)), p(*i)));
                    true
                }
                Err(_) => false,
            },
            Step::Restore => match trash.last() {
                Some((id, _, _)) => match store.restore(&lock, *id, None) {
                    Ok(_) => {
                        let (_, nodes, at) = trash.pop().expect("last");
                        parents(&mut model, &at);
                        model.extend(nodes);
                        true
                    }
                    Err(_) => false,
                },
                None => false,
            },
        };
        drop(lock);
        prop_assert_eq!(&disk(&root), &model, "after {:?}", s);
        let mut log = NewestFirst::new(store.workspace(), Path::new(".filesystem"));
        let newest = log.next_entry().expect("read");
        let changed = before != model;
        match newest {
            Some(op) if op.id > last_id => {
                prop_assert!(done, "{:?} failed but left entry {:?}", s, op);
                last_id = op.id;
                for c in &op.changes {
                    let at = c.rel();
                    // A path changed twice in one step (a directory made on the way) shows
                    // its first state before and its last after.
                    let firsts = op.changes.iter().position(|d| d.rel() == at);
                    let lasts = op.changes.iter().rposition(|d| d.rel() == at);
                    if firsts == op.changes.iter().position(|d| std::ptr::eq(d, c)) {
                        prop_assert!(
                            agrees(&before, &at, &c.before),
                            "{:?}: before of {:?} is {:?}",
                            s,
                            at,
                            c.before
                        );
                    }
                    if lasts == op.changes.iter().position(|d| std::ptr::eq(d, c)) {
                        prop_assert!(
                            agrees(&model, &at, &c.after),
                            "{:?}: after of {:?} is {:?}",
                            s,
                            at,
                            c.after
                        );
                    }
                }
            }
            _ => prop_assert!(!changed, "{:?} changed the tree but left no entry", s),
        }
    }
    let last = model.clone();
    if last_id == 0 {
        return Ok(());
    }
    let ids: Vec<u64> = (1..=last_id).collect();
    let ops = select(&store, &Selection::Ids(ids)).expect("select");
    let lock = store.lock().expect("lock");
    lock.make_durable(ops.iter().map(|o| o.id).collect())
        .expect("durable");
    let out = store.revert(&lock, &ops, false, false).expect("revert");
    drop(lock);
    prop_assert!(out.refused.is_empty() && out.cannot.is_empty(), "{:?}", out);
    prop_assert_eq!(&disk(&root), &first, "revert of all: {:?}", out);
    let Some(entry) = out.entry else {
        return Ok(());
    };
    let ops = select(&store, &Selection::Ids(vec![entry])).expect("select");
    let lock = store.lock_within(&LockWait::patient()).expect("lock");
    let back = store.revert(&lock, &ops, false, false).expect("revert");
    drop(lock);
    prop_assert!(
        back.refused.is_empty() && back.cannot.is_empty(),
        "{:?}",
        back
    );
    prop_assert_eq!(&disk(&root), &last, "revert of the revert: {:?}", back);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn entries_follow_the_model_and_reverts_go_back_and_forth(steps in prop::collection::vec(step(), 1..24)) {
        run(steps)?;
    }
}
