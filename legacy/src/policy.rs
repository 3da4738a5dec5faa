//! The argument policy: turns parsed stages into a [`Plan`] whose every argv is safe to run, or
//! refuses with the reason, the offending token and the allowed way.
//!
//! For each stage: the command must be on the list; its arguments are split by a model of the
//! tool's own option parser ([`getopt`]) against an allow-list table ([`tables`]); operands are
//! sorted into data (patterns, programs, `tr` sets) and paths (which go through the shared guard,
//! with unquoted globs expanded inside the workspace); and the final argv is rebuilt as
//! `binary, forced safety flags, the caller's options as typed, trailing forced flags, --,
//! operands`, so that no operand can ever be read as an option.
//!
//! Decisions worth knowing:
//!
//! - Hidden state directories: `rg` and `fd` can be told to include hidden files, which would
//!   recurse into `.shelpa/` and `.filesystem/` (at any depth). Rather than refusing `--hidden`,
//!   both always get trailing excludes that no caller option can outvote: `rg --iglob=!.shelpa …`
//!   (ripgrep applies every `--iglob` after every `--glob`, and the last match wins) and
//!   `fd --exclude=.shelpa …` (fd has no whitelisting override at all). They match the name at
//!   any depth. The real `ls` always gets `--ignore=.shelpa …`, which holds even with `-a` and
//!   `-R`; `ls -R` together with `-a`/`-A`/`-f` stays refused as well. Operands naming a state
//!   directory at any depth, directly or through a symlink, are refused by the shared guard.
//! - Forced flags: `sed --sandbox`, `gawk --sandbox`, `rg --no-config --no-ignore-parent`,
//!   `fd --no-global-ignore-file --no-ignore-parent`, always first. fd 8.6 has no `--no-follow`; it does not follow
//!   symlinks unless `-L`, which is refused.
//! - awk `NAME=value` operands stay assignments (awk would treat them so anyway) unless NAME is
//!   one of the variables that reach the environment, symbol table or file list; anything else
//!   is a file and goes through the guard. gawk's sandbox refuses files added to `ARGV` at run
//!   time.
//! - jq: `input_filename` and `$__loc__` are allowed (they only reveal operand names and line
//!   numbers); `env`, `$ENV` and module loading are refused. Options after `--args` are still
//!   options, as in jq itself; strings that start with `-` go after `--`.
//! - `sort -S` is capped at 512M (or 25%); `--parallel` and `--batch-size` are refused.
//! - rg and fd values that start with `-` must be attached (`--glob=-x`), because their parsers
//!   may read a separate dash-word as an option.
//! - A `tee -a` target with more than one hard link is refused (the append would change the file
//!   under its other names too); `tee FILE` replaces such a file with a new one, so the other names
//!   keep the old content.
//! - Unquoted globs expand only in path operands; in patterns, programs and option values they
//!   are refused with advice to quote, because a shell would have turned them into file names.

pub mod getopt;
mod paths;
mod programs;
pub mod tables;

use std::ffi::OsString;
use std::path::Path;

use super::plan::{CommandName, GuardReason, Plan, Refusal, Stage, Step, Word};
pub use super::tools::ToolPaths;
use getopt::{parse_args, Arity, Item, ParsedOpt, Rule, Syntax};
use workspace::guard::{PathGuard, STATE_DIRS};

/// What the policy needs to know about the call.
pub struct PolicyContext<'a> {
    /// The shared path guard of the workspace.
    pub guard: &'a PathGuard,
    /// The directory relative paths start from: absolute, inside the root.
    pub cwd: &'a Path,
    /// Where the external commands are.
    pub tools: &'a ToolPaths,
}

/// Checks a parsed command and returns what to run, or the refusal.
pub fn check(stages: &[Stage], cx: &PolicyContext) -> Result<Plan, Refusal> {
    if stages.is_empty() || stages.iter().any(|s| s.words.is_empty()) {
        return Err(Refusal::new(
            GuardReason::ParseError,
            "",
            "The command is empty.",
            "Send a pipeline such as: rg -n TODO src | head -20",
        ));
    }
    for stage in stages {
        let name = &stage.words[0].text;
        if (name == "cd" || name == "pwd") && stages.len() > 1 {
            return Err(Refusal::new(
                GuardReason::NavInPipeline,
                name.as_str(),
                format!("'{name}' only works as a whole command, not inside a pipeline."),
                "Run cd or pwd on its own; every pipeline stage runs in the current directory.",
            ));
        }
    }
    if stages.len() == 1 {
        let words = &stages[0].words;
        match words[0].text.as_str() {
            "pwd" => return pwd(words),
            "cd" => return cd(words, cx),
            "ls" => {
                if let Some(plan) = builtin_ls(words, cx)? {
                    return Ok(plan);
                }
            }
            _ => {}
        }
    }
    let steps = stages
        .iter()
        .map(|s| stage_step(s, cx))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Plan::Pipeline(steps))
}

fn pwd(words: &[Word]) -> Result<Plan, Refusal> {
    match words.get(1) {
        None => Ok(Plan::Pwd),
        Some(w) => Err(Refusal::new(
            GuardReason::DisallowedOption,
            w.text.as_str(),
            format!("pwd takes no arguments, got '{}'.", w.text),
            "Run pwd on its own.",
        )),
    }
}

fn cd(words: &[Word], cx: &PolicyContext) -> Result<Plan, Refusal> {
    if words.len() > 2 {
        return Err(Refusal::new(
            GuardReason::ParseError,
            words[2].text.as_str(),
            "cd takes one directory.",
            "Run cd DIR, e.g. cd src.",
        ));
    }
    let typed = match words.get(1) {
        None => return Ok(Plan::Cd(cx.guard.root().to_path_buf())),
        Some(w) if w.text.starts_with('-') => {
            return Err(Refusal::new(
                GuardReason::DisallowedOption,
                w.text.as_str(),
                format!("cd takes no options, got '{}'.", w.text),
                "Run cd DIR; there is no previous directory to return to with 'cd -'.",
            ))
        }
        Some(w) if !w.glob_chars.is_empty() => {
            let matches = paths::expand_glob(cx, w)?;
            if matches.len() != 1 {
                return Err(Refusal::new(
                    GuardReason::ParseError,
                    w.text.as_str(),
                    format!(
                        "'{}' matches {} paths; cd needs exactly one.",
                        w.text,
                        matches.len()
                    ),
                    "Name the directory exactly.",
                ));
            }
            matches.into_iter().next().unwrap_or_default()
        }
        Some(w) => w.text.clone(),
    };
    let resolved = paths::resolve_dir(cx, &typed)?;
    // The guard spliced every symlink out of `relative`: what is there is the directory itself.
    let is_dir = cx
        .guard
        .workspace()
        .stat(&resolved.relative)
        .is_ok_and(|s| s.is_some_and(|s| s.is_dir()));
    if !is_dir {
        return Err(Refusal::new(
            GuardReason::DisallowedTarget,
            typed.as_str(),
            format!("'{typed}' is not a directory."),
            "cd into a directory; list them with ls or fd -t d.",
        ));
    }
    Ok(Plan::Cd(resolved.path))
}

/// `ls` alone with only `-a -A -l -1` and at most one plain path uses the built-in listing;
/// anything else runs the real `ls` through the normal policy.
fn builtin_ls(words: &[Word], cx: &PolicyContext) -> Result<Option<Plan>, Refusal> {
    let mut all = false;
    let mut long = false;
    let mut target: Option<&Word> = None;
    for w in &words[1..] {
        if w.text.len() > 1 && w.text.starts_with('-') && !w.text.starts_with("--") {
            for c in w.text[1..].chars() {
                match c {
                    'a' | 'A' => all = true,
                    'l' => long = true,
                    '1' => {}
                    _ => return Ok(None),
                }
            }
        } else if target.is_none() && !w.text.starts_with('-') && w.glob_chars.is_empty() {
            target = Some(w);
        } else {
            return Ok(None);
        }
    }
    let resolved = match target {
        None => cx.cwd.to_path_buf(),
        // Listing only stats, so a FIFO here cannot hang anything; only confinement matters.
        Some(w) => paths::resolve_dir(cx, &w.text)?.path,
    };
    Ok(Some(Plan::BuiltinLs {
        target: resolved,
        all,
        long,
    }))
}

/// What an operand of a command is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Passed on unchanged (patterns, programs, sets, jq string arguments).
    Data,
    /// A file or directory to read: guarded, globs expanded.
    Path,
}

/// The pieces the final argv is built from.
struct Argv {
    front: Vec<OsString>,
    options: Vec<OsString>,
    back: Vec<OsString>,
    operands: Vec<OsString>,
}

fn stage_step(stage: &Stage, cx: &PolicyContext) -> Result<Step, Refusal> {
    let name_word = &stage.words[0];
    let name = name_word.text.as_str();
    if name_word.glob_chars.is_empty() {
        if let Some(refusal) = super::tools::companion_refusal(name) {
            return Err(refusal);
        }
    }
    let Some(command) = CommandName::parse(name).filter(|_| name_word.glob_chars.is_empty()) else {
        return Err(disallowed_cmd(name));
    };
    let args = &stage.words[1..];
    let table = tables::table(command);
    let items = parse_args(table, args)?;
    if command == CommandName::Tee {
        return tee_step(&items, cx);
    }
    let binary = cx.tools.require(command)?;
    let (opts, operands) = split_items(&items);
    let has = |long: &str| opts.iter().any(|o| o.def.is(long));
    let mut argv = Argv {
        front: Vec::new(),
        options: opts
            .iter()
            .flat_map(|o| o.tokens.iter().map(OsString::from))
            .collect(),
        back: Vec::new(),
        operands: Vec::new(),
    };

    match command {
        CommandName::Tail | CommandName::Head | CommandName::Wc => {
            push_paths(cx, &mut argv, &operands)?;
        }
        CommandName::Sort => {
            for o in &opts {
                if o.def.is("buffer-size") {
                    check_sort_buffer(&o.typed, o.values.first().map_or("", String::as_str))?;
                }
            }
            push_paths(cx, &mut argv, &operands)?;
        }
        CommandName::Tr => {
            for w in &operands {
                push_data(command, &mut argv, w)?;
            }
        }
        CommandName::Ls => {
            if let Some(o) = opts.iter().find(|o| {
                o.def.is("format") && ls_format_is_long(o.values.first().map_or("", String::as_str))
            }) {
                return Err(Refusal::new(
                    GuardReason::DisallowedOption,
                    o.typed.as_str(),
                    format!(
                        "Option {} {} (ls --format) is not allowed: {}.",
                        o.typed,
                        o.values.first().map_or("", String::as_str),
                        tables::LONG_FORMAT
                    ),
                    "In a pipeline use --format=commas, across, vertical or single-column; run ls -l on its own for details.",
                ));
            }
            let hidden = opts
                .iter()
                .any(|o| o.def.is("all") || o.def.is("almost-all") || o.def.short == Some('f'));
            if let Some(r) = opts.iter().find(|o| o.def.is("recursive")) {
                if hidden {
                    return Err(Refusal::new(
                        GuardReason::DisallowedOption,
                        r.typed.as_str(),
                        "ls -R together with -a/-A/-f would list the server's hidden state directories.",
                        "Drop -a/-A, or use fd -H to list hidden files recursively.",
                    ));
                }
            }
            // GNU ls's --ignore, unlike --hide, holds even with -a/-A/-f and at every level of
            // -R, so nested state directories are never listed either (operands naming one are
            // refused by the guard).
            for dir in STATE_DIRS {
                argv.front.push(format!("--ignore={dir}").into());
            }
            push_paths(cx, &mut argv, &operands)?;
        }
        CommandName::Sed => {
            argv.front.push("--sandbox".into());
            let script_in_options = has("expression");
            let roles = first_is_data(operands.len(), !script_in_options);
            push_roles(cx, command, &mut argv, &operands, &roles)?;
        }
        CommandName::Awk => {
            argv.front.push("--sandbox".into());
            for o in &opts {
                if o.def.is("source") {
                    programs::check_awk_program(o.values.first().map_or("", String::as_str))?;
                }
                if o.def.is("assign") {
                    programs::check_awk_assignment(
                        o.values.first().map_or("", String::as_str),
                        true,
                    )?;
                }
            }
            let program_in_options = has("source");
            for (k, w) in operands.iter().enumerate() {
                if k == 0 && !program_in_options {
                    programs::check_awk_program(&w.text)?;
                    push_data(command, &mut argv, w)?;
                } else if w.glob_chars.is_empty() && programs::check_awk_assignment(&w.text, false)?
                {
                    argv.operands.push(OsString::from(&w.text));
                } else {
                    push_path(cx, &mut argv, w)?;
                }
            }
        }
        CommandName::Rg => {
            argv.front.push("--no-config".into());
            // Ignore files above the workspace are outside it: never read (the stage fence
            // would refuse them anyway), so results do not depend on where the workspace sits.
            argv.front.push("--no-ignore-parent".into());
            // The excludes must have the last word. ripgrep adds every --glob to its override
            // matcher first and every --iglob after them, whatever their order on the command
            // line, and the last matching glob wins; so only an --iglob placed after all of the
            // caller's options is sure to be last (a --glob here lost to `--iglob '*'`). The
            // case-insensitive match also hides `.FILESYSTEM`, which is the state directory
            // itself on a case-insensitive filesystem. A glob without a slash matches the name
            // at any depth, and an ignored directory is never descended into.
            for dir in STATE_DIRS {
                argv.back.push(format!("--iglob=!{dir}").into());
            }
            let pattern_in_options = has("regexp") || has("files") || has("type-list");
            let roles = first_is_data(operands.len(), !pattern_in_options);
            push_roles(cx, command, &mut argv, &operands, &roles)?;
        }
        CommandName::Fd => {
            argv.front.push("--no-global-ignore-file".into());
            argv.front.push("--no-ignore-parent".into());
            // fd turns every --exclude into a negated override glob, and the caller has no way
            // to add a whitelisting one, so these cannot be outvoted; like rg's, they match the
            // name at any depth.
            for dir in STATE_DIRS {
                argv.back.push(format!("--exclude={dir}").into());
            }
            let roles = first_is_data(operands.len(), true);
            push_roles(cx, command, &mut argv, &operands, &roles)?;
        }
        CommandName::Jq => return jq_step(binary, &items, cx),
        CommandName::Tee => return tee_step(&items, cx),
    }
    let mut full: Vec<OsString> = vec![binary.as_os_str().to_os_string()];
    full.append(&mut argv.front);
    full.append(&mut argv.options);
    full.append(&mut argv.back);
    if !argv.operands.is_empty() {
        full.push("--".into());
        full.append(&mut argv.operands);
    }
    Ok(Step::Run {
        command,
        argv: full,
        cwd: cx.cwd.to_path_buf(),
    })
}

fn first_is_data(count: usize, first_is_data: bool) -> Vec<Role> {
    (0..count)
        .map(|k| {
            if k == 0 && first_is_data {
                Role::Data
            } else {
                Role::Path
            }
        })
        .collect()
}

fn push_roles(
    cx: &PolicyContext,
    command: CommandName,
    argv: &mut Argv,
    operands: &[&Word],
    roles: &[Role],
) -> Result<(), Refusal> {
    for (w, role) in operands.iter().zip(roles) {
        match role {
            Role::Data => push_data(command, argv, w)?,
            Role::Path => push_path(cx, argv, w)?,
        }
    }
    Ok(())
}

fn push_paths(cx: &PolicyContext, argv: &mut Argv, operands: &[&Word]) -> Result<(), Refusal> {
    for w in operands {
        push_path(cx, argv, w)?;
    }
    Ok(())
}

fn push_path(cx: &PolicyContext, argv: &mut Argv, word: &Word) -> Result<(), Refusal> {
    if word.text == "-" && !word.quoted {
        // Standard input, as every one of these tools reads it.
        argv.operands.push("-".into());
        return Ok(());
    }
    argv.operands.extend(paths::read_operand(cx, word)?);
    Ok(())
}

fn push_data(command: CommandName, argv: &mut Argv, word: &Word) -> Result<(), Refusal> {
    refuse_unquoted_glob(command, word)?;
    argv.operands.push(OsString::from(&word.text));
    Ok(())
}

fn refuse_unquoted_glob(command: CommandName, word: &Word) -> Result<(), Refusal> {
    getopt::refuse_unquoted_glob(word, || {
        format!("is a pattern or program for {}, but", command.as_str())
    })
}

/// jq: the first operand is the program; later operands are files, or strings after
/// `--args`/`--jsonargs`. jq 1.6 accepts `--` only after the program, so the argv is
/// `jq OPTIONS PROGRAM -- REST`.
fn jq_step(binary: &Path, items: &[Item], cx: &PolicyContext) -> Result<Step, Refusal> {
    let mut options: Vec<OsString> = Vec::new();
    let mut program: Option<OsString> = None;
    let mut rest: Vec<OsString> = Vec::new();
    let mut strings = false;
    for item in items {
        match item {
            Item::Opt(o) => {
                if o.def.is("args") || o.def.is("jsonargs") {
                    // The argv puts every operand after the program and `--`, where jq reads
                    // them all in the final mode; files named before --args would silently
                    // become strings, so that order is refused instead.
                    if !rest.is_empty() {
                        return Err(Refusal::new(
                            GuardReason::ParseError,
                            o.typed.as_str(),
                            format!("jq file operands before '{}' are not supported.", o.typed),
                            "Pipe the file into jq instead, e.g. head -c 1000000 data.json | jq -n --args '…' a b.",
                        ));
                    }
                    strings = true;
                }
                options.extend(o.tokens.iter().map(OsString::from));
            }
            Item::Operand(w) if program.is_none() => {
                refuse_unquoted_glob(CommandName::Jq, w)?;
                if w.text.starts_with('-') {
                    return Err(Refusal::new(
                        GuardReason::ParseError,
                        w.text.as_str(),
                        format!("The jq program '{}' starts with '-', which jq would read as an option.", w.text),
                        "Wrap it in parentheses, e.g. '(-1)'.",
                    ));
                }
                programs::check_jq_program(&w.text)?;
                program = Some(OsString::from(&w.text));
            }
            Item::Operand(w) if strings => {
                refuse_unquoted_glob(CommandName::Jq, w)?;
                rest.push(OsString::from(&w.text));
            }
            Item::Operand(w) => {
                if w.text == "-" {
                    return Err(Refusal::new(
                        GuardReason::ParseError,
                        "-",
                        "jq does not take '-' for standard input.",
                        "Leave out file operands to read standard input.",
                    ));
                }
                rest.extend(paths::read_operand(cx, w)?);
            }
        }
    }
    let mut argv = vec![binary.as_os_str().to_os_string()];
    argv.append(&mut options);
    if let Some(p) = program {
        argv.push(p);
        if !rest.is_empty() {
            argv.push("--".into());
            argv.append(&mut rest);
        }
    }
    Ok(Step::Run {
        command: CommandName::Jq,
        argv,
        cwd: cx.cwd.to_path_buf(),
    })
}

fn tee_step(items: &[Item], cx: &PolicyContext) -> Result<Step, Refusal> {
    let mut append = false;
    let mut words = Vec::new();
    for item in items {
        match item {
            Item::Opt(o) if o.def.is("append") => append = true,
            Item::Opt(o) => {
                return Err(Refusal::new(
                    GuardReason::DisallowedOption,
                    o.typed.as_str(),
                    format!("tee option '{}' is not allowed.", o.typed),
                    "Use tee FILE or tee -a FILE.",
                ))
            }
            Item::Operand(w) => words.push(w),
        }
    }
    // The targets are checked once the mode is known (`-a` may follow a file name), because a
    // hard-linked target is refused for appends only.
    let targets = words
        .into_iter()
        .map(|w| paths::tee_target(cx, w, append))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Step::Tee { append, targets })
}

/// GNU ls's `--format` words, and whether each is the long format (`verbose` is its synonym).
const LS_FORMATS: [(&str, bool); 7] = [
    ("verbose", true),
    ("long", true),
    ("commas", false),
    ("horizontal", false),
    ("across", false),
    ("vertical", false),
    ("single-column", false),
];

/// True when ls would take `value` of `--format` for the long format, or might: ls (argmatch)
/// takes an exact word or a prefix of one, so any prefix that could mean `long` or `verbose` is
/// refused, ambiguous ones too (`v`, which ls rejects anyway) and the empty word.
fn ls_format_is_long(value: &str) -> bool {
    if let Some((_, long)) = LS_FORMATS.iter().find(|(name, _)| *name == value) {
        return *long;
    }
    LS_FORMATS
        .iter()
        .any(|(name, long)| *long && name.starts_with(value))
}

/// `sort -S` is capped so one call cannot claim most of the machine's memory.
fn check_sort_buffer(typed: &str, value: &str) -> Result<(), Refusal> {
    const MAX_BYTES: u64 = 512 << 20;
    const MAX_PERCENT: u64 = 25;
    let digits: String = value.chars().take_while(|c| c.is_ascii_digit()).collect();
    let suffix = &value[digits.len()..];
    let number: Option<u64> = digits.parse().ok();
    let ok = match (number, suffix) {
        (Some(n), "%") => n <= MAX_PERCENT,
        (Some(n), "b") => n <= MAX_BYTES,
        (Some(n), "" | "K" | "k") => n.checked_mul(1 << 10).is_some_and(|b| b <= MAX_BYTES),
        (Some(n), "M" | "m") => n.checked_mul(1 << 20).is_some_and(|b| b <= MAX_BYTES),
        (Some(n), "G" | "g") => n.checked_mul(1 << 30).is_some_and(|b| b <= MAX_BYTES),
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(Refusal::new(
        GuardReason::DisallowedOption,
        typed,
        format!("sort buffer size '{value}' is above the limit of 512M (or 25%)."),
        "Leave -S out, or use at most -S 512M.",
    ))
}

fn disallowed_cmd(name: &str) -> Refusal {
    let hint = match name {
        "cat" | "less" | "more" => "To print a file use head -n 1000 FILE or sed -n '1,200p' FILE.",
        "grep" | "egrep" | "fgrep" | "ag" => "Use rg to search.",
        "find" | "locate" => "Use fd to find files.",
        "rm" | "mv" | "cp" | "touch" | "mkdir" | "chmod" | "ln" | "truncate" | "dd" => {
            "This mode cannot change files except by writing them: use tee to write files instead."
        }
        "echo" | "printf" => "To write text to a file use the shelpa_write tool.",
        "cut" => "Use awk -F to pick fields.",
        "uniq" => "Use sort -u.",
        "bash" | "sh" | "zsh" | "env" | "xargs" | "sudo" | "python" | "python3" | "perl" => {
            "No shell or interpreter runs in this mode."
        }
        _ => "",
    };
    let allowed: Vec<&str> = CommandName::ALL.iter().map(|c| c.as_str()).collect();
    Refusal::new(
        GuardReason::DisallowedCmd,
        name,
        format!("'{name}' is not allowed."),
        format!(
            "{hint}{}Allowed commands: {}, and cd/pwd on their own.",
            if hint.is_empty() { "" } else { " " },
            allowed.join(" ")
        ),
    )
}

/// One spelling of a refused option, for table-driven and property tests.
#[derive(Clone, Debug)]
pub struct DangerousSpelling {
    /// The command.
    pub command: CommandName,
    /// The option as the table names it (`--output`, `-f`).
    pub option: String,
    /// The words after the command name (plain words: no quoting needed).
    pub args: Vec<String>,
}

/// Every refused option of every command, generated from the tables, in each spelling its tool
/// accepts: exact, every unambiguous GNU prefix, `--opt=VAL`, `--opt VAL`, short, clustered
/// behind each allowed flag, with an attached value, after an operand (for tools that permute)
/// and gawk's `-W` forms. Each must be refused with `DISALLOWED_OPTION`.
pub fn dangerous_spellings() -> Vec<DangerousSpelling> {
    let mut out = Vec::new();
    for command in CommandName::ALL {
        let table = tables::table(command);
        let flags: Vec<char> = table
            .options
            .iter()
            .filter(|d| d.rule == Rule::Allow && d.arity == Arity::Flag)
            .filter_map(|d| d.short)
            .collect();
        let permutes = !matches!(table.syntax, Syntax::Gnu { permute: false, .. });
        let lead: &[&str] = match command {
            CommandName::Sed => &["p", "f.txt"],
            CommandName::Rg | CommandName::Fd => &["x"],
            CommandName::Jq => &["."],
            _ => &["f.txt"],
        };
        for def in table
            .options
            .iter()
            .filter(|d| matches!(d.rule, Rule::Deny(_)))
        {
            let mut spellings: Vec<Vec<String>> = Vec::new();
            let val = |v: &mut Vec<String>| match def.arity {
                Arity::Required => v.push("x".into()),
                Arity::Pair => {
                    v.push("x".into());
                    v.push("y".into());
                }
                _ => {}
            };
            // One name of the option (long or short): on its own with its value(s), and, when
            // it takes a value and the syntax allows attaching one, with the value attached.
            let attaches = matches!(def.arity, Arity::Required | Arity::Optional)
                && table.syntax != Syntax::Jq;
            let spell = |spellings: &mut Vec<Vec<String>>, bare: String, attached: String| {
                let mut v = vec![bare];
                val(&mut v);
                spellings.push(v);
                if attaches {
                    spellings.push(vec![attached]);
                }
            };
            for long in def.long {
                let mut names = vec![long.to_string()];
                if matches!(table.syntax, Syntax::Gnu { .. }) {
                    for n in 1..long.len() {
                        let prefix = &long[..n];
                        if let getopt::LongMatch::One(d) = table.match_long(prefix) {
                            if std::ptr::eq(d, def) {
                                names.push(prefix.to_string());
                            }
                        }
                    }
                }
                for name in names {
                    spell(&mut spellings, format!("--{name}"), format!("--{name}=x"));
                    if let Syntax::Gnu { w_long: true, .. } = table.syntax {
                        spellings.push(vec!["-W".into(), name.clone()]);
                        spellings.push(vec![format!("-W{name}")]);
                        spellings.push(vec![format!("-W{name}=x")]);
                    }
                }
            }
            if let Some(c) = def.short {
                spell(&mut spellings, format!("-{c}"), format!("-{c}x"));
                for f in &flags {
                    let mut v = vec![format!("-{f}{c}")];
                    val(&mut v);
                    spellings.push(v);
                }
            }
            if permutes {
                let after: Vec<Vec<String>> = spellings
                    .iter()
                    .map(|s| {
                        lead.iter()
                            .map(|l| l.to_string())
                            .chain(s.clone())
                            .collect()
                    })
                    .collect();
                spellings.extend(after);
            }
            for args in spellings {
                out.push(DangerousSpelling {
                    command,
                    option: def.display(),
                    args,
                });
            }
        }
    }
    out
}

/// The options and the operands of a parsed stage, each in command-line order: one pass that
/// serves both lists a step builds its argv from.
fn split_items(items: &[Item]) -> (Vec<&ParsedOpt>, Vec<&Word>) {
    let mut opts = Vec::new();
    let mut operands = Vec::new();
    for item in items {
        match item {
            Item::Opt(o) => opts.push(o),
            Item::Operand(w) => operands.push(w),
        }
    }
    (opts, operands)
}
