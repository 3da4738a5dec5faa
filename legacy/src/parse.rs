//! Turns a command string into pipeline stages, the way a POSIX shell would read it, but without
//! ever giving shell syntax a meaning.
//!
//! No shell runs in this mode, so anything a shell would treat as syntax (`;`, `&&`, redirections,
//! command substitution, variables) could only mislead: the caller would believe it happened. The
//! lexer therefore refuses every unquoted piece of shell syntax with a message saying what to do
//! instead, splits stages on unquoted `|` only, and remembers per word what was quoted so that a
//! quoted `|`, `*` or `>` stays plain data (`rg 'a|b'`, `awk '$3 > 5'`).

use super::limits::MAX_STAGES;
use super::plan::{GuardReason, Refusal, Stage, Word};

/// Splits `command` into stages of words, or refuses it. At most [`MAX_STAGES`] stages.
///
/// Quoting follows POSIX `sh`: single quotes keep everything literal; double quotes keep
/// everything literal except `\` before `$`, `` ` ``, `"`, `\` or a newline, and `$`/`` ` ``
/// (which are refused); an unquoted backslash quotes the next character. A `#` is always data.
pub fn parse(command: &str) -> Result<Vec<Stage>, Refusal> {
    Lexer::new(command).run()
}

/// Characters a shell would expand as a glob when they appear unquoted.
const GLOB_CHARS: [char; 3] = ['*', '?', '['];

/// The word being built: its text, whether any of it was quoted, and its unquoted glob chars.
#[derive(Default)]
struct WordBuf {
    text: String,
    quoted: bool,
    glob_chars: Vec<usize>,
    /// True once anything (even an empty quoted string) belongs to the word.
    started: bool,
}

impl WordBuf {
    fn push_quoted(&mut self, c: char) {
        self.text.push(c);
        self.quoted = true;
        self.started = true;
    }

    fn push_plain(&mut self, c: char) {
        if GLOB_CHARS.contains(&c) {
            self.glob_chars.push(self.text.len());
        }
        self.text.push(c);
        self.started = true;
    }

    /// True while the word so far is unquoted digits only (the `2` of `2>`).
    fn is_fd_number(&self) -> bool {
        !self.quoted && !self.text.is_empty() && self.text.chars().all(|c| c.is_ascii_digit())
    }
}

struct Lexer<'a> {
    chars: Vec<char>,
    pos: usize,
    source: &'a str,
    stages: Vec<Stage>,
    words: Vec<Word>,
    word: WordBuf,
    /// Where the current stage's first word begins (a char index), once it has one.
    stage_begin: Option<usize>,
    /// Where the current stage's last complete word ends (a char index).
    stage_end: usize,
}

impl<'a> Lexer<'a> {
    fn new(source: &'a str) -> Self {
        Lexer {
            chars: source.chars().collect(),
            pos: 0,
            source,
            stages: Vec::new(),
            words: Vec::new(),
            word: WordBuf::default(),
            stage_begin: None,
            stage_end: 0,
        }
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn run(mut self) -> Result<Vec<Stage>, Refusal> {
        if self.source.trim().is_empty() {
            return Err(parse_error(
                "",
                "The command is empty.",
                "Send a pipeline such as: rg -n TODO src | head -20",
            ));
        }
        if self.source.contains('\0') {
            return Err(parse_error(
                "NUL",
                "The command contains a NUL byte, which no argument can hold.",
                "Remove the NUL byte.",
            ));
        }
        // Trailing whitespace (including a final newline) is not a second command.
        let trimmed_len = self.source.trim_end().chars().count();
        self.chars.truncate(trimmed_len);
        while let Some(c) = self.peek(0) {
            // Anything but a separator begins the stage's text (what is refused never matters).
            if self.stage_begin.is_none() && !matches!(c, ' ' | '\t' | '|') {
                self.stage_begin = Some(self.pos);
            }
            match c {
                '\'' => self.single_quoted()?,
                '"' => self.double_quoted()?,
                '\\' => self.backslash(),
                ' ' | '\t' => {
                    self.end_word();
                    self.pos += 1;
                }
                '\n' | '\r' => {
                    return Err(syntax(
                        "newline",
                        "A newline separates commands in a shell; only one pipeline runs per call.",
                        "Send one pipeline per call, with stages joined by |.",
                    ))
                }
                '|' => self.pipe()?,
                ';' => {
                    return Err(syntax(
                        ";",
                        "';' (command list) is not supported: no shell runs here.",
                        "Send one pipeline per call; quote ';' if it is data, e.g. sed 's/a/b/;s/c/d/' written inside single quotes.",
                    ))
                }
                '&' => return Err(self.ampersand()),
                '>' | '<' => return Err(self.redirect(c)),
                '`' => {
                    return Err(syntax(
                        "`",
                        "Backticks (command substitution) are not supported: no shell runs here.",
                        "Run the inner command as its own call and pass its result literally.",
                    ))
                }
                '(' | ')' => {
                    return Err(syntax(
                        c.to_string(),
                        format!("'{c}' (subshell or grouping) is not supported: no shell runs here."),
                        "Quote it if it is data, e.g. rg '(foo|bar)'.",
                    ))
                }
                '$' => self.dollar(false)?,
                '~' if !self.word.started => {
                    return Err(syntax(
                        "~",
                        "'~' (home directory) is not expanded here: there is no home, only the workspace.",
                        "Use a path relative to the current directory or the workspace root; quote '~' if it is data.",
                    ))
                }
                _ => {
                    self.word.push_plain(c);
                    self.pos += 1;
                }
            }
        }
        self.end_word();
        self.end_stage(true)?;
        Ok(self.stages)
    }

    fn end_word(&mut self) {
        let word = std::mem::take(&mut self.word);
        if word.started {
            // Called at the separator after the word, so `pos` is just past its last character.
            self.stage_end = self.pos;
            self.words.push(Word {
                text: word.text,
                quoted: word.quoted,
                glob_chars: word.glob_chars,
            });
        }
    }

    fn end_stage(&mut self, last: bool) -> Result<(), Refusal> {
        if self.words.is_empty() {
            let detail = if self.stages.is_empty() && !last {
                "The command starts with '|': a pipeline needs a command before every '|'."
            } else if last {
                "The command ends with '|': a pipeline needs a command after every '|'."
            } else {
                "A stage between two '|' is empty."
            };
            return Err(parse_error(
                "|",
                detail,
                "Put a command on both sides of each '|', e.g. rg ERROR app.log | sort -u.",
            ));
        }
        // Refused as soon as the stage past the limit is complete: the rest is not even read.
        if self.stages.len() == MAX_STAGES {
            return Err(too_many_stages());
        }
        let begin = self.stage_begin.take().unwrap_or(self.stage_end);
        let text: String = self.chars[begin..self.stage_end.max(begin)]
            .iter()
            .collect();
        self.stages.push(Stage {
            words: std::mem::take(&mut self.words),
            text: text.trim().to_string(),
        });
        Ok(())
    }

    /// The frame both kinds of quoting share: step over the opening quote, mark the word as
    /// started and quoted (so `''` is an empty word, and `2''>` no file-descriptor redirect),
    /// hand every character to `inner` until the closing quote, and refuse a quote never closed
    /// by quoting the text from where it opened.
    fn quoted(
        &mut self,
        quote: char,
        inner: fn(&mut Self, char) -> Result<(), Refusal>,
    ) -> Result<(), Refusal> {
        let start = self.pos;
        self.pos += 1;
        self.word.started = true;
        self.word.quoted = true;
        loop {
            match self.peek(0) {
                None => return Err(unbalanced(quote, self.snippet(start))),
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(c) => inner(self, c)?,
            }
        }
    }

    /// Single quotes: every character up to the next `'` is literal.
    fn single_quoted(&mut self) -> Result<(), Refusal> {
        self.quoted('\'', |lexer, c| {
            lexer.word.push_quoted(c);
            lexer.pos += 1;
            Ok(())
        })
    }

    /// Double quotes: literal but for the backslash escapes and `$` expansion the shell does
    /// there; a backtick is refused.
    fn double_quoted(&mut self) -> Result<(), Refusal> {
        self.quoted('"', |lexer, c| match c {
            '\\' => {
                match lexer.peek(1) {
                    Some(next @ ('$' | '`' | '"' | '\\')) => {
                        lexer.word.push_quoted(next);
                        lexer.pos += 2;
                    }
                    Some('\n') => lexer.pos += 2,
                    _ => {
                        lexer.word.push_quoted('\\');
                        lexer.pos += 1;
                    }
                }
                Ok(())
            }
            '`' => Err(syntax(
                "`",
                "Backticks (command substitution) are not supported, even inside double quotes.",
                "Use single quotes for literal text, or escape it as \\`.",
            )),
            '$' => lexer.dollar(true),
            _ => {
                lexer.word.push_quoted(c);
                lexer.pos += 1;
                Ok(())
            }
        })
    }

    fn backslash(&mut self) {
        match self.peek(1) {
            // Line continuation: both characters vanish.
            Some('\n') => self.pos += 2,
            Some(next) => {
                self.word.push_quoted(next);
                self.pos += 2;
            }
            // A trailing backslash escapes nothing; a shell would wait for more input.
            None => {
                self.word.push_quoted('\\');
                self.pos += 1;
            }
        }
    }

    /// A `$` is plain data only where a shell would also leave it alone: at the end of a word or
    /// before something that cannot start an expansion (`"\.rs$"`, `rg 'x$'`, `foo$ bar`).
    fn dollar(&mut self, in_double_quotes: bool) -> Result<(), Refusal> {
        let next = self.peek(1);
        let expands = match next {
            None => false,
            Some(c) if c.is_ascii_alphanumeric() || c == '_' => true,
            Some('{' | '(' | '[' | '@' | '*' | '#' | '?' | '$' | '!' | '-') => true,
            // `$'…'` and `$"…"` are ANSI-C / locale quoting in bash.
            Some('\'' | '"') => !in_double_quotes,
            _ => false,
        };
        if !expands {
            if in_double_quotes {
                self.word.push_quoted('$');
            } else {
                self.word.push_plain('$');
            }
            self.pos += 1;
            return Ok(());
        }
        let token: String = match next {
            Some('(') => "$(".into(),
            Some('{') => "${".into(),
            _ => self.chars[self.pos..]
                .iter()
                .take_while(|c| !c.is_whitespace() && **c != '|' && **c != '"')
                .take(32)
                .collect(),
        };
        if token == "$(" {
            return Err(syntax(
                "$(",
                "'$(' (command substitution) is not supported: no shell runs here.",
                "Run the inner command as its own call and pass its result literally.",
            ));
        }
        Err(syntax(
            token.clone(),
            format!("'{token}' looks like a shell variable; this mode has no variables or environment."),
            "Write the value literally, or put the text in single quotes if the '$' is data (e.g. awk '{print $3}').",
        ))
    }

    fn pipe(&mut self) -> Result<(), Refusal> {
        match self.peek(1) {
            Some('|') => Err(syntax(
                "||",
                "'||' (run on failure) is not supported: no shell runs here.",
                "Send one pipeline per call; quote '||' if it is data, e.g. rg 'a||b'.",
            )),
            Some('&') => Err(syntax(
                "|&",
                "'|&' (pipe stderr too) is not supported.",
                "Use a plain '|'; stderr is returned with the result.",
            )),
            _ => {
                self.end_word();
                self.end_stage(false)?;
                self.pos += 1;
                Ok(())
            }
        }
    }

    fn ampersand(&self) -> Refusal {
        match self.peek(1) {
            Some('&') => syntax(
                "&&",
                "'&&' (command list) is not supported: no shell runs here.",
                "Send one pipeline per call; quote '&&' if it is data.",
            ),
            Some('>') => Refusal::new(
                GuardReason::Redirect,
                "&>",
                "The redirection '&>' is not supported: no shell runs here.",
                "Use tee FILE to write files; stderr is returned with the result.",
            ),
            _ => syntax(
                "&",
                "'&' (background job) is not supported: every pipeline runs to completion.",
                "Drop the '&'; quote it if it is data, e.g. sed 's/and/\\&/'.",
            ),
        }
    }

    fn redirect(&self, c: char) -> Refusal {
        let next = self.peek(1);
        if next == Some('(') {
            let token = format!("{c}(");
            return syntax(
                token.clone(),
                format!("'{token}' (process substitution) is not supported: no shell runs here."),
                "Run the inner command as its own call, or pass a file as an argument.",
            );
        }
        let mut token = String::new();
        if self.word.is_fd_number() {
            token.push_str(&self.word.text);
        }
        token.push(c);
        if let Some(n @ ('>' | '<' | '&' | '|')) = next {
            token.push(n);
            if n == '&' {
                if let Some(d) = self.peek(2).filter(|d| d.is_ascii_digit() || *d == '-') {
                    token.push(d);
                }
            }
        }
        let suggestion = if c == '<' {
            "Pass the file as an argument instead of <, e.g. sort data.txt."
        } else {
            "Use tee FILE to write files (tee -a FILE to append); quote '>' if it is data, e.g. awk '$3 > 5'."
        };
        Refusal::new(
            GuardReason::Redirect,
            token.clone(),
            format!("The redirection '{token}' is not supported: no shell runs here."),
            suggestion,
        )
    }

    fn snippet(&self, start: usize) -> String {
        self.chars[start..].iter().take(40).collect()
    }
}

fn syntax(
    token: impl Into<String>,
    detail: impl Into<String>,
    suggestion: impl Into<String>,
) -> Refusal {
    Refusal::new(GuardReason::DisallowedSyntax, token, detail, suggestion)
}

fn parse_error(token: &str, detail: &str, suggestion: &str) -> Refusal {
    Refusal::new(GuardReason::ParseError, token, detail, suggestion)
}

fn too_many_stages() -> Refusal {
    Refusal::new(
        GuardReason::TooManyStages,
        "|",
        format!("The pipeline has more than {MAX_STAGES} stages; at most {MAX_STAGES} run in one call."),
        "Split the work over several calls: end one with `| tee step1.txt` (an intermediate file) and start the next from that file (e.g. `awk '…' step1.txt | …`).",
    )
}

fn unbalanced(quote: char, snippet: String) -> Refusal {
    Refusal::new(
        GuardReason::ParseError,
        snippet.clone(),
        format!("Unbalanced {quote} quote starting at: {snippet}"),
        format!("Close the {quote} quote; to put a {quote} inside, use the other kind of quotes or a backslash outside quotes."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(command: &str) -> Vec<Vec<String>> {
        parse(command)
            .expect("parses")
            .into_iter()
            .map(|s| s.words.into_iter().map(|w| w.text).collect())
            .collect()
    }

    fn reason(command: &str) -> (GuardReason, String) {
        let r = parse(command).expect_err("refused");
        (r.reason, r.token)
    }

    #[test]
    fn at_most_the_stage_limit_is_accepted() {
        let pipeline = |n: usize| format!("jq -n 1{}", " | tr a b".repeat(n - 1));
        assert_eq!(
            parse(&pipeline(MAX_STAGES)).expect("accepted").len(),
            MAX_STAGES
        );
        for n in [MAX_STAGES + 1, 1_500] {
            let r = parse(&pipeline(n)).expect_err("refused");
            assert_eq!(r.reason, GuardReason::TooManyStages);
            assert!(r.detail.contains("more than 32 stages"), "{}", r.detail);
            assert!(r.suggestion.contains("tee"), "{}", r.suggestion);
        }
    }

    #[test]
    fn splits_stages_on_unquoted_pipes_only() {
        assert_eq!(
            texts("tail -n 100 app.log | rg \"ERROR\" | awk '{print $3}' | sort -u"),
            vec![
                vec!["tail", "-n", "100", "app.log"],
                vec!["rg", "ERROR"],
                vec!["awk", "{print $3}"],
                vec!["sort", "-u"],
            ]
        );
        assert_eq!(texts("rg 'a|b' x"), vec![vec!["rg", "a|b", "x"]]);
        assert_eq!(texts("rg \"|\""), vec![vec!["rg", "|"]]);
        assert_eq!(texts("rg \\| x"), vec![vec!["rg", "|", "x"]]);
        assert_eq!(
            texts("tail app.log|rg x"),
            vec![vec!["tail", "app.log"], vec!["rg", "x"]]
        );
    }

    fn stage_texts(command: &str) -> Vec<String> {
        parse(command)
            .expect("parses")
            .into_iter()
            .map(|s| s.text)
            .collect()
    }

    #[test]
    fn each_stage_keeps_its_text_as_written() {
        assert_eq!(
            stage_texts("tail -n 100 app.log | rg \"ERROR\" | awk '{print $3}' | sort -u"),
            [
                "tail -n 100 app.log",
                "rg \"ERROR\"",
                "awk '{print $3}'",
                "sort -u"
            ]
        );
        // A quoted or escaped `|` is part of its stage; inner spacing and tabs stay as written.
        assert_eq!(
            stage_texts("  rg  'a|b'\tx\t|\thead   -n\t2  \n"),
            ["rg  'a|b'\tx", "head   -n\t2"]
        );
        assert_eq!(stage_texts("rg \\| x|wc -l"), ["rg \\| x", "wc -l"]);
        assert_eq!(stage_texts("rg \"a | b\" ''"), ["rg \"a | b\" ''"]);
        assert_eq!(stage_texts("pwd"), ["pwd"]);
        // Non-ASCII text is cut on character boundaries.
        assert_eq!(stage_texts("rg 'é|ü' | tr é e"), ["rg 'é|ü'", "tr é e"]);
    }

    #[test]
    fn quoting_follows_posix_rules() {
        assert_eq!(texts(r#"rg "\.rs$""#), vec![vec!["rg", r"\.rs$"]]);
        assert_eq!(
            texts(r#"echo "a\"b" 'c\d' e\ f"#)[0],
            vec!["echo", "a\"b", "c\\d", "e f"]
        );
        assert_eq!(texts("awk '$3 > 5'")[0], vec!["awk", "$3 > 5"]);
        assert_eq!(texts("a '' \"\"")[0], vec!["a", "", ""]);
        assert_eq!(texts("rg #TODO src")[0], vec!["rg", "#TODO", "src"]);
        assert_eq!(texts("rg foo$ x")[0], vec!["rg", "foo$", "x"]);
        assert_eq!(texts("rg x\n")[0], vec!["rg", "x"]);
        assert_eq!(texts("rg a\\\nb")[0], vec!["rg", "ab"]);
    }

    #[test]
    fn remembers_quoting_and_unquoted_glob_positions() {
        let stages = parse("ls *.rs 'a*' \"src\"/x?[ab]").expect("parses");
        let w = &stages[0].words;
        assert_eq!((w[1].quoted, w[1].glob_chars.clone()), (false, vec![0]));
        assert_eq!((w[2].quoted, w[2].glob_chars.clone()), (true, vec![]));
        assert_eq!(w[3].text, "src/x?[ab]");
        assert_eq!((w[3].quoted, w[3].glob_chars.clone()), (true, vec![5, 6]));
    }

    #[test]
    fn refuses_shell_syntax_with_the_token() {
        for (cmd, token) in [
            ("a ; b", ";"),
            ("a && b", "&&"),
            ("a || b", "||"),
            ("a & b", "&"),
            ("a `b`", "`"),
            ("a $(b)", "$("),
            ("diff <(a) b", "<("),
            ("a >(b)", ">("),
            ("a \"$(b)\"", "$("),
            ("a (b)", "("),
            ("a\nb", "newline"),
            ("rg $HOME", "$HOME"),
            ("rg ${X}", "${"),
            ("rg \"$USER\"", "$USER"),
            ("cat ~/x", "~"),
            ("a |& b", "|&"),
        ] {
            assert_eq!(
                reason(cmd),
                (GuardReason::DisallowedSyntax, token.to_string()),
                "{cmd}"
            );
        }
    }

    #[test]
    fn refuses_redirections_with_the_token_and_a_suggestion() {
        for (cmd, token) in [
            ("a > f", ">"),
            ("a >> f", ">>"),
            ("a < f", "<"),
            ("a 2> f", "2>"),
            ("a &> f", "&>"),
            ("a 2>&1", "2>&1"),
            ("a>f", ">"),
            ("a << EOF", "<<"),
        ] {
            assert_eq!(
                reason(cmd),
                (GuardReason::Redirect, token.to_string()),
                "{cmd}"
            );
        }
        let r = parse("sort < f").expect_err("refused");
        assert!(r.suggestion.contains("instead of <"), "{}", r.suggestion);
        let r = parse("sort x > f").expect_err("refused");
        assert!(r.suggestion.contains("tee FILE"), "{}", r.suggestion);
    }

    #[test]
    fn refuses_empty_stages_and_unbalanced_quotes_as_parse_errors() {
        for cmd in [
            "", "   ", "| a", "a |", "a | | b", "a 'b", "a \"b", "a |  ", "rg a\0b",
        ] {
            assert_eq!(
                parse(cmd).expect_err(cmd).reason,
                GuardReason::ParseError,
                "{cmd:?}"
            );
        }
    }

    #[test]
    fn quoted_syntax_characters_are_data() {
        assert_eq!(
            texts("sed 's/a/b/;s/c/d/' f | rg '&&' | rg \"a > b\" | rg '$(x)' | rg '~' | rg 'x`y'")
                .len(),
            6
        );
        assert_eq!(texts("rg \\$HOME")[0], vec!["rg", "$HOME"]);
        assert_eq!(texts("rg x~y")[0], vec!["rg", "x~y"]);
    }
}
