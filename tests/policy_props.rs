#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Property: the argument policy never admits a refused option, in any spelling generated from its
//! own tables (abbreviations, clusters, attached values, after operands, gawk `-W`), wherever the
//! stage sits in a pipeline and whatever safe stages surround it.

use proptest::prelude::*;
use shelpa::parse::parse;
use shelpa::plan::{GuardReason, Plan};
use shelpa::policy::{check, dangerous_spellings, PolicyContext, ToolPaths};
use workspace::guard::PathGuard;

use test_support::temp::canonical_temp_dir;

/// Stages that are allowed on their own, used to surround the one under test.
const SAFE_STAGES: [&str; 6] = [
    "head -n 3 f.txt",
    "sort -u",
    "wc -l",
    "tr a-z A-Z",
    "rg -n x",
    "awk '{print $1}'",
];

#[test]
fn no_generated_spelling_of_a_refused_option_is_ever_admitted() {
    let (_tmp, root) = canonical_temp_dir();
    std::fs::write(root.join("f.txt"), "x y\n").expect("write");
    std::fs::write(root.join("x"), "x\n").expect("write");
    std::fs::write(root.join("y"), "y\n").expect("write");
    let guard = PathGuard::new(&root).expect("guard");
    let tools = ToolPaths::discover();
    let cx = PolicyContext {
        guard: &guard,
        cwd: &root,
        tools: &tools,
    };
    let spellings = dangerous_spellings();
    assert!(
        spellings.len() > 500,
        "the tables generate {} spellings",
        spellings.len()
    );

    let strategy = (
        0..spellings.len(),
        prop::collection::vec(0..SAFE_STAGES.len(), 0..3),
        prop::collection::vec(0..SAFE_STAGES.len(), 0..3),
        prop::bool::ANY,
    );
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 3000,
        ..ProptestConfig::default()
    });
    let outcome = runner.run(&strategy, |(pick, before, after, quote)| {
        let d = &spellings[pick];
        // Quoting a plain word changes nothing for the tool, so it must change nothing here.
        let words: Vec<String> = d
            .args
            .iter()
            .map(|a| if quote { format!("'{a}'") } else { a.clone() })
            .collect();
        let stage = format!("{} {}", d.command.as_str(), words.join(" "));
        let mut stages: Vec<&str> = before.iter().map(|&i| SAFE_STAGES[i]).collect();
        stages.push(&stage);
        stages.extend(after.iter().map(|&i| SAFE_STAGES[i]));
        let command = stages.join(" | ");
        let verdict = parse(&command).and_then(|s| check(&s, &cx));
        match verdict {
            // Alone, `ls -l` (`-al`, `-1l`) is the built-in listing, which never shows where an
            // outside link points; anywhere in a pipeline the same words must be refused.
            Ok(Plan::BuiltinLs { .. }) if stages.len() == 1 => {}
            Ok(plan) => prop_assert!(false, "{command:?} was admitted as {plan:?}"),
            Err(refusal) => prop_assert!(
                matches!(
                    refusal.reason,
                    GuardReason::DisallowedOption | GuardReason::MissingTool
                ),
                "{command:?} refused for {:?} instead of the option",
                refusal.reason
            ),
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
