#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The legacy pipe mode's argument policy, through the library API: every refused option in
//! every spelling its tool accepts, the operand model, path and tee-target checks, and a check
//! against the real installed tools that every allowed option is one they accept.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use shelpa::parse::parse;
use shelpa::plan::{CommandName, GuardReason, Plan, Refusal, Step};
use shelpa::policy::getopt::{Arity, LongMatch, Rule, Syntax};
use shelpa::policy::{check, dangerous_spellings, tables, PolicyContext, ToolPaths};
use workspace::guard::PathGuard;

use test_support::bin::command;
use test_support::temp::canonical_temp_dir;

struct Ws {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    guard: PathGuard,
    tools: ToolPaths,
}

/// A workspace with a log, a small crate, hidden and state directories, a symlink out, a FIFO
/// and a hard-linked file; and a sibling directory outside it.
fn ws() -> Ws {
    let (tmp, base) = canonical_temp_dir();
    let root = base.join("ws");
    let outside = base.join("outside");
    for d in ["src", ".shelpa", ".git", "docs", "empty"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("secret.txt"), "secret\n").expect("write");
    std::fs::write(root.join("app.log"), "a ERROR x\nb ok y\nc ERROR z\n").expect("write");
    std::fs::write(root.join("Cargo.toml"), "[package]\n").expect("write");
    std::fs::write(root.join("src/main.rs"), "fn main() {}\n").expect("write");
    std::fs::write(root.join("src/lib.rs"), "\n").expect("write");
    std::fs::write(root.join("src/.hidden.rs"), "\n").expect("write");
    std::fs::write(root.join(".shelpa/app.log"), "mirror\n").expect("write");
    std::fs::write(root.join("docs/a.md"), "# a\n").expect("write");
    std::fs::write(root.join("linked.txt"), "x\n").expect("write");
    std::fs::hard_link(root.join("linked.txt"), root.join("docs/other-name.txt")).expect("link");
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("leak")).expect("symlink");
    std::os::unix::fs::symlink("app.log", root.join("log-link")).expect("symlink");
    let status = Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
    let guard = PathGuard::new(&root).expect("guard");
    let tools = ToolPaths::discover();
    Ws {
        _tmp: tmp,
        root,
        outside,
        guard,
        tools,
    }
}

impl Ws {
    fn run_in(&self, cwd: &Path, command: &str) -> Result<Plan, Refusal> {
        let stages = parse(command)?;
        let cx = PolicyContext {
            guard: &self.guard,
            cwd,
            tools: &self.tools,
        };
        check(&stages, &cx)
    }

    fn plan(&self, command: &str) -> Result<Plan, Refusal> {
        self.run_in(&self.root, command)
    }

    fn refused(&self, command: &str) -> Refusal {
        match self.plan(command) {
            Ok(plan) => panic!("{command:?} must be refused, got {plan:?}"),
            Err(r) => r,
        }
    }

    fn reason(&self, command: &str) -> GuardReason {
        self.refused(command).reason
    }

    /// The argv of every step (tool names shortened to the command name).
    fn argvs(&self, command: &str) -> Vec<Vec<String>> {
        let plan = self
            .plan(command)
            .unwrap_or_else(|r| panic!("{command:?} refused: {r:?}"));
        let Plan::Pipeline(steps) = plan else {
            panic!("{command:?}: not a pipeline: {plan:?}");
        };
        steps
            .into_iter()
            .map(|s| match s {
                Step::Run { argv, cwd, .. } => {
                    assert_eq!(cwd, self.root);
                    let mut v: Vec<String> = argv
                        .iter()
                        .map(|a| a.to_string_lossy().into_owned())
                        .collect();
                    assert!(Path::new(&v[0]).is_absolute(), "{v:?}");
                    v[0] = Path::new(&v[0])
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    v
                }
                Step::Tee { append, targets } => {
                    let mut v = vec![if append { "tee -a" } else { "tee" }.to_string()];
                    v.extend(targets.iter().map(|t| t.to_string_lossy().into_owned()));
                    v
                }
            })
            .collect()
    }
}

fn quote_all(words: &[String]) -> String {
    words
        .iter()
        .map(|w| shell_words::quote(w).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_dangerous_option_in_every_spelling_is_refused() {
    let w = ws();
    let spellings = dangerous_spellings();
    let mut seen = std::collections::HashSet::new();
    for s in &spellings {
        let command = format!("{} {}", s.command.as_str(), quote_all(&s.args));
        let r = match w.plan(&command) {
            // On its own, `ls -l` (and `-al`, `-1l`) is the built-in listing, which never shows
            // where an outside link points; the same words in a pipeline run GNU ls, refused.
            Ok(Plan::BuiltinLs { .. }) if s.command == CommandName::Ls => {
                w.refused(&format!("{command} | head"))
            }
            _ => w.refused(&command),
        };
        assert_eq!(r.reason, GuardReason::DisallowedOption, "{command}: {r:?}");
        assert!(
            !r.suggestion.is_empty() && !r.detail.is_empty(),
            "{command}"
        );
        seen.insert(format!("{} {}", s.command.as_str(), s.args.join(" ")));
    }
    // The abbreviations and forms the reference notes verified against the real tools must be
    // among the generated spellings.
    for expected in [
        "sort --o x",
        "sort --co x",
        "sort --t x",
        "sort --fil x",
        "sort --random-sou x",
        "sort -uo x",
        "sort -ox",
        "sort f.txt -o x",
        "sort --ou=x",
        "wc --f x",
        "wc --files0-from=x",
        "tail --f",
        "tail --r",
        "tail --p x",
        "tail -f",
        "tail -F",
        "tail -qf",
        "tail f.txt -f",
        "sed --i",
        "sed --in-p",
        "sed --fi x",
        "sed --fo",
        "sed -i",
        "sed -ix",
        "sed -ni",
        "sed -Ei",
        "sed -zi",
        "sed -ui",
        "sed -si",
        "sed p f.txt -i",
        "sed -f x",
        "awk --e x",
        "awk --i x",
        "awk --lo x",
        "awk --fil x",
        "awk --du",
        "awk --pro",
        "awk --pre",
        "awk --de",
        "awk -W exec",
        "awk -Wexec=x",
        "awk -W ex",
        "awk -W load",
        "awk -W dump-variables",
        "awk -f x",
        "awk -E x",
        "awk -i x",
        "awk -l x",
        "awk -d",
        "awk -p",
        "awk -o",
        "awk -D",
        "awk -bf x",
        "jq -f",
        "jq -rf",
        "jq --from-file",
        "jq --rawfile x y",
        "jq --slurpfile x y",
        "jq --argfile x y",
        "jq --run-tests",
        "jq -L x",
        "jq . -f",
        "rg --pre x",
        "rg --pre=x",
        "rg -z",
        "rg --search-zip",
        "rg -L",
        "rg --follow",
        "rg -f x",
        "rg -wf x",
        "rg -fx",
        "rg --ignore-file x",
        "rg --hostname-bin x",
        "rg x --pre x",
        "rg --pre-glob x",
        "fd -x x",
        "fd -xx",
        "fd -Hx x",
        "fd -X x",
        "fd --exec x",
        "fd -l",
        "fd -L",
        "fd --follow",
        "fd --dereference",
        "fd -C x",
        "fd --base-directory x",
        "fd --search-path x",
        "fd --ignore-file x",
        "fd x -x x",
        "ls -L",
        "ls -H",
        "ls --dereference",
        "ls --hyperlink",
        "ls --hy",
        "ls -aL",
        "ls -l",
        "ls -al",
        "ls f.txt -l",
        "ls -g",
        "ls -o",
        "ls -n",
        "ls --numeric-uid-gid",
        "ls --full-time",
        "ls --fu",
        "ls -D",
        "ls --dired",
        "fd -a",
        "fd -Ha",
        "fd --absolute-path",
        "fd -p",
        "fd --full-path",
        "tee -i",
        "tee -p",
        "tee --output-error",
    ] {
        assert!(seen.contains(expected), "missing spelling: {expected}");
    }
    // Two refused options in one cluster are refused as well.
    assert_eq!(w.reason("ls -lL | head"), GuardReason::DisallowedOption);
    // Ambiguous prefixes fail closed, like the real tools.
    for cmd in ["sort --fi x", "sort --ra x", "sed --s", "awk --fi x"] {
        assert_eq!(w.reason(cmd), GuardReason::DisallowedOption, "{cmd}");
    }
}

#[test]
fn spellings_the_generator_cannot_derive_are_refused_too() {
    let w = ws();
    for cmd in [
        // tail's obsolete follow forms; digits only count as the obsolete -NUM in front.
        "tail -3f app.log",
        "tail -fn1 app.log",
        "tail -n 1 -5 app.log",
        "tail app.log --follow=name",
        // sed: -ie is -i with suffix e, -ir is suffix r.
        "sed -ie p app.log",
        "sed -ir p app.log",
        "sed -n -i p app.log",
        "sed -e p app.log -i",
        "sed --in-place=.bak p app.log",
        // gawk -W forms beyond -W version, including abbreviations and the sandbox itself.
        "awk -W e x",
        "awk -We x",
        "awk -W sandbox {print}",
        "awk -W version=x",
        "awk -i inplace {print}",
        // jq: exact long names only; -L attached.
        "jq -Lx .",
        "jq --raw .",
        "jq --slurpf a b .",
        // rg and fd take exact long names only.
        "rg --pr x",
        "rg --hidde x",
        "fd --exe x",
        // Unknown options are refused even when harmless.
        "head --frobnicate",
        "wc -x",
        "sort --files0",
        // ls -R must not list the hidden state directories.
        "ls -R -a | head",
        "ls -Ra | head",
        "ls --recursive --almost-all | head",
        "ls -Rf | head",
        // sort -S is capped.
        "sort -S 4G app.log",
        "sort --buffer-size=90% app.log",
    ] {
        assert_eq!(w.reason(cmd), GuardReason::DisallowedOption, "{cmd}");
    }
}

#[test]
fn after_a_double_dash_an_option_spelling_is_an_operand() {
    let w = ws();
    // Path operands that look like options are passed on as ./-x after the forced --.
    assert_eq!(w.argvs("sort -- -o"), vec![strs(&["sort", "--", "./-o"])]);
    assert_eq!(
        w.argvs("sed -- p -i"),
        vec![strs(&["sed", "--sandbox", "--", "p", "./-i"])]
    );
    assert_eq!(
        w.argvs("wc -- --files0-from=x"),
        vec![strs(&["wc", "--", "./--files0-from=x"])]
    );
    assert_eq!(w.argvs("tail -- +1f"), vec![strs(&["tail", "--", "./+1f"])]);
    // Patterns stay data after --.
    assert_eq!(
        w.argvs("rg -- --pre"),
        vec![strs(&[
            "rg",
            "--no-config",
            "--no-ignore-parent",
            "--iglob=!.filesystem",
            "--iglob=!.shelpa",
            "--",
            "--pre"
        ])]
    );
    // gawk stops at the program: later option spellings are files.
    assert_eq!(
        w.argvs("awk '{print}' -f"),
        vec![strs(&["gawk", "--sandbox", "--", "{print}", "./-f"])]
    );
    assert_eq!(
        w.argvs("jq . -- -f"),
        vec![strs(&["jq", ".", "--", "./-f"])]
    );
    let tee = w.argvs("tee -- -a");
    assert_eq!(tee[0][0], "tee");
    assert_eq!(tee[0][1], w.root.join("-a").to_string_lossy());
    // Every refused short and long spelling, after --, is never DISALLOWED_OPTION.
    for s in dangerous_spellings() {
        let lead = match s.command {
            CommandName::Rg | CommandName::Fd | CommandName::Sed => "x ",
            CommandName::Jq => ". ",
            CommandName::Awk => "'{print}' ",
            _ => "",
        };
        if s.command == CommandName::Tr || s.args.len() != 1 {
            continue;
        }
        let command = format!("{} -- {lead}{}", s.command.as_str(), quote_all(&s.args));
        if let Err(r) = w.plan(&command) {
            assert_ne!(r.reason, GuardReason::DisallowedOption, "{command}: {r:?}");
        }
    }
}

#[test]
fn seed_pipelines_produce_the_expected_argv() {
    let w = ws();
    assert_eq!(
        w.argvs("tail -n 100 app.log | rg \"ERROR\" | awk '{print $3}' | sort -u"),
        vec![
            strs(&["tail", "-n", "100", "--", "app.log"]),
            strs(&[
                "rg",
                "--no-config",
                "--no-ignore-parent",
                "--iglob=!.filesystem",
                "--iglob=!.shelpa",
                "--",
                "ERROR"
            ]),
            strs(&["gawk", "--sandbox", "--", "{print $3}"]),
            strs(&["sort", "-u"]),
        ]
    );
    assert_eq!(
        w.argvs(r#"ls src | rg "\.rs$""#),
        vec![
            strs(&[
                "ls",
                "--ignore=.filesystem",
                "--ignore=.shelpa",
                "--",
                "src"
            ]),
            strs(&[
                "rg",
                "--no-config",
                "--no-ignore-parent",
                "--iglob=!.filesystem",
                "--iglob=!.shelpa",
                "--",
                r"\.rs$"
            ]),
        ]
    );
    let fd = if w
        .tools
        .get(CommandName::Fd)
        .is_some_and(|p| p.ends_with("fdfind"))
    {
        "fdfind"
    } else {
        "fd"
    };
    assert_eq!(
        w.argvs(r#"fd "\.toml$" | head -5"#),
        vec![
            strs(&[
                fd,
                "--no-global-ignore-file",
                "--no-ignore-parent",
                "--exclude=.filesystem",
                "--exclude=.shelpa",
                "--",
                r"\.toml$"
            ]),
            strs(&["head", "-n", "5"]),
        ]
    );
}

#[test]
fn operand_models_tell_patterns_and_programs_from_paths() {
    let w = ws();
    // rg: with -e or --files every operand is a path.
    assert!(w.argvs("rg -e x src")[0].ends_with(&strs(&["--", "src"])));
    assert_eq!(w.reason("rg --files /etc"), GuardReason::PathEscape);
    assert_eq!(w.reason("rg -e x /etc"), GuardReason::PathEscape);
    assert_eq!(w.reason("rg x ../outside"), GuardReason::PathEscape);
    // rg without -e: the first operand is the pattern, even if it looks like a path.
    assert!(w.argvs("rg /etc src")[0].ends_with(&strs(&["--", "/etc", "src"])));
    // sed: the script, unless -e is given.
    assert_eq!(w.reason("sed -e p /etc/passwd"), GuardReason::PathEscape);
    assert_eq!(
        w.argvs("sed -n -e p app.log")[0],
        strs(&["sed", "--sandbox", "-n", "-e", "p", "--", "app.log"])
    );
    // awk: the program, unless -e; assignments are not files; protected variables refused.
    assert_eq!(
        w.argvs("awk -F: -v OFS=, '{print $1}' n=1 app.log")[0],
        strs(&[
            "gawk",
            "--sandbox",
            "-F:",
            "-v",
            "OFS=,",
            "--",
            "{print $1}",
            "n=1",
            "app.log"
        ])
    );
    assert_eq!(
        w.reason("awk -e '{print}' /etc/passwd"),
        GuardReason::PathEscape
    );
    assert_eq!(
        w.reason("awk '{print}' ENVIRON=1"),
        GuardReason::DisallowedSyntax
    );
    assert_eq!(
        w.reason("awk -v ARGV=1 '{print}'"),
        GuardReason::DisallowedSyntax
    );
    assert_eq!(
        w.reason("awk 'BEGIN{print ENVIRON[\"HOME\"]}'"),
        GuardReason::DisallowedSyntax
    );
    assert_eq!(
        w.reason("awk -e '@load \"fork\"'"),
        GuardReason::DisallowedSyntax
    );
    assert_eq!(
        w.reason("awk 'BEGIN{f=\"system\"; @f(\"id\")}'"),
        GuardReason::DisallowedSyntax
    );
    assert_eq!(
        w.argvs("awk -W version")[0],
        strs(&["gawk", "--sandbox", "-W", "version"])
    );
    // jq: the program, files, and strings after --args.
    assert_eq!(
        w.argvs("jq -r --arg k v '.[$k]' app.log")[0],
        strs(&["jq", "-r", "--arg", "k", "v", ".[$k]", "--", "app.log"])
    );
    assert_eq!(
        w.argvs("jq -n '$ARGS' --args /etc/passwd -- -x")[0],
        strs(&["jq", "-n", "--args", "$ARGS", "--", "/etc/passwd", "-x"])
    );
    assert_eq!(w.reason("jq . /etc/passwd"), GuardReason::PathEscape);
    assert_eq!(w.reason("jq . app.log --args a"), GuardReason::ParseError);
    // jq reads options until --, even after --args, as the real jq does.
    assert_eq!(
        w.reason("jq -n '$ARGS' --args a -x"),
        GuardReason::DisallowedOption
    );
    assert_eq!(w.reason("jq '$ENV'"), GuardReason::DisallowedSyntax);
    assert_eq!(
        w.reason("jq 'import \"a\" as $a; .'"),
        GuardReason::DisallowedSyntax
    );
    assert_eq!(w.reason("jq -- -1"), GuardReason::ParseError);
    // fd: the pattern, then paths.
    assert_eq!(w.reason("fd x /"), GuardReason::PathEscape);
    // tr has no paths at all.
    assert_eq!(w.argvs("tr a-z A-Z")[0], strs(&["tr", "--", "a-z", "A-Z"]));
    // Obsolete counts become -n.
    assert_eq!(
        w.argvs("tail -5 app.log")[0],
        strs(&["tail", "-n", "5", "--", "app.log"])
    );
}

#[test]
fn path_operands_go_through_the_guard() {
    let w = ws();
    for cmd in [
        "head ../outside/secret.txt",
        "head /etc/passwd",
        "head leak",
        "head .shelpa/app.log",
        "ls .shelpa | head",
        "rg x .shelpa",
        "wc -l src/../../outside/secret.txt",
    ] {
        assert_eq!(w.reason(cmd), GuardReason::PathEscape, "{cmd}");
    }
    assert_eq!(w.reason("head pipe"), GuardReason::DisallowedTarget);
    // A symlink inside is passed on as the real path.
    assert_eq!(
        w.argvs("head log-link")[0],
        strs(&["head", "--", "app.log"])
    );
    // Absolute paths inside the root are fine; relative paths follow the cwd.
    let abs = w.root.join("app.log");
    assert_eq!(
        w.argvs(&format!("head {}", abs.display()))[0],
        strs(&["head", "--", "app.log"])
    );
    let src = w.root.join("src");
    let plan = w.run_in(&src, "head main.rs ../app.log").expect("allowed");
    let Plan::Pipeline(steps) = plan else {
        panic!("pipeline")
    };
    let Step::Run { argv, cwd, .. } = &steps[0] else {
        panic!("run")
    };
    assert_eq!(cwd, &src);
    // A path above the stage's directory is handed on with `..`, never as a host path.
    assert_eq!(argv[2..], [OsString::from("main.rs"), "../app.log".into()]);
    let plan = w
        .run_in(&src, &format!("head {}", abs.display()))
        .expect("allowed");
    let Plan::Pipeline(steps) = plan else {
        panic!("pipeline")
    };
    let Step::Run { argv, .. } = &steps[0] else {
        panic!("run")
    };
    assert_eq!(argv[2..], [OsString::from("../app.log")]);
}

#[test]
fn unquoted_globs_expand_inside_the_workspace_or_are_refused() {
    let w = ws();
    assert_eq!(
        w.argvs("head src/*.rs")[0],
        strs(&["head", "--", "src/lib.rs", "src/main.rs"])
    );
    assert_eq!(
        w.argvs("head src/.*.rs")[0],
        strs(&["head", "--", "src/.hidden.rs"])
    );
    assert_eq!(
        w.argvs("wc -l */a.md")[0],
        strs(&["wc", "-l", "--", "docs/a.md"])
    );
    assert_eq!(
        w.argvs("head \"src\"/m?in.rs")[0],
        strs(&["head", "--", "src/main.rs"])
    );
    // A quoted star is a literal name.
    assert_eq!(
        w.argvs("head 'src/*.rs'")[0],
        strs(&["head", "--", "src/*.rs"])
    );
    // Hidden and state directories are never matched by *.
    let argv = w.argvs("ls -d .*")[0].clone();
    let all: Vec<String> = argv.iter().skip_while(|a| *a != "--").cloned().collect();
    assert!(!all.iter().any(|a| a.contains(".shelpa")), "{all:?}");
    assert!(all.contains(&".git".to_string()), "{all:?}");
    assert_eq!(w.reason("head *.nothing"), GuardReason::ParseError);
    assert_eq!(w.reason("head /etc/*"), GuardReason::PathEscape);
    assert_eq!(w.reason("head ../*/secret.txt"), GuardReason::PathEscape);
    // Globs in patterns, programs and option values must be quoted.
    assert_eq!(w.reason("rg *.rs src"), GuardReason::DisallowedSyntax);
    assert_eq!(w.reason("rg -g *.rs x"), GuardReason::DisallowedSyntax);
    assert_eq!(w.reason("tr [a-z] [A-Z]"), GuardReason::DisallowedSyntax);
    assert_eq!(
        w.argvs("rg -g '*.rs' x")[0][3..5],
        strs(&["-g", "*.rs"])[..]
    );
}

#[test]
fn navigation_and_the_builtin_ls() {
    let w = ws();
    assert_eq!(w.plan("pwd").expect("pwd"), Plan::Pwd);
    assert_eq!(w.plan("cd src").expect("cd"), Plan::Cd(w.root.join("src")));
    assert_eq!(w.plan("cd").expect("cd"), Plan::Cd(w.root.clone()));
    assert_eq!(w.reason("cd ../outside"), GuardReason::PathEscape);
    assert_eq!(w.reason("cd app.log"), GuardReason::DisallowedTarget);
    assert_eq!(w.reason("cd .shelpa"), GuardReason::PathEscape);
    for cmd in ["cd src | head", "rg x | cd src", "pwd | head", "ls | pwd"] {
        assert_eq!(w.reason(cmd), GuardReason::NavInPipeline, "{cmd}");
    }
    assert_eq!(
        w.plan("ls").expect("ls"),
        Plan::BuiltinLs {
            target: w.root.clone(),
            all: false,
            long: false
        }
    );
    assert_eq!(
        w.plan("ls -la1 src").expect("ls"),
        Plan::BuiltinLs {
            target: w.root.join("src"),
            all: true,
            long: true
        }
    );
    assert_eq!(w.reason("ls ../outside"), GuardReason::PathEscape);
    // Anything beyond the built-in's options runs the real ls.
    assert_eq!(
        w.argvs("ls -t src")[0],
        strs(&[
            "ls",
            "--ignore=.filesystem",
            "--ignore=.shelpa",
            "-t",
            "--",
            "src"
        ])
    );
    assert_eq!(
        w.argvs("ls src | head")[0],
        strs(&[
            "ls",
            "--ignore=.filesystem",
            "--ignore=.shelpa",
            "--",
            "src"
        ])
    );
}

#[test]
fn tee_targets_are_checked_for_writing() {
    let w = ws();
    let t = w.argvs("rg x app.log | tee out.txt new/deeper.txt");
    assert_eq!(
        t[1],
        vec![
            "tee".to_string(),
            w.root.join("out.txt").to_string_lossy().into_owned(),
            w.root.join("new/deeper.txt").to_string_lossy().into_owned()
        ]
    );
    assert_eq!(w.argvs("sort app.log | tee --a out.txt")[1][0], "tee -a");
    for cmd in [
        "tee .shelpa/app.log",
        "tee .git/config",
        "tee src/.git/hooks/x",
        "tee .filesystem/x",
    ] {
        assert_eq!(w.reason(cmd), GuardReason::ProtectedPath, "{cmd}");
    }
    for cmd in [
        "tee log-link",
        "tee leak",
        "tee src",
        "tee pipe",
        "tee -a linked.txt",
        "tee linked.txt -a",
        "tee *.txt",
    ] {
        assert_eq!(w.reason(cmd), GuardReason::DisallowedTarget, "{cmd}");
    }
    // An overwrite replaces a hard-linked file (a new inode), so only appends are refused.
    assert_eq!(
        w.argvs("sort app.log | tee linked.txt")[1][1],
        w.root.join("linked.txt").to_string_lossy().into_owned()
    );
    assert_eq!(w.reason("tee ../outside/x"), GuardReason::PathEscape);
    assert_eq!(w.reason("tee /etc/x"), GuardReason::PathEscape);
}

#[test]
fn commands_off_the_list_and_missing_tools_are_refused() {
    let w = ws();
    for cmd in [
        "rm -rf src",
        "cat app.log",
        "./rg x",
        "/usr/bin/rg x",
        "r? x",
        "bash -c id",
    ] {
        assert_eq!(w.reason(cmd), GuardReason::DisallowedCmd, "{cmd}");
    }
    assert!(w.refused("rm x").suggestion.contains("tee"));
    let none = ToolPaths::default();
    let cx = PolicyContext {
        guard: &w.guard,
        cwd: &w.root,
        tools: &none,
    };
    let r = check(&parse("rg x").expect("parse"), &cx).expect_err("missing");
    assert_eq!(r.reason, GuardReason::MissingTool);
    assert!(r.detail.contains("rg"), "{}", r.detail);
    // tee is built in and never missing.
    assert!(check(&parse("tee out.txt").expect("parse"), &cx).is_ok());
}

/// Words that mean the real tool did not accept an option as we modelled it.
const PARSER_COMPLAINTS: [&str; 16] = [
    "doesn't allow an argument",
    // A value we thought an option takes, read by the tool as a file operand instead.
    "No such file",
    "invalid",
    "unrecognized",
    "Unknown option",
    "were not provided",
    "invalid option",
    "unknown option",
    "Unknown arguments",
    "Found argument",
    "unexpected argument",
    "requires an argument",
    "option requires",
    "is ambiguous",
    "ambiguous option",
    "wasn't expected",
];

/// Runs a checked argv with an empty environment and stdin, in `dir`, killing it if it is still
/// running after a generous grace period (a hang is a test failure, not a timing assertion).
fn run_real(argv: &[OsString], dir: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LC_ALL", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut pause = std::time::Duration::from_millis(1);
    for _ in 0..250 {
        if let Some(status) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            return (
                status.code(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            );
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("{argv:?} did not finish");
}

#[test]
fn every_allowed_option_is_accepted_by_the_real_tool() {
    let w = ws();
    let dir = w.root.join("empty");
    let mut checked = 0;
    for command in CommandName::ALL {
        if command == CommandName::Tee || w.tools.get(command).is_none() {
            continue;
        }
        let table = tables::table(command);
        for def in table.options.iter().filter(|d| d.rule == Rule::Allow) {
            let value = |v: &mut Vec<String>| match def.arity {
                Arity::Required => v.push(def.sample.to_string()),
                Arity::Pair => {
                    v.push("name".into());
                    v.push(def.sample.to_string());
                }
                _ => {}
            };
            let mut spellings: Vec<Vec<String>> = Vec::new();
            let attach = |name: &str| -> Vec<String> {
                let mut v = vec![format!("--{name}")];
                if def.arity == Arity::Required && table.syntax != Syntax::Jq {
                    v[0] = format!("--{name}={}", def.sample);
                } else {
                    value(&mut v);
                }
                v
            };
            for long in def.long {
                spellings.push(attach(long));
                // The shortest prefix we think is unambiguous must be unambiguous to the tool.
                if let Syntax::Gnu { .. } = table.syntax {
                    if let Some(n) = (1..long.len()).find(|n| {
                        matches!(table.match_long(&long[..*n]), LongMatch::One(d) if std::ptr::eq(d, def))
                    }) {
                        spellings.push(attach(&long[..n]));
                    }
                }
            }
            if let Some(c) = def.short {
                let mut v = vec![format!("-{c}")];
                value(&mut v);
                spellings.push(v);
            }
            for args in spellings {
                let operands: &[&str] = match command {
                    CommandName::Sed if !def.is("expression") => &["p"],
                    CommandName::Awk if !def.is("source") => &["BEGIN{}"],
                    CommandName::Rg
                        if def.is("type-list") || def.is("files") || def.is("regexp") =>
                    {
                        &[]
                    }
                    CommandName::Rg => &["x"],
                    CommandName::Jq => &["."],
                    CommandName::Tr => &["a", "b"],
                    _ => &[],
                };
                let command_line = format!(
                    "{} {} {}",
                    command.as_str(),
                    quote_all(&args),
                    quote_all(&strs(operands))
                );
                let plan = w
                    .run_in(&dir, &command_line)
                    .unwrap_or_else(|r| panic!("{command_line}: {r:?}"));
                let Plan::Pipeline(steps) = plan else {
                    // `ls -a` and friends alone use the built-in; run them in a pipeline instead.
                    continue;
                };
                let Step::Run { argv, .. } = &steps[0] else {
                    panic!("{command_line}: not a run step");
                };
                let (_, stderr) = run_real(argv, &dir);
                for complaint in PARSER_COMPLAINTS {
                    assert!(
                        !stderr.contains(complaint),
                        "{command_line} → {argv:?}: {stderr}"
                    );
                }
                // rg's and fd's parsers report usage mistakes as `error: …` lines.
                assert!(
                    !stderr.lines().any(|l| l.starts_with("error:")),
                    "{command_line} → {argv:?}: {stderr}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "only {checked} spellings checked");
}

#[test]
fn the_outside_directory_is_never_named_in_refusals() {
    let w = ws();
    let outside = w.outside.to_string_lossy().into_owned();
    for cmd in [
        "head leak",
        "tee leak",
        "rg x ../outside",
        "cd ../outside",
        "head ../*/x",
    ] {
        let r = w.refused(cmd);
        assert!(
            !r.detail.contains(&outside) && !r.suggestion.contains(&outside),
            "{cmd}: {r:?}"
        );
    }
}

#[test]
fn recursive_tools_never_reach_the_state_directories() {
    let w = ws();
    std::fs::create_dir_all(w.root.join(".filesystem")).expect("mkdir");
    std::fs::write(w.root.join(".filesystem/x"), "MIRRORED\n").expect("write");
    std::fs::write(w.root.join(".shelpa/app.log"), "MIRRORED\n").expect("write");
    std::fs::write(w.root.join("visible.txt"), "MIRRORED\n").expect("write");
    std::fs::remove_file(w.root.join("pipe")).expect("rm fifo");
    for command in [
        "rg -uuu MIRRORED",
        "rg --hidden --no-ignore -g '.shelpa/**' -g '*' MIRRORED",
        "rg --files --hidden",
        "fd -H -u -I",
        "fd -H shelpa",
        "ls -R",
    ] {
        let Plan::Pipeline(steps) = w.plan(command).expect("allowed") else {
            panic!("{command}: not a pipeline");
        };
        let Step::Run { argv, .. } = &steps[0] else {
            panic!("{command}: not a run step");
        };
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(&w.root)
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .expect("runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains(".shelpa"), "{command}: {stdout}");
        assert!(!stdout.contains(".filesystem"), "{command}: {stdout}");
        if command.contains("MIRRORED") {
            assert!(stdout.contains("visible.txt"), "{command}: {stdout}");
        }
    }
}

#[test]
fn arbitrary_command_strings_never_panic_and_plans_stay_well_formed() {
    let w = ws();
    let pieces = [
        "rg", "sort", "tail", "sed", "awk", "jq", "fd", "ls", "tee", "head", "wc", "tr", "cd",
        "-o", "--", "-", "|", "'", "\"", "\\", "$", "*", "?", "[", "]", "a", "=", "-W", "--ou",
        "-n5", "-i", ".shelpa", "..", "/", "ä", " ", " ", " ", "src", "app.log", "-e", "p", "{",
        "}", ";", ">", "<", "&", "#", "~", "\n", "-3f", "+1", "x=1", "@", "-rf", "--arg",
    ];
    // A small deterministic generator, so failures reproduce.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut planned = 0;
    for _ in 0..20_000 {
        let len = 1 + (next() % 8) as usize;
        let command: String = (0..len)
            .map(|_| pieces[(next() % pieces.len() as u64) as usize])
            .collect();
        if let Ok(Plan::Pipeline(steps)) = w.plan(&command) {
            planned += 1;
            for step in steps {
                match step {
                    Step::Run { argv, cwd, .. } => {
                        assert!(Path::new(&argv[0]).is_absolute(), "{command:?}");
                        assert!(cwd.starts_with(&w.root), "{command:?}");
                    }
                    Step::Tee { targets, .. } => {
                        for t in targets {
                            assert!(t.starts_with(&w.root), "{command:?}");
                            assert!(!t.starts_with(w.root.join(".shelpa")), "{command:?}");
                        }
                    }
                }
            }
        }
    }
    assert!(planned > 0);
}

/// Runs a checked pipeline with plain OS pipes (a stand-in for the executor) and returns stdout.
fn run_pipeline(w: &Ws, command: &str) -> String {
    let Plan::Pipeline(steps) = w.plan(command).expect("allowed") else {
        panic!("{command}: not a pipeline");
    };
    let mut input: Option<std::process::ChildStdout> = None;
    let mut children = Vec::new();
    for step in steps {
        let Step::Run { argv, cwd, .. } = step else {
            panic!("{command}: tee is not run here");
        };
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(cwd)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LC_ALL", "C.UTF-8")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        match input.take() {
            Some(out) => cmd.stdin(Stdio::from(out)),
            None => cmd.stdin(Stdio::null()),
        };
        let mut child = cmd.spawn().expect("spawn");
        input = child.stdout.take();
        children.push(child);
    }
    let mut out = String::new();
    if let Some(mut last) = input {
        std::io::Read::read_to_string(&mut last, &mut out).expect("read");
    }
    for mut c in children {
        c.wait().expect("wait");
    }
    out
}

#[test]
fn seed_pipelines_run_with_the_real_tools() {
    let w = ws();
    std::fs::remove_file(w.root.join("pipe")).expect("rm fifo");
    assert_eq!(
        run_pipeline(
            &w,
            "tail -n 100 app.log | rg \"ERROR\" | awk '{print $3}' | sort -u"
        ),
        "x\nz\n"
    );
    assert_eq!(
        run_pipeline(&w, r#"ls src | rg "\.rs$""#),
        "lib.rs\nmain.rs\n"
    );
    assert_eq!(
        run_pipeline(&w, r#"fd "\.toml$" | head -5"#),
        "Cargo.toml\n"
    );
    assert_eq!(
        run_pipeline(&w, "sed -n 's/ERROR/E/p' app.log | wc -l"),
        "2\n"
    );
    assert_eq!(
        run_pipeline(&w, "jq -n -r --arg a b '$a' | tr a-z A-Z"),
        "B\n"
    );
}

/// The state directories at the top and nested, each holding a file whose content is
/// `STATE_CONTENT`; ordinary files beside them hold the same search marker. Symlinks lead into a
/// nested state directory and onto a file inside one.
fn state_ws() -> (tempfile::TempDir, PathBuf) {
    let (tmp, root) = canonical_temp_dir();
    for (rel, content) in [
        (".filesystem/secret", STATE_CONTENT),
        ("sub/.filesystem/secret", STATE_CONTENT),
        ("sub/deep/.filesystem/a/00001", STATE_CONTENT),
        (".shelpa/x", STATE_CONTENT),
        ("sub/.shelpa/x", STATE_CONTENT),
        ("visible.txt", "HIDDENMARK visible\n"),
        ("sub/visible.txt", "HIDDENMARK visible\n"),
        ("sub/deep/visible.txt", "HIDDENMARK visible\n"),
        // Ignore files that try to re-include the state directories: overrides beat them.
        (".ignore", "!.filesystem\n!.shelpa\n!/.filesystem/\n"),
        (".rgignore", "!.filesystem/**\n"),
        (".fdignore", "!.shelpa\n"),
    ] {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
    }
    std::os::unix::fs::symlink("sub/.filesystem", root.join("fslink")).expect("symlink");
    std::os::unix::fs::symlink("sub/.filesystem/secret", root.join("filelink")).expect("symlink");
    (tmp, root)
}

const STATE_CONTENT: &str = "HIDDENMARK inside-state\n";

/// Runs one `shelpa_pipe` call through the real binary, as a client would; returns whether it
/// succeeded and its JSON result.
fn pipe_call(root: &Path, args: serde_json::Value) -> (bool, serde_json::Value) {
    let out = command()
        .arg("--legacy-pipe")
        .args(["call", "shelpa_pipe", &args.to_string(), "--root"])
        .arg(root)
        .arg("--no-call-log")
        .stdin(Stdio::null())
        .output()
        .expect("run binary");
    let text = if out.status.success() {
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let value: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{args}: not JSON ({e}): {text}"));
    (out.status.success(), value)
}

/// Asserts the pipe-mode refusal shape: `{"error":{"code":"GUARD_VIOLATION","reason",…}}`.
fn assert_guard_violation(what: &str, ok: bool, v: &serde_json::Value) {
    assert!(!ok, "{what} must be refused, got {v}");
    assert_eq!(v["error"]["code"], "GUARD_VIOLATION", "{what}: {v}");
    for field in ["reason", "detail", "suggestion"] {
        assert!(
            v["error"][field].as_str().is_some_and(|s| !s.is_empty()),
            "{what}: no {field}: {v}"
        );
    }
}

/// Asserts that a call's output names nothing inside a state directory and shows no content of
/// one. No ordinary name in the workspace contains `.filesystem` or `.shelpa`.
fn assert_no_state(what: &str, v: &serde_json::Value) -> String {
    let stdout = v["stdout"].as_str().unwrap_or_default().to_string();
    let stderr = v["error"]["stderr"].as_str().unwrap_or_default();
    for out in [stdout.as_str(), stderr] {
        assert!(!out.contains("inside-state"), "{what}: {v}");
        assert!(!out.contains(".filesystem"), "{what}: {v}");
        assert!(!out.contains(".shelpa"), "{what}: {v}");
    }
    stdout
}

#[test]
fn no_rg_or_fd_spelling_reaches_a_state_directory_at_any_depth() {
    let (_tmp, root) = state_ws();
    // (command, cwd, must the visible files be found?)
    let searches: &[(&str, &str, bool)] = &[
        ("rg --hidden HIDDENMARK", "", true),
        ("rg -uuu HIDDENMARK", "", true),
        ("rg -u -u -u HIDDENMARK", "", true),
        ("rg -.uuu HIDDENMARK", "", true),
        (
            "rg --hidden --no-ignore --no-ignore-vcs --no-ignore-dot HIDDENMARK",
            "",
            true,
        ),
        // A caller's glob that would re-include everything, in every spelling.
        ("rg --hidden --iglob '*' HIDDENMARK", "", true),
        ("rg --hidden --iglob='*' HIDDENMARK", "", true),
        ("rg --hidden --iglob '**' HIDDENMARK", "", true),
        ("rg --hidden -g '*' HIDDENMARK", "", true),
        ("rg --hidden --glob='*' HIDDENMARK", "", true),
        (
            "rg --hidden -g '*' --iglob '*' --glob '*' HIDDENMARK",
            "",
            true,
        ),
        ("rg HIDDENMARK -uuu --iglob '*'", "", true),
        ("rg -uuu HIDDENMARK --iglob '*' .", "", true),
        ("rg -uuu --iglob '*' -e HIDDENMARK", "", true),
        (
            "rg --hidden --iglob '.filesystem' --iglob '.shelpa' HIDDENMARK",
            "",
            false,
        ),
        ("rg --hidden --iglob '.filesystem/**' HIDDENMARK", "", false),
        (
            "rg --hidden --iglob '**/.filesystem/**' -g '**/.shelpa/**' HIDDENMARK",
            "",
            false,
        ),
        (
            "rg --hidden --iglob '.FILESYSTEM' --iglob '.Shelpa' HIDDENMARK",
            "",
            false,
        ),
        (
            "rg --hidden --iglob '{.filesystem,.shelpa,*}' HIDDENMARK",
            "",
            true,
        ),
        ("rg --hidden --iglob '!!.filesystem' HIDDENMARK", "", true),
        (
            "rg --hidden --glob-case-insensitive -g '!.FILESYSTEM' -g '*' HIDDENMARK",
            "",
            true,
        ),
        (
            "rg --hidden --glob-case-insensitive --iglob '*' HIDDENMARK",
            "",
            true,
        ),
        ("rg -uuu --type-add 'st:*' -t st HIDDENMARK", "", true),
        ("rg -uuu --iglob '*' HIDDENMARK sub", "", true),
        ("rg -uuu --iglob '*' HIDDENMARK ./sub/", "", true),
        ("rg -uuu --iglob '*' HIDDENMARK sub/deep", "", true),
        ("rg -uuu --iglob '*' HIDDENMARK sub/../sub", "", true),
        ("rg -uuu --iglob '*' HIDDENMARK -- sub", "", true),
        ("rg -uuu --iglob '*' HIDDENMARK ..", "sub", true),
        ("rg -uuu --iglob '*' HIDDENMARK", "sub", true),
        ("rg -uuu --iglob '*' HIDDENMARK ../..", "sub/deep", true),
        ("rg -uuu --iglob '*' -l HIDDENMARK | sort", "", true),
        ("rg -uuu --iglob '*' --files", "", true),
        ("rg --files --hidden -g '*'", "", true),
        ("rg --files -uuu --iglob '*' sub", "", true),
        ("rg -uuu --iglob '*' -c HIDDENMARK", "", true),
        ("fd -H", "", true),
        ("fd -u", "", true),
        ("fd -HI", "", true),
        ("fd -H -I -u", "", true),
        ("fd -H . sub", "", true),
        ("fd -u . sub/deep", "", true),
        ("fd -u . ..", "sub", true),
        ("fd -H -t f . .", "", true),
        ("fd -u --prune", "", true),
        ("fd -u -E '!.filesystem' -E '!.shelpa'", "", true),
        ("fd -H -g '*secret*'", "", false),
        ("fd -H -g '*' -- . sub", "", true),
        ("fd -u secret", "", false),
        ("fd -u -t d", "", false),
        // The real ls in a pipeline, hidden entries shown.
        ("ls -a sub | sort", "", false),
        ("ls -A sub/deep | sort", "", true),
        ("ls -as sub | sort", "", false),
        ("ls -f sub | sort", "", false),
        ("ls -R | sort", "", true),
        ("ls -R sub | sort", "", true),
    ];
    for (command, cwd, finds_visible) in searches {
        let mut args = serde_json::json!({ "command": command });
        if !cwd.is_empty() {
            args["cwd"] = serde_json::json!(cwd);
        }
        let (ok, v) = pipe_call(&root, args);
        // A search that the excludes leave with nothing to search fails (rg: "No files were
        // searched"); that is fine as long as it shows nothing of the state.
        assert!(
            ok || !finds_visible,
            "{command} (cwd {cwd:?}) must run: {v}"
        );
        let stdout = assert_no_state(command, &v);
        if *finds_visible {
            assert!(
                stdout.contains("visible"),
                "{command} (cwd {cwd:?}): {stdout}"
            );
        }
    }

    // Naming a state directory, at any depth and through any spelling or symlink, is refused.
    let refused: &[(&str, &str)] = &[
        ("rg HIDDENMARK .filesystem", ""),
        ("rg HIDDENMARK ./.filesystem/secret", ""),
        ("rg HIDDENMARK sub/.filesystem", ""),
        ("rg HIDDENMARK sub/.filesystem/", ""),
        ("rg HIDDENMARK sub/.filesystem/secret", ""),
        ("rg HIDDENMARK sub/deep/.filesystem/a", ""),
        ("rg HIDDENMARK sub/.shelpa/x", ""),
        ("rg HIDDENMARK sub/x/../.filesystem", ""),
        ("rg HIDDENMARK -- sub/.filesystem", ""),
        ("rg -e HIDDENMARK sub/.filesystem", ""),
        ("rg --files sub/.filesystem", ""),
        ("rg -uuu HIDDENMARK fslink", ""),
        ("rg -uuu HIDDENMARK filelink", ""),
        ("rg HIDDENMARK .filesystem", "sub"),
        ("rg HIDDENMARK ../.shelpa", "sub"),
        ("rg -uuu HIDDENMARK */.filesystem", ""),
        ("rg -uuu HIDDENMARK sub/.f*", ""),
        ("rg -uuu HIDDENMARK sub/.*/secret", ""),
        ("rg -uuu HIDDENMARK", "sub/.filesystem"),
        ("fd -H . sub/.filesystem", ""),
        ("fd -u . .shelpa", ""),
        ("fd -u . fslink", ""),
        ("fd -u -p filesystem", ""),
        ("fd -u --full-path '\\.shelpa'", ""),
        ("head sub/.filesystem/secret", ""),
        ("head fslink/secret", ""),
        ("head filelink", ""),
        ("tail -n 5 sub/.shelpa/x", ""),
        ("wc -l sub/.filesystem/secret", ""),
        ("sort sub/.filesystem/secret", ""),
        ("sed -n p sub/.filesystem/secret", ""),
        ("awk '{print}' sub/.filesystem/secret", ""),
        ("jq -R . sub/.filesystem/secret", ""),
        ("ls sub/.filesystem", ""),
        ("ls -la sub/.shelpa | head", ""),
        ("ls -R sub/deep/.filesystem | head", ""),
        ("cd sub/.filesystem", ""),
        ("head -n 1 visible.txt | tee sub/.filesystem/new", ""),
        ("head -n 1 visible.txt | tee sub/.shelpa/x", ""),
        // Not on the list at all: no cat, grep -r, find, du or tree in this mode.
        ("cat sub/.filesystem/secret", ""),
        ("grep -r HIDDENMARK .", ""),
        ("find . -name secret", ""),
        ("du -a", ""),
        ("tree -a", ""),
    ];
    for (command, cwd) in refused {
        let mut args = serde_json::json!({ "command": command });
        if !cwd.is_empty() {
            args["cwd"] = serde_json::json!(cwd);
        }
        let (ok, v) = pipe_call(&root, args);
        assert_guard_violation(command, ok, &v);
        assert!(!v.to_string().contains("inside-state"), "{command}: {v}");
    }
    assert!(
        !root.join("sub/.filesystem/new").exists(),
        "tee wrote into a state directory"
    );
}

#[test]
fn rg_iglobs_beat_globs_so_the_forced_excludes_are_iglobs_last() {
    // The fact the rg exclusion rests on, checked against the installed ripgrep: a --glob placed
    // after an --iglob still loses to it, so a trailing --glob exclude could be outvoted by any
    // caller --iglob, while a trailing --iglob exclude is last of all.
    let (_tmp, root) = state_ws();
    let w = ws();
    let Some(rg) = w.tools.get(CommandName::Rg) else {
        return;
    };
    let run = |args: &[&str]| -> String {
        let out = Command::new(rg)
            .args(["--no-config", "--hidden", "--no-ignore"])
            .args(args)
            .current_dir(&root)
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .expect("rg runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let old = run(&[
        "--iglob=*",
        "--glob=!.filesystem",
        "--glob=!.shelpa",
        "HIDDENMARK",
    ]);
    assert!(
        old.contains("inside-state"),
        "rg no longer lets an iglob win: {old}"
    );
    let new = run(&[
        "--iglob=*",
        "--iglob=!.filesystem",
        "--iglob=!.shelpa",
        "HIDDENMARK",
    ]);
    assert!(!new.contains("inside-state"), "{new}");
    assert!(new.contains("visible"), "{new}");
    // And the plan really ends the options with them.
    let argv = &w.argvs("rg --hidden --iglob '*' -g '*' x")[0];
    let dash = argv.iter().position(|a| a == "--").expect("--");
    assert_eq!(
        argv[dash - 2..dash],
        strs(&["--iglob=!.filesystem", "--iglob=!.shelpa"])[..]
    );
}

/// jq programs that read the environment, in every spelling tried against jq 1.6 and 1.7:
/// whitespace and comments between `$` and the name (jq 1.6 lexes `$` as its own token), the
/// object shorthand, interpolation, and `env` in any position.
const JQ_ENV_SPELLINGS: &[&str] = &[
    "$ENV.SHELPA_JQ_SECRET",
    "$ ENV.SHELPA_JQ_SECRET",
    "$  ENV.SHELPA_JQ_SECRET",
    "$\tENV.SHELPA_JQ_SECRET",
    "$\nENV.SHELPA_JQ_SECRET",
    "$\n ENV.SHELPA_JQ_SECRET",
    "$\r\nENV.SHELPA_JQ_SECRET",
    "$ # a comment\nENV.SHELPA_JQ_SECRET",
    "$# a comment\n ENV.SHELPA_JQ_SECRET",
    "$ # one\n # two\n\tENV.SHELPA_JQ_SECRET",
    "$ #x\\\nENV.SHELPA_JQ_SECRET",
    "$ #x\r\nENV.SHELPA_JQ_SECRET",
    "$ENV | .SHELPA_JQ_SECRET",
    "[$ ENV][0].SHELPA_JQ_SECRET",
    "{$ENV}.ENV.SHELPA_JQ_SECRET",
    "{$ ENV}.ENV.SHELPA_JQ_SECRET",
    "\"\\($ ENV.SHELPA_JQ_SECRET)\"",
    "def f: $ ENV; f.SHELPA_JQ_SECRET",
    "env.SHELPA_JQ_SECRET",
    "env | .SHELPA_JQ_SECRET",
    "[env][0].SHELPA_JQ_SECRET",
    "(env).SHELPA_JQ_SECRET",
    "\"\\(env.SHELPA_JQ_SECRET)\"",
    "1 as $x | env.SHELPA_JQ_SECRET",
    "# c\nenv.SHELPA_JQ_SECRET",
];

#[test]
fn every_jq_spelling_of_the_environment_is_refused() {
    let w = ws();
    let mut leaked_with_real_jq = 0;
    for program in JQ_ENV_SPELLINGS {
        let command = format!("jq -n {}", shell_words::quote(program));
        let r = w.refused(&command);
        assert_eq!(
            r.reason,
            GuardReason::DisallowedSyntax,
            "{program:?}: {r:?}"
        );
        // The real jq, given the same program and a secret, shows which spellings are live on
        // this machine; the policy must refuse them all whatever the version.
        if let Some(jq) = w.tools.get(CommandName::Jq) {
            let out = Command::new(jq)
                .args(["-n", program])
                .env_clear()
                .env("SHELPA_JQ_SECRET", "leaked-value")
                .stdin(Stdio::null())
                .output()
                .expect("jq runs");
            if String::from_utf8_lossy(&out.stdout).contains("leaked-value") {
                leaked_with_real_jq += 1;
            }
        }
    }
    if w.tools.get(CommandName::Jq).is_some() {
        // At least the plain spellings work in every jq, so the list is not testing nothing.
        assert!(leaked_with_real_jq >= 10, "{leaked_with_real_jq}");
    }
    // Variables and fields that only look similar stay allowed.
    for program in [
        "$__loc__",
        "$ __loc__",
        "input_filename",
        ".env",
        ".ENV",
        "$ENVIRONMENT",
        "$ ENVx",
    ] {
        let command = format!(
            "jq -n --arg ENVIRONMENT a --arg ENVx b {}",
            shell_words::quote(program)
        );
        assert!(w.plan(&command).is_ok(), "{program:?}");
    }
}

#[test]
fn jq_environment_spellings_are_refused_by_the_binary_with_the_guard_shape() {
    let (_tmp, root) = state_ws();
    for program in JQ_ENV_SPELLINGS {
        let command = format!("jq -n {}", shell_words::quote(program));
        let (ok, v) = pipe_call(&root, serde_json::json!({ "command": command }));
        assert_guard_violation(&command, ok, &v);
        assert_eq!(v["error"]["reason"], "DISALLOWED_SYNTAX", "{command}: {v}");
    }
}

/// `ls --format` takes a word or any prefix ls would accept for it: every one that means (or might
/// mean) the long format is refused, the others run.
#[test]
fn ls_format_long_is_refused_in_every_spelling_ls_accepts() {
    let w = ws();
    for value in [
        "long", "lon", "lo", "l", "verbose", "verbos", "verb", "ver", "ve", "v", "",
    ] {
        for command in [
            format!("ls --format={value} | head"),
            format!("ls --format '{value}' | head"),
            format!("ls --form={value} src | head"),
            format!("ls src --format={value}"),
        ] {
            let r = w.refused(&command);
            assert_eq!(r.reason, GuardReason::DisallowedOption, "{command}: {r:?}");
            assert!(r.detail.contains("built-in listing"), "{command}: {r:?}");
        }
    }
    for value in [
        "commas",
        "c",
        "across",
        "horizontal",
        "h",
        "vertical",
        "vert",
        "single-column",
        "s",
    ] {
        let command = format!("ls --format={value} src | head");
        assert!(w.plan(&command).is_ok(), "{command} must run");
    }
}
