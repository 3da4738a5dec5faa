//! A model of each tool's own option parser, so the policy sees options exactly as the tool will.
//!
//! An allow-list is only as good as the parser in front of it: if `sort --ou=x` means `--output`
//! to sort but nothing to us, the list is bypassed. So this module reproduces the three parsers
//! the pipeline commands use — GNU `getopt_long` (unambiguous prefixes of the tool's *full* long
//! option list, exact match wins, clusters where an argument-taking letter swallows the rest of
//! the token or the next token, optional arguments only attached, permutation, `--`, gawk's
//! `-W long-opt`), the exact-name parsers of rg and fd, and jq's hand-written one (exact long
//! names, clusters of flags, two-value options) — and rejects anything it cannot place.

use super::super::plan::{CommandName, GuardReason, Refusal, Word};

/// How many values an option takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// No value.
    Flag,
    /// One value: attached (`-n5`, `--lines=5`) or the next word.
    Required,
    /// One value, only when attached (`-i.bak`, `--follow=name`).
    Optional,
    /// Two values, always the next two words (jq `--arg NAME VALUE`).
    Pair,
}

/// What the policy says about an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Safe to pass on.
    Allow,
    /// Refused; the text says what the option would do.
    Deny(&'static str),
}

/// One real option of a tool (aliases share one definition).
#[derive(Clone, Copy, Debug)]
pub struct OptDef {
    /// The short letter, if any.
    pub short: Option<char>,
    /// Every long name the tool accepts for it (without `--`).
    pub long: &'static [&'static str],
    /// How many values it takes.
    pub arity: Arity,
    /// Allowed or refused.
    pub rule: Rule,
    /// A valid value, used to check allowed options against the real tool.
    pub sample: &'static str,
}

impl OptDef {
    /// The name shown in messages: `--long` if there is one, else `-s`.
    pub fn display(&self) -> String {
        match (self.long.first(), self.short) {
            (Some(l), _) => format!("--{l}"),
            (None, Some(s)) => format!("-{s}"),
            (None, None) => "?".into(),
        }
    }

    /// True if this definition has the given long name.
    pub fn is(&self, long: &str) -> bool {
        self.long.contains(&long)
    }
}

/// Shorthand constructors so that tables read like the tools' own option lists.
pub const fn allow(
    short: Option<char>,
    long: &'static [&'static str],
    arity: Arity,
    sample: &'static str,
) -> OptDef {
    OptDef {
        short,
        long,
        arity,
        rule: Rule::Allow,
        sample,
    }
}

/// A refused option; `why` completes "it …" in the refusal.
pub const fn deny(
    short: Option<char>,
    long: &'static [&'static str],
    arity: Arity,
    why: &'static str,
) -> OptDef {
    OptDef {
        short,
        long,
        arity,
        rule: Rule::Deny(why),
        sample: "x",
    }
}

/// Which parser a tool uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// GNU `getopt_long`. `permute`: options may follow operands. `w_long`: `-W opt` means `--opt`.
    Gnu {
        /// Options are recognised after operands.
        permute: bool,
        /// gawk's `-W long-opt` gateway.
        w_long: bool,
    },
    /// Exact long names, short clusters with values (rg's and fd's parsers).
    Exact,
    /// jq's own parser: exact long names, clusters of flags only, `--arg` takes two words.
    Jq,
}

/// The option table of one command.
#[derive(Debug)]
pub struct Table {
    /// The command.
    pub command: CommandName,
    /// Its parser.
    pub syntax: Syntax,
    /// Every option the real tool has that matters for abbreviation, allowed or not.
    pub options: &'static [OptDef],
    /// `head -5` / `tail -5`: a leading `-NUM` means `-n NUM`.
    pub obsolete_count: bool,
}

impl Table {
    fn by_short(&self, c: char) -> Option<&'static OptDef> {
        self.options.iter().find(|d| d.short == Some(c))
    }

    /// The allowed options, for "what is allowed" suggestions.
    pub fn allowed_summary(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for d in self.options.iter().filter(|d| d.rule == Rule::Allow) {
            let mut s = String::new();
            if let Some(c) = d.short {
                s.push('-');
                s.push(c);
            }
            if let Some(l) = d.long.first() {
                if !s.is_empty() {
                    s.push('/');
                }
                s.push_str("--");
                s.push_str(l);
            }
            parts.push(s);
        }
        parts.join(" ")
    }

    /// Resolves a long name as GNU getopt_long does: an exact name wins; otherwise a prefix
    /// of exactly one option's names (aliases count as one) is that option; several is ambiguous.
    pub fn match_long(&self, name: &str) -> LongMatch {
        if let Some(d) = self.options.iter().find(|d| d.long.contains(&name)) {
            return LongMatch::One(d);
        }
        if matches!(self.syntax, Syntax::Exact | Syntax::Jq) {
            return LongMatch::None;
        }
        let mut found: Vec<&'static OptDef> = Vec::new();
        for d in self.options {
            if d.long.iter().any(|l| l.starts_with(name))
                && !found.iter().any(|f| std::ptr::eq(*f, d))
            {
                found.push(d);
            }
        }
        match found.len() {
            0 => LongMatch::None,
            1 => LongMatch::One(found[0]),
            _ => LongMatch::Ambiguous(found),
        }
    }
}

/// The outcome of looking up a long option name.
#[derive(Debug)]
pub enum LongMatch {
    /// Exactly one option.
    One(&'static OptDef),
    /// No option has that name or prefix.
    None,
    /// Several different options share the prefix.
    Ambiguous(Vec<&'static OptDef>),
}

/// An option as the tool will see it.
#[derive(Clone, Debug)]
pub struct ParsedOpt {
    /// Its definition.
    pub def: &'static OptDef,
    /// The spelling the caller used (`--ou`, `-o`, `-W version`).
    pub typed: String,
    /// Its value(s), if any.
    pub values: Vec<String>,
    /// The words to pass on, exactly as the tool must receive them.
    pub tokens: Vec<String>,
}

/// One element of a parsed command line, in order.
#[derive(Clone, Debug)]
pub enum Item {
    /// An option (with its values).
    Opt(ParsedOpt),
    /// A positional argument.
    Operand(Word),
}

/// Splits a stage's arguments (command name excluded) into options and operands, refusing
/// unknown, ambiguous and denied options.
pub fn parse_args(table: &'static Table, args: &[Word]) -> Result<Vec<Item>, Refusal> {
    let mut items = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    let cmd = table.command.as_str();
    while i < args.len() {
        let word = &args[i];
        let text = word.text.as_str();
        i += 1;
        if options_done || !text.starts_with('-') || text == "-" {
            items.push(Item::Operand(word.clone()));
            if let Syntax::Gnu { permute: false, .. } = table.syntax {
                options_done = true;
            }
            continue;
        }
        if text == "--" {
            options_done = true;
            continue;
        }
        refuse_glob_in_option(cmd, word)?;
        if table.obsolete_count && i == 1 && text[1..].chars().all(|c| c.is_ascii_digit()) {
            if let Some(def) = table.by_short('n') {
                items.push(Item::Opt(ParsedOpt {
                    def,
                    typed: text.to_string(),
                    values: vec![text[1..].to_string()],
                    tokens: vec!["-n".into(), text[1..].to_string()],
                }));
                continue;
            }
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, v)) if table.syntax != Syntax::Jq => (n, Some(v.to_string())),
                _ => (long, None),
            };
            let def = lookup_long(table, name, text)?;
            let mut tokens = vec![text.to_string()];
            let values = take_values(table, def, text, attached, args, &mut i, &mut tokens)?;
            items.push(Item::Opt(ParsedOpt {
                def,
                typed: text.to_string(),
                values,
                tokens,
            }));
            continue;
        }
        // A cluster of short options.
        let letters: Vec<(usize, char)> = text.char_indices().skip(1).collect();
        let mut k = 0;
        let mut opts = Vec::new();
        let mut extra: Vec<String> = Vec::new();
        while k < letters.len() {
            let (at, c) = letters[k];
            k += 1;
            let rest = &text[at + c.len_utf8()..];
            let shown = if letters.len() > 1 {
                format!("-{c}' (in '{text}')")
            } else {
                format!("-{c}'")
            };
            if c == 'W' {
                if let Syntax::Gnu { w_long: true, .. } = table.syntax {
                    let (value, typed) = if rest.is_empty() {
                        let v = args.get(i).map(|w| w.text.clone()).ok_or_else(|| {
                            missing_value(cmd, "-W", "a long option name, e.g. -W version")
                        })?;
                        i += 1;
                        extra.push(v.clone());
                        (v.clone(), format!("-W {v}"))
                    } else {
                        (rest.to_string(), text.to_string())
                    };
                    opts.push(w_option(table, &value, &typed)?);
                    break;
                }
            }
            let Some(def) = table.by_short(c) else {
                return Err(unknown(table, &format!("'{shown}")));
            };
            if let Rule::Deny(why) = def.rule {
                return Err(denied(table, &format!("'{shown}"), def, why));
            }
            let typed = format!("-{c}");
            match def.arity {
                Arity::Flag => {
                    if table.syntax == Syntax::Jq && text.matches(c).count() > 1 {
                        return Err(unknown(table, &format!("'{shown}")));
                    }
                    opts.push(ParsedOpt {
                        def,
                        typed,
                        values: Vec::new(),
                        tokens: Vec::new(),
                    });
                }
                Arity::Optional => {
                    let values = if rest.is_empty() {
                        Vec::new()
                    } else {
                        vec![rest.to_string()]
                    };
                    opts.push(ParsedOpt {
                        def,
                        typed,
                        values,
                        tokens: Vec::new(),
                    });
                    break;
                }
                Arity::Required | Arity::Pair => {
                    if table.syntax == Syntax::Jq {
                        // jq's only short option with a value (-L) is refused above; anything
                        // else here is a table mistake, so fail closed.
                        return Err(unknown(table, &format!("'{shown}")));
                    }
                    let mut tokens = Vec::new();
                    let attached = (!rest.is_empty()).then(|| rest.to_string());
                    let values =
                        take_values(table, def, &typed, attached, args, &mut i, &mut tokens)?;
                    opts.push(ParsedOpt {
                        def,
                        typed,
                        values,
                        tokens,
                    });
                    break;
                }
            }
        }
        // The cluster is passed on as typed, followed by any separate value words.
        for o in &mut opts {
            extra.append(&mut o.tokens);
        }
        let mut first = true;
        for mut o in opts {
            if first {
                o.tokens = std::iter::once(text.to_string())
                    .chain(extra.drain(..))
                    .collect();
                first = false;
            }
            if letters.len() > 1 && !o.typed.starts_with("-W") {
                o.typed = format!("{} (in '{text}')", o.typed);
            }
            items.push(Item::Opt(o));
        }
    }
    Ok(items)
}

fn lookup_long(table: &Table, name: &str, typed: &str) -> Result<&'static OptDef, Refusal> {
    match table.match_long(name) {
        LongMatch::One(def) => {
            if let Rule::Deny(why) = def.rule {
                return Err(denied(table, &format!("'{typed}'"), def, why));
            }
            Ok(def)
        }
        LongMatch::None => Err(unknown(table, &format!("'{typed}'"))),
        LongMatch::Ambiguous(defs) => {
            // A prefix that could mean a refused option is reported as such, so the caller
            // learns why rather than just being told to spell it out.
            if let Some(def) = defs.iter().find(|d| matches!(d.rule, Rule::Deny(_))) {
                if let Rule::Deny(why) = def.rule {
                    return Err(denied(table, &format!("'{typed}'"), def, why));
                }
            }
            let names: Vec<String> = defs.iter().map(|d| d.display()).collect();
            Err(Refusal::new(
                GuardReason::DisallowedOption,
                typed,
                format!(
                    "'{typed}' is ambiguous for {}: it could be {}.",
                    table.command.as_str(),
                    names.join(", ")
                ),
                "Spell the option out in full.",
            ))
        }
    }
}

/// gawk's `-W opt[=value]`: only `-W version` is allowed; everything else is refused, naming
/// the long option it would have meant.
fn w_option(table: &Table, value: &str, typed: &str) -> Result<ParsedOpt, Refusal> {
    let name = value.split_once('=').map_or(value, |(n, _)| n);
    if let LongMatch::One(def) = table.match_long(name) {
        if let Rule::Deny(why) = def.rule {
            return Err(denied(table, &format!("'{typed}'"), def, why));
        }
        if value == "version" {
            return Ok(ParsedOpt {
                def,
                typed: typed.to_string(),
                values: Vec::new(),
                tokens: Vec::new(),
            });
        }
    }
    Err(Refusal::new(
        GuardReason::DisallowedOption,
        typed,
        format!(
            "'{typed}' is not allowed for {}: the only -W form accepted is -W version.",
            table.command.as_str()
        ),
        format!(
            "Use the --long spelling of an allowed option instead. Allowed: {}",
            table.allowed_summary()
        ),
    ))
}

fn take_values(
    table: &Table,
    def: &'static OptDef,
    typed: &str,
    attached: Option<String>,
    args: &[Word],
    i: &mut usize,
    tokens: &mut Vec<String>,
) -> Result<Vec<String>, Refusal> {
    let cmd = table.command.as_str();
    match def.arity {
        Arity::Flag => match attached {
            Some(_) => Err(Refusal::new(
                GuardReason::ParseError,
                typed,
                format!("'{typed}' takes no value for {cmd}."),
                format!("Write {} without '='.", def.display()),
            )),
            None => Ok(Vec::new()),
        },
        Arity::Optional => Ok(attached.into_iter().collect()),
        Arity::Required => {
            if let Some(v) = attached {
                return Ok(vec![v]);
            }
            let word = args
                .get(*i)
                .ok_or_else(|| missing_value(cmd, typed, "a value"))?;
            if table.syntax == Syntax::Exact && word.text.starts_with('-') {
                // Their parsers may read a dash-word as another option rather than a value;
                // attaching removes the doubt.
                return Err(Refusal::new(
                    GuardReason::ParseError,
                    typed,
                    format!(
                        "The value '{}' of '{typed}' starts with '-', which {cmd} may read as an option.",
                        word.text
                    ),
                    format!("Attach the value: {}={}", def.display(), word.text),
                ));
            }
            refuse_glob_in_option(cmd, word)?;
            *i += 1;
            tokens.push(word.text.clone());
            Ok(vec![word.text.clone()])
        }
        Arity::Pair => {
            if attached.is_some() {
                return Err(unknown(table, &format!("'{typed}'")));
            }
            let (Some(a), Some(b)) = (args.get(*i), args.get(*i + 1)) else {
                return Err(missing_value(cmd, typed, "two values (NAME VALUE)"));
            };
            refuse_glob_in_option(cmd, a)?;
            refuse_glob_in_option(cmd, b)?;
            *i += 2;
            tokens.push(a.text.clone());
            tokens.push(b.text.clone());
            Ok(vec![a.text.clone(), b.text.clone()])
        }
    }
}

/// Option words and values are never file names, so a shell glob in them would be a mistake
/// (a shell would have expanded `-g *.rs` into file names).
fn refuse_glob_in_option(cmd: &str, word: &Word) -> Result<(), Refusal> {
    refuse_unquoted_glob(word, || format!("(an option or option value for {cmd})"))
}

/// The one refusal of a word with an unquoted glob character where the policy never expands
/// globs (options here, patterns and programs in the policy): `role` says what the word is to
/// the command, and is only worked out when the word is refused.
pub(super) fn refuse_unquoted_glob(
    word: &Word,
    role: impl FnOnce() -> String,
) -> Result<(), Refusal> {
    if word.glob_chars.is_empty() {
        return Ok(());
    }
    Err(Refusal::new(
        GuardReason::DisallowedSyntax,
        word.text.as_str(),
        format!(
            "'{}' {} contains an unquoted glob character that a shell would expand into file names.",
            word.text,
            role()
        ),
        format!("Quote it: '{}'", word.text),
    ))
}

fn missing_value(cmd: &str, typed: &str, what: &str) -> Refusal {
    Refusal::new(
        GuardReason::ParseError,
        typed,
        format!("'{typed}' needs {what} for {cmd}, but none was given."),
        format!("Give the value after {typed}."),
    )
}

fn unknown(table: &Table, shown: &str) -> Refusal {
    option_refusal(
        table,
        shown,
        format!(
            "Option {shown} is not allowed for {}.",
            table.command.as_str()
        ),
    )
}

fn denied(table: &Table, shown: &str, def: &OptDef, why: &str) -> Refusal {
    option_refusal(
        table,
        shown,
        format!(
            "Option {shown} ({} {}) is not allowed: {why}.",
            table.command.as_str(),
            def.display()
        ),
    )
}

/// What an unknown and a denied option share: the refused token is the option as typed (without
/// the quotes `shown` may wrap around it), and the suggestion lists what the table allows.
fn option_refusal(table: &Table, shown: &str, detail: String) -> Refusal {
    let token = shown.trim_start_matches('\'');
    let token = token.split('\'').next().unwrap_or(token);
    Refusal::new(
        GuardReason::DisallowedOption,
        token,
        detail,
        format!("Allowed options: {}", table.allowed_summary()),
    )
}

#[cfg(test)]
mod tests {
    use super::super::tables::{AWK, JQ, RG, SORT};
    use super::*;

    fn words(args: &[&str]) -> Vec<Word> {
        args.iter()
            .map(|a| Word {
                text: a.to_string(),
                quoted: false,
                glob_chars: Vec::new(),
            })
            .collect()
    }

    fn opts(table: &'static Table, args: &[&str]) -> Vec<(String, Vec<String>)> {
        parse_args(table, &words(args))
            .expect("parses")
            .into_iter()
            .filter_map(|i| match i {
                Item::Opt(o) => Some((o.def.display(), o.values)),
                Item::Operand(_) => None,
            })
            .collect()
    }

    #[test]
    fn gnu_prefixes_resolve_against_the_full_list() {
        assert!(matches!(SORT.match_long("rev"), LongMatch::One(d) if d.is("reverse")));
        assert!(matches!(SORT.match_long("fi"), LongMatch::Ambiguous(_)));
        assert!(matches!(SORT.match_long("sort"), LongMatch::One(d) if d.is("sort")));
        assert!(matches!(SORT.match_long("nope"), LongMatch::None));
        // rg never abbreviates.
        assert!(matches!(RG.match_long("hidde"), LongMatch::None));
    }

    #[test]
    fn clusters_swallow_values_like_getopt() {
        assert_eq!(
            opts(&SORT, &["-rnk2", "-t", ","]),
            vec![
                ("--reverse".to_string(), vec![]),
                ("--numeric-sort".to_string(), vec![]),
                ("--key".to_string(), vec!["2".to_string()]),
                ("--field-separator".to_string(), vec![",".to_string()]),
            ]
        );
        assert_eq!(
            opts(&SORT, &["--key", "1,1", "--sort=numeric"]),
            vec![
                ("--key".to_string(), vec!["1,1".to_string()]),
                ("--sort".to_string(), vec!["numeric".to_string()]),
            ]
        );
        assert_eq!(
            opts(&JQ, &["-rc", "--arg", "a", "b"]),
            vec![
                ("--raw-output".to_string(), vec![]),
                ("--compact-output".to_string(), vec![]),
                ("--arg".to_string(), vec!["a".to_string(), "b".to_string()]),
            ]
        );
    }

    #[test]
    fn tokens_are_passed_on_exactly_once() {
        let items = parse_args(&SORT, &words(&["-rk", "2", "f", "-u"])).expect("parses");
        let tokens: Vec<String> = items
            .iter()
            .flat_map(|i| match i {
                Item::Opt(o) => o.tokens.clone(),
                Item::Operand(_) => Vec::new(),
            })
            .collect();
        assert_eq!(tokens, vec!["-rk", "2", "-u"]);
    }

    #[test]
    fn gawk_stops_at_the_first_operand_and_only_takes_w_version() {
        let items = parse_args(&AWK, &words(&["{print}", "-f", "x"])).expect("parses");
        assert_eq!(
            items
                .iter()
                .filter(|i| matches!(i, Item::Operand(_)))
                .count(),
            3
        );
        assert!(parse_args(&AWK, &words(&["-W", "version"])).is_ok());
        assert!(parse_args(&AWK, &words(&["-Wsandbox"])).is_err());
    }
}
