//! The order of the trials and their seeds: a pure function of the study, so the same study
//! file always gives the same `plan.json`, and `--resume` can trust the ids it finds.

use crate::record::PlannedTrial;
use crate::spec::Study;

/// One step of splitmix64: a small, well-mixed generator, enough to shuffle a plan and derive
/// seeds (nothing here needs cryptographic strength, only reproducibility).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A value mixing every input, so neighbouring inputs give unrelated outputs.
fn mix(parts: &[u64]) -> u64 {
    let mut state = 0u64;
    let mut out = 0u64;
    for &p in parts {
        state ^= p;
        out = splitmix64(&mut state);
        state = out;
    }
    out
}

/// A uniform index below `n` (n ≥ 1) by rejection, so no index is favoured.
fn below(state: &mut u64, n: u64) -> u64 {
    let zone = u64::MAX - u64::MAX % n;
    loop {
        let x = splitmix64(state);
        if x < zone {
            return x % n;
        }
    }
}

/// The seed of repetition `rep` of task `task` under arm `arm` (indices in file order).
pub fn trial_seed(study_seed: u64, task: usize, arm: usize, harness: usize, rep: u32) -> u64 {
    // The first harness's seeds are those of a study without harnesses, so a study that names
    // its single agent keeps its seeds.
    if harness == 0 {
        mix(&[study_seed, 1, task as u64, arm as u64, u64::from(rep)])
    } else {
        mix(&[
            study_seed,
            1,
            task as u64,
            arm as u64,
            u64::from(rep),
            harness as u64,
        ])
    }
}

/// Every trial of the study in the order it runs: repetition by repetition, and within each
/// repetition all (task, arm) pairs shuffled by a generator seeded from (seed, rep). Drift in
/// the agent or the machine over a run so spreads over every arm instead of falling on the
/// arms that happen to run last.
pub fn plan(study: &Study) -> Vec<PlannedTrial> {
    let harnesses = study.harnesses.len();
    let arms = study.arms.len();
    // Harnesses are interleaved like arms: each repetition shuffles every task × arm × harness
    // cell. With one harness the list, and so the shuffle, is the one a study without harnesses
    // had.
    let pairs: Vec<(usize, usize, usize)> = (0..study.tasks.len())
        .flat_map(|t| (0..arms).flat_map(move |a| (0..harnesses).map(move |h| (t, a, h))))
        .collect();
    let mut out = Vec::with_capacity(study.total_trials());
    for rep in 0..study.trials {
        let mut order = pairs.clone();
        let mut state = mix(&[study.seed, 0, u64::from(rep)]);
        // Fisher–Yates, from the end.
        for i in (1..order.len()).rev() {
            let j = below(&mut state, i as u64 + 1) as usize;
            order.swap(i, j);
        }
        for (t, a, h) in order {
            let task = &study.tasks[t].name;
            let arm = &study.arms[a].name;
            let harness = &study.harnesses[h].name;
            out.push(PlannedTrial {
                id: PlannedTrial::id_for(rep, task, arm, harness),
                task: task.clone(),
                arm: arm.clone(),
                harness: harness.clone(),
                rep,
                seed: trial_seed(study.seed, t, a, h, rep),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Agent, Arm, Harness, Task, Template};
    use std::path::PathBuf;

    fn study(seed: u64, tasks: usize, arms: usize, trials: u32) -> Study {
        Study {
            file: PathBuf::from("/s/study.toml"),
            dir: PathBuf::from("/s"),
            source: Vec::new(),
            name: "t".into(),
            seed,
            trials,
            baseline: "a0".into(),
            harnesses: vec![Harness {
                name: String::new(),
                agent: Agent {
                    command: vec![Template::parse("x").unwrap()],
                    stdin: None,
                    stdout: None,
                    env: Vec::new(),
                    relay: None,
                },
            }],
            tasks: (0..tasks)
                .map(|i| Task {
                    name: format!("t{i}"),
                    dir: PathBuf::from("/s"),
                    fixture: PathBuf::from("/s/w"),
                    prompt: PathBuf::from("/s/p"),
                    prompt_text: Vec::new(),
                    verify: vec![Template::parse("true").unwrap()],
                    time_limit: 1,
                })
                .collect(),
            arms: (0..arms)
                .map(|i| Arm {
                    name: format!("a{i}"),
                    server_args: None,
                    server_name: "filesystem".into(),
                })
                .collect(),
        }
    }

    #[test]
    fn every_trial_once_repetitions_in_order() {
        let p = plan(&study(1, 3, 4, 5));
        assert_eq!(p.len(), 60);
        let ids: std::collections::HashSet<_> = p.iter().map(|t| &t.id).collect();
        assert_eq!(ids.len(), 60);
        for (i, t) in p.iter().enumerate() {
            assert_eq!(t.rep as usize, i / 12, "rep {} at {i}", t.rep);
        }
    }

    #[test]
    fn same_seed_same_plan_other_seed_other_order() {
        let a = plan(&study(42, 3, 4, 3));
        assert_eq!(a, plan(&study(42, 3, 4, 3)));
        let b = plan(&study(43, 3, 4, 3));
        assert_ne!(
            a.iter().map(|t| &t.id).collect::<Vec<_>>(),
            b.iter().map(|t| &t.id).collect::<Vec<_>>()
        );
        // The order within a repetition is shuffled, not the file order, and differs between
        // repetitions (12! orders: a repeat would be a bug, not chance).
        let file_order: Vec<_> = (0..3)
            .flat_map(|t| (0..4).map(move |a| format!("t{t}-a{a}")))
            .collect();
        let rep = |r: usize| -> Vec<String> {
            a[r * 12..(r + 1) * 12]
                .iter()
                .map(|t| format!("{}-{}", t.task, t.arm))
                .collect()
        };
        assert_ne!(rep(0), file_order);
        assert_ne!(rep(0), rep(1));
    }

    #[test]
    fn seeds_differ_per_trial_and_do_not_depend_on_order() {
        let p = plan(&study(5, 2, 2, 2));
        let seeds: std::collections::HashSet<_> = p.iter().map(|t| t.seed).collect();
        assert_eq!(seeds.len(), p.len());
        let t = p.iter().find(|t| t.id == "001-t1-a0").unwrap();
        assert_eq!(t.seed, trial_seed(5, 1, 0, 0, 1));
    }

    #[test]
    fn harnesses_are_interleaved_like_arms_and_one_harness_keeps_the_old_plan() {
        let one = plan(&study(9, 2, 3, 2));
        let mut two = study(9, 2, 3, 2);
        let agent = two.harnesses[0].agent.clone();
        two.harnesses = ["claude-code", "codex"]
            .iter()
            .map(|n| Harness {
                name: n.to_string(),
                agent: agent.clone(),
            })
            .collect();
        let p = plan(&two);
        assert_eq!(p.len(), 24);
        let ids: std::collections::HashSet<_> = p.iter().map(|t| &t.id).collect();
        assert_eq!(ids.len(), 24);
        assert!(p.iter().all(|t| t.id.ends_with(&format!("-{}", t.harness))));
        // Within each repetition both harnesses appear, mixed rather than in blocks.
        for rep in p.chunks(12) {
            let first_half: std::collections::HashSet<_> =
                rep[..6].iter().map(|t| t.harness.as_str()).collect();
            assert_eq!(first_half.len(), 2, "{rep:?}");
        }
        let seeds: std::collections::HashSet<_> = p.iter().map(|t| t.seed).collect();
        assert_eq!(seeds.len(), 24);
        // The unnamed single harness: the ids and seeds a study without harnesses had.
        assert!(one.iter().all(|t| t.harness.is_empty()));
        assert_eq!(one[0].id, format!("000-{}-{}", one[0].task, one[0].arm));
    }
}
