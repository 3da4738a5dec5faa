//! Checks of program text handed to awk and jq, for what their own sandboxes do not cover.
//!
//! The scans run on the raw text, strings and regexes included. Stripping strings first looks
//! more precise but is unsafe: a regex such as `/"/` makes a naive string stripper hide the code
//! after it. The price is that a forbidden word inside a string is refused too; the suggestion
//! says how to pass such text as data instead (`-v name=value`, `--arg name value`).

use std::sync::OnceLock;

use regex::Regex;

use crate::plan::{GuardReason, Refusal};

/// Variables an assignment (`-v NAME=…` or a `NAME=…` operand) may not set: they reach the
/// environment, the symbol table, or the list of files to read.
const AWK_PROTECTED_VARS: [&str; 6] = ["ENVIRON", "PROCINFO", "SYMTAB", "FUNCTAB", "ARGV", "ARGC"];

/// Refuses awk program text that `gawk --sandbox` would still run harmfully: `@` (extension
/// loading, includes, and indirect calls like `@f()` that defeat any keyword scan), `ENVIRON`,
/// `PROCINFO` and `SYMTAB` (environment and host facts, directly or by name), and the network
/// forms `|&` and `/inet`.
pub(super) fn check_awk_program(text: &str) -> Result<(), Refusal> {
    let found = [
        (
            "@",
            "'@' (@load, @include, @namespace, indirect calls like @f())",
        ),
        ("ENVIRON", "ENVIRON (the environment)"),
        ("PROCINFO", "PROCINFO (process and host information)"),
        ("SYMTAB", "SYMTAB (indirect access to every variable)"),
        ("|&", "'|&' (coprocesses)"),
        ("/inet", "'/inet' (network special files)"),
    ]
    .into_iter()
    .find(|(needle, _)| text.contains(needle));
    match found {
        None => Ok(()),
        Some((needle, what)) => Err(Refusal::new(
            GuardReason::DisallowedSyntax,
            needle,
            format!("The awk program uses {what}, which this mode does not allow."),
            "Remove it; if the text is data (e.g. an e-mail address), pass it with -v name=value and use the variable.",
        )),
    }
}

/// Checks `NAME=value` as awk reads it (`-v` or an assignment operand); returns `false` when the
/// text is not an assignment at all (so an operand is a file).
pub(super) fn check_awk_assignment(text: &str, from_v: bool) -> Result<bool, Refusal> {
    let Some((name, _)) = text.split_once('=') else {
        return if from_v {
            Err(Refusal::new(
                GuardReason::ParseError,
                text,
                format!("'-v {text}' is not an assignment."),
                "Write -v name=value.",
            ))
        } else {
            Ok(false)
        };
    };
    let is_ident = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !is_ident {
        return if from_v {
            Err(Refusal::new(
                GuardReason::ParseError,
                text,
                format!("'-v {text}' does not start with a variable name."),
                "Write -v name=value with a plain variable name.",
            ))
        } else {
            Ok(false)
        };
    }
    if AWK_PROTECTED_VARS.contains(&name) {
        return Err(Refusal::new(
            GuardReason::DisallowedSyntax,
            text,
            format!("Assigning awk's {name} is not allowed."),
            "Use your own variable name.",
        ));
    }
    Ok(true)
}

/// What jq's lexer may skip between the `$` token and the name that follows it: whitespace and
/// comments, in every jq version's spelling. jq 1.6 lexes `$` as a token of its own, so
/// `$ ENV`, `$\tENV` and `$ # note⏎ENV` all mean `$ENV` there (verified with jq 1.6); jq 1.7
/// lexes `$name` as one token but still skips the same things between tokens. A comment ends at
/// `\r` or `\n` in jq 1.6 (`#[^\r\n]*`); from jq 1.7.1 a backslash before the newline continues
/// it (`\\` and `\⏎` inside, `\r?\n` ends it). Both shapes are alternatives here: a match under
/// either reading is refused, so a program cannot hide the name from one version's reading
/// behind the other's. `\s` is wider than jq's `[ \t\r\n]`, which only refuses more.
const JQ_GAP: &str = r"(?:\s|#[^\r\n]*|#(?:\\\\|\\\r?\n|[^\n])*)*";

fn jq_forbidden() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(&format!(
            r"\${JQ_GAP}(?:ENV\b|__prog)|\b(?:import|include|modulemeta|get_search_list|get_prog_origin|get_jq_origin)\b"
        ))
        .expect("constant pattern compiles")
    })
}

fn jq_env_word() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"(^|[^.$A-Za-z0-9_])env\b").expect("constant pattern compiles"))
}

/// Refuses jq programs that read files or the environment: modules (`import`, `include`,
/// `modulemeta`, and the search-path builtins), `$ENV` and `env`. `.env` (a field) is data.
/// `input_filename` and `$__loc__` are allowed: they only reveal operand names and line numbers.
///
/// Like the awk check, this scans the raw text, strings and comments included, rather than a
/// token stream from a home-made jq lexer: a lexer that disagreed with jq's about where a string
/// or comment ends (string interpolation nests, and comment rules changed in jq 1.7.1) would hide
/// code, while a raw scan can only refuse too much (`"$ENV"` as text is refused; pass it with
/// `--arg`). What it must model is the gap jq allows between `$` and the variable name.
pub(super) fn check_jq_program(text: &str) -> Result<(), Refusal> {
    let hit = jq_forbidden()
        .find(text)
        .map(|m| match m.as_str() {
            // Quote a variable as jq means it, without the whitespace or comment between.
            v if v.starts_with('$') && v.ends_with("ENV") => "$ENV".to_string(),
            v if v.starts_with('$') => "$__prog".to_string(),
            v => v.to_string(),
        })
        .or_else(|| jq_env_word().find(text).map(|_| "env".to_string()));
    match hit {
        None => Ok(()),
        Some(word) => Err(Refusal::new(
            GuardReason::DisallowedSyntax,
            word.clone(),
            format!("The jq program uses '{word}', which reads modules or the environment."),
            "Remove it; pass outside values with --arg name value or --argjson name json, and files as operands.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awk_programs_with_escapes_from_the_sandbox_are_refused() {
        for p in [
            "BEGIN{@load \"fork\"}",
            "@include \"x\"",
            "BEGIN{f=\"sys\" \"tem\"; @f(\"id\")}",
            "BEGIN{print ENVIRON[\"HOME\"]}",
            "BEGIN{print PROCINFO[\"pid\"]}",
            "BEGIN{print SYMTAB[\"ENV\" \"IRON\"][\"X\"]}",
            "BEGIN{\"/inet/tcp/0/h/80\" |& getline}",
            "$0 ~ /\"/ { @f(\"x\") } /\"/",
        ] {
            assert!(check_awk_program(p).is_err(), "{p}");
        }
        for p in ["{print $3}", "$3 > 5 {n++} END{print n}", "{a[$1]+=$2}"] {
            assert!(check_awk_program(p).is_ok(), "{p}");
        }
    }

    #[test]
    fn awk_assignments_are_told_apart_from_files() {
        assert_eq!(check_awk_assignment("OFS=,", false).ok(), Some(true));
        assert_eq!(check_awk_assignment("data.txt", false).ok(), Some(false));
        assert_eq!(check_awk_assignment("./a=b", false).ok(), Some(false));
        assert!(check_awk_assignment("ENVIRON=1", false).is_err());
        assert!(check_awk_assignment("ARGV=1", true).is_err());
        assert!(check_awk_assignment("noequals", true).is_err());
    }

    #[test]
    fn jq_programs_reading_modules_or_the_environment_are_refused() {
        for p in [
            "import \"a\" as $a; .",
            "include \"m\"; .",
            "$ENV.HOME",
            "env.HOME",
            ".[env]",
            "modulemeta",
            "get_search_list",
            "{a: env}",
            // jq 1.6 lexes `$` as a token of its own: whitespace and comments may follow it.
            "$ ENV.HOME",
            "$\tENV",
            "$\n ENV",
            "$\r\nENV",
            "$ # note\n ENV.HOME",
            "$# note\nENV",
            "$ # a\n # b\n\tENV",
            // jq 1.6 ends this comment at the newline (so `ENV` is code: verified to leak);
            // jq 1.7.1 would continue it after the backslash. Both readings are refused.
            "$ #x\\\nENV",
            "$ #x\\\ny\nENV",
            "{$ ENV}",
            "[$ENV][0]",
            "\"\\($ ENV)\"",
            "$$$$ENV",
            "$ __prog_args",
            "$ env",
        ] {
            assert!(check_jq_program(p).is_err(), "{p}");
        }
        for p in [
            ".",
            ".env",
            ".config.env",
            ".[] | select(.x > 1)",
            "$environment",
            "$ ENVIRONMENT",
            "$__loc__",
            "$ __loc__",
            "input_filename",
        ] {
            assert!(check_jq_program(p).is_ok(), "{p}");
        }
    }
}
