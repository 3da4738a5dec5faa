#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Property: whatever path a client sends, the guard never yields a location outside the root,
//! with symlinks of every kind planted in the tree.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use workspace::guard::{FinalLink, PathGuard};

use test_support::temp::canonical_temp_dir;

/// A workspace with links that point inside, outside, at each other, at nothing, and upward.
fn planted_tree() -> (tempfile::TempDir, PathBuf, PathGuard) {
    let (tmp, base) = canonical_temp_dir();
    let root = base.join("ws");
    std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
    std::fs::create_dir_all(base.join("ws-evil")).expect("mkdir");
    std::fs::create_dir_all(base.join("outside/deep")).expect("mkdir");
    std::fs::write(base.join("outside/secret"), "s").expect("write");
    std::fs::write(root.join("a/file"), "f").expect("write");
    symlink(base.join("outside"), root.join("out")).expect("link");
    symlink("../../..", root.join("a/b/up")).expect("link");
    symlink("b", root.join("a/in")).expect("link");
    symlink("/", root.join("slash")).expect("link");
    symlink("loop2", root.join("loop1")).expect("link");
    symlink("loop1", root.join("loop2")).expect("link");
    symlink("nothing/here", root.join("dangling")).expect("link");
    symlink("../ws-evil", root.join("evil")).expect("link");
    symlink(root.join("a"), root.join("abs-in")).expect("link");
    std::fs::create_dir_all(root.join(".filesystem")).expect("mkdir");
    symlink(".filesystem", root.join("state")).expect("link");
    let guard = PathGuard::new(&root).expect("guard");
    (tmp, root, guard)
}

/// Resolves every symlink of the deepest existing ancestor, the way the kernel would.
fn really_points_to(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut tail = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                tail.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut real = existing.canonicalize().unwrap_or(existing);
    for name in tail.into_iter().rev() {
        real.push(name);
    }
    real
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just("a".to_string()),
        Just("b".to_string()),
        Just("file".to_string()),
        Just("out".to_string()),
        Just("up".to_string()),
        Just("in".to_string()),
        Just("slash".to_string()),
        Just("loop1".to_string()),
        Just("dangling".to_string()),
        Just("evil".to_string()),
        Just("abs-in".to_string()),
        Just("state".to_string()),
        Just(".filesystem".to_string()),
        Just("secret".to_string()),
        Just("deep".to_string()),
        Just("ws-evil".to_string()),
        Just("...".to_string()),
        Just("%2e%2e".to_string()),
        "[a-z.]{1,4}",
    ]
}

fn client_path() -> impl Strategy<Value = String> {
    (
        prop::bool::ANY,
        prop::collection::vec(component(), 0..12),
        prop::bool::ANY,
    )
        .prop_map(|(absolute, parts, trailing)| {
            let mut p = parts.join("/");
            if trailing {
                p.push('/');
            }
            if absolute {
                format!("@ROOT@/{p}")
            } else {
                p
            }
        })
}

#[test]
fn resolved_paths_never_leave_the_root() {
    // One tree for every case: the guard only reads it.
    let (_tmp, root, guard) = planted_tree();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 4000,
        ..ProptestConfig::default()
    });
    let strategy = (client_path(), prop::bool::ANY);
    let outcome = runner.run(&strategy, |(raw, follow)| {
        let input = raw.replace("@ROOT@", &root.to_string_lossy());
        let mode = if follow {
            FinalLink::Follow
        } else {
            FinalLink::NoFollow
        };
        if let Ok(resolved) = guard.resolve_with(&input, mode) {
            prop_assert!(
                resolved.path.starts_with(&root),
                "{input} -> {:?}",
                resolved.path
            );
            prop_assert_eq!(root.join(&resolved.relative), resolved.path.clone());
            let state = resolved
                .relative
                .components()
                .next()
                .is_some_and(|c| c.as_os_str() == ".filesystem" || c.as_os_str() == ".shelpa");
            prop_assert!(!state, "{} reached the state dir", input);
            // What the kernel would reach must be inside too; the final component is only
            // followed in Follow mode.
            let reached = match mode {
                FinalLink::Follow => really_points_to(&resolved.path),
                FinalLink::NoFollow => match (resolved.path.parent(), resolved.path.file_name()) {
                    (Some(parent), Some(name)) => really_points_to(parent).join(name),
                    _ => really_points_to(&resolved.path),
                },
            };
            prop_assert!(reached.starts_with(&root), "{input} reaches {reached:?}");
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
