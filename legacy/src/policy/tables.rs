//! One option table per command: every option the installed tool has (so that GNU prefix
//! abbreviations are judged against the full list, as the tool judges them), each marked allowed
//! or refused with the reason.
//!
//! Versions modelled: GNU coreutils 9.1, GNU sed 4.9, gawk 5.2, jq 1.6, ripgrep 13, fd 8.6.
//! Anything a table does not list is refused as unknown, so a newer tool's new options stay
//! closed until someone reviews them and adds them here.

use super::getopt::{allow, deny, Arity::*, OptDef, Syntax, Table};
use crate::plan::CommandName;

/// The parser most GNU tools use: `getopt_long` with permutation (options may follow operands)
/// and no `-W` gateway.
const GETOPT_LONG: Syntax = Syntax::Gnu {
    permute: true,
    w_long: false,
};

/// A GNU tool's options followed by the `--help` and `--version` that every GNU program takes
/// (coreutils' and sed's standard pair), both allowed, last as the tools list them.
macro_rules! gnu_options {
    ($($opt:expr),* $(,)?) => {
        &[
            $($opt,)*
            allow(None, &["help"], Flag, ""),
            allow(None, &["version"], Flag, ""),
        ]
    };
}

const FOLLOW: &str = "it follows symlinks, possibly out of the workspace";

const UNSEEN_FILE: &str = "it reads a file the policy never sees";

const HANG: &str = "follow mode never ends and would hang the call";
const NO_HELP: &str = "help and version texts are not available for this command";
/// Why GNU ls's long format is refused (see [`LS`]).
pub(super) const LONG_FORMAT: &str = "GNU ls's long format shows where every symlink points, also outside the workspace; for details run ls -l (with only -a, -A or -1, and at most one directory) as the whole command, not in a pipeline: that is the built-in listing, which hides such targets";

/// `tail` (GNU coreutils).
pub static TAIL: Table = Table {
    command: CommandName::Tail,
    syntax: GETOPT_LONG,
    obsolete_count: true,
    options: gnu_options![
        allow(Some('c'), &["bytes"], Required, "5"),
        deny(Some('f'), &[], Flag, HANG),
        deny(None, &["follow"], Optional, HANG),
        deny(Some('F'), &[], Flag, HANG),
        allow(Some('n'), &["lines"], Required, "5"),
        deny(
            None,
            &["max-unchanged-stats"],
            Required,
            "it only tunes follow mode, which hangs",
        ),
        deny(
            None,
            &["pid"],
            Required,
            "it only applies to follow mode, which hangs",
        ),
        deny(
            None,
            &["-presume-input-pipe"],
            Flag,
            "it is an internal testing option",
        ),
        allow(Some('q'), &["quiet", "silent"], Flag, ""),
        deny(
            None,
            &["retry"],
            Flag,
            "it keeps retrying an unreadable file and can hang",
        ),
        deny(
            Some('s'),
            &["sleep-interval"],
            Required,
            "it only tunes follow mode, which hangs",
        ),
        allow(Some('v'), &["verbose"], Flag, ""),
        allow(Some('z'), &["zero-terminated"], Flag, ""),
    ],
};

/// `head` (GNU coreutils).
pub static HEAD: Table = Table {
    command: CommandName::Head,
    syntax: GETOPT_LONG,
    obsolete_count: true,
    options: gnu_options![
        allow(Some('c'), &["bytes"], Required, "5"),
        allow(Some('n'), &["lines"], Required, "5"),
        deny(
            None,
            &["-presume-input-pipe"],
            Flag,
            "it is an internal testing option",
        ),
        allow(Some('q'), &["quiet", "silent"], Flag, ""),
        allow(Some('v'), &["verbose"], Flag, ""),
        allow(Some('z'), &["zero-terminated"], Flag, ""),
    ],
};

/// `wc` (GNU coreutils).
pub static WC: Table = Table {
    command: CommandName::Wc,
    syntax: GETOPT_LONG,
    obsolete_count: false,
    options: gnu_options![
        allow(Some('c'), &["bytes"], Flag, ""),
        allow(Some('m'), &["chars"], Flag, ""),
        allow(Some('l'), &["lines"], Flag, ""),
        deny(
            None,
            &["files0-from"],
            Required,
            "it reads file names from a file the policy never sees, and echoes their contents in errors",
        ),
        allow(Some('L'), &["max-line-length"], Flag, ""),
        allow(Some('w'), &["words"], Flag, ""),
    ],
};

/// `sort` (GNU coreutils).
pub static SORT: Table = Table {
    command: CommandName::Sort,
    syntax: GETOPT_LONG,
    obsolete_count: false,
    options: gnu_options![
        allow(Some('b'), &["ignore-leading-blanks"], Flag, ""),
        allow(Some('c'), &[], Flag, ""),
        allow(None, &["check"], Optional, ""),
        allow(Some('C'), &[], Flag, ""),
        deny(
            None,
            &["compress-program"],
            Required,
            "it runs another program",
        ),
        allow(None, &["debug"], Flag, ""),
        allow(Some('d'), &["dictionary-order"], Flag, ""),
        allow(Some('f'), &["ignore-case"], Flag, ""),
        deny(
            None,
            &["files0-from"],
            Required,
            "it reads file names from a file the policy never sees, and prints their contents",
        ),
        allow(Some('g'), &["general-numeric-sort"], Flag, ""),
        allow(Some('h'), &["human-numeric-sort"], Flag, ""),
        allow(Some('i'), &["ignore-nonprinting"], Flag, ""),
        allow(Some('k'), &["key"], Required, "1,1"),
        allow(Some('m'), &["merge"], Flag, ""),
        allow(Some('M'), &["month-sort"], Flag, ""),
        allow(Some('n'), &["numeric-sort"], Flag, ""),
        deny(
            Some('o'),
            &["output"],
            Required,
            "it writes a file; use | tee FILE to write files",
        ),
        allow(Some('R'), &["random-sort"], Flag, ""),
        deny(None, &["random-source"], Required, UNSEEN_FILE,),
        allow(Some('r'), &["reverse"], Flag, ""),
        allow(None, &["sort"], Required, "numeric"),
        allow(Some('s'), &["stable"], Flag, ""),
        allow(Some('S'), &["buffer-size"], Required, "1M"),
        allow(Some('t'), &["field-separator"], Required, ","),
        deny(
            Some('T'),
            &["temporary-directory"],
            Required,
            "it creates files in another directory",
        ),
        allow(Some('u'), &["unique"], Flag, ""),
        allow(Some('V'), &["version-sort"], Flag, ""),
        deny(Some('y'), &[], Required, "it is an obsolete no-op"),
        allow(Some('z'), &["zero-terminated"], Flag, ""),
        deny(None, &["parallel"], Required, "it can exhaust the machine"),
        deny(
            None,
            &["batch-size"],
            Required,
            "it can exhaust file descriptors",
        ),
    ],
};

/// `tr` (GNU coreutils). It stops at the first operand.
pub static TR: Table = Table {
    command: CommandName::Tr,
    syntax: Syntax::Gnu {
        permute: false,
        w_long: false,
    },
    obsolete_count: false,
    options: gnu_options![
        allow(Some('c'), &["complement"], Flag, ""),
        allow(Some('C'), &[], Flag, ""),
        allow(Some('d'), &["delete"], Flag, ""),
        allow(Some('s'), &["squeeze-repeats"], Flag, ""),
        allow(Some('t'), &["truncate-set1"], Flag, ""),
    ],
};

const IN_PLACE: &str = "it edits files in place; use | tee FILE to write files";

/// `sed` (GNU sed 4.9). `--sandbox` is always added in front.
pub static SED: Table = Table {
    command: CommandName::Sed,
    syntax: GETOPT_LONG,
    obsolete_count: false,
    options: gnu_options![
        allow(Some('b'), &["binary"], Flag, ""),
        allow(None, &["debug"], Flag, ""),
        allow(Some('e'), &["expression"], Required, "p"),
        deny(
            Some('f'),
            &["file"],
            Required,
            "it reads the script from a file; pass the script inline or with -e",
        ),
        deny(
            None,
            &["follow-symlinks"],
            Flag,
            "it follows symlinks while editing in place",
        ),
        deny(Some('i'), &["in-place"], Optional, IN_PLACE),
        allow(Some('l'), &["line-length"], Required, "70"),
        allow(Some('n'), &["quiet", "silent"], Flag, ""),
        allow(None, &["posix"], Flag, ""),
        allow(Some('E'), &["regexp-extended"], Flag, ""),
        allow(Some('r'), &[], Flag, ""),
        allow(None, &["sandbox"], Flag, ""),
        allow(Some('s'), &["separate"], Flag, ""),
        allow(Some('u'), &["unbuffered"], Flag, ""),
        allow(Some('z'), &["null-data", "zero-terminated"], Flag, ""),
    ],
};

const PROGRAM_FILE: &str = "it reads program text from a file; pass the program inline";

/// `awk` (GNU awk 5.2). `--sandbox` is always added in front. gawk stops at the first operand.
pub static AWK: Table = Table {
    command: CommandName::Awk,
    syntax: Syntax::Gnu {
        permute: false,
        w_long: true,
    },
    obsolete_count: false,
    options: &[
        allow(Some('F'), &["field-separator"], Required, ":"),
        deny(Some('f'), &["file"], Required, PROGRAM_FILE),
        allow(Some('v'), &["assign"], Required, "x=1"),
        allow(Some('b'), &["characters-as-bytes"], Flag, ""),
        allow(Some('c'), &["traditional"], Flag, ""),
        allow(Some('C'), &["copyright"], Flag, ""),
        deny(Some('d'), &["dump-variables"], Optional, "it writes a file"),
        deny(
            Some('D'),
            &["debug"],
            Optional,
            "it starts the debugger, which reads commands from a file",
        ),
        allow(Some('e'), &["source"], Required, "BEGIN{}"),
        deny(Some('E'), &["exec"], Required, PROGRAM_FILE),
        allow(Some('g'), &["gen-pot"], Flag, ""),
        allow(Some('h'), &["help"], Flag, ""),
        deny(
            Some('i'),
            &["include"],
            Required,
            "it reads program text from a file (and -i inplace edits files)",
        ),
        allow(Some('I'), &["trace"], Flag, ""),
        deny(
            Some('l'),
            &["load"],
            Required,
            "it loads native extension code",
        ),
        allow(Some('L'), &["lint"], Optional, ""),
        allow(Some('M'), &["bignum"], Flag, ""),
        allow(Some('n'), &["non-decimal-data"], Flag, ""),
        allow(Some('N'), &["use-lc-numeric"], Flag, ""),
        deny(Some('o'), &["pretty-print"], Optional, "it writes a file"),
        allow(Some('O'), &["optimize"], Flag, ""),
        deny(Some('p'), &["profile"], Optional, "it writes a file"),
        allow(Some('P'), &["posix"], Flag, ""),
        allow(Some('r'), &["re-interval"], Flag, ""),
        allow(Some('s'), &["no-optimize"], Flag, ""),
        allow(Some('S'), &["sandbox"], Flag, ""),
        allow(Some('t'), &["lint-old"], Flag, ""),
        allow(Some('V'), &["version"], Flag, ""),
        deny(
            None,
            &["nostalgia"],
            Flag,
            "it is an undocumented joke option",
        ),
        deny(
            None,
            &["persist"],
            Optional,
            "it uses a persistent memory file",
        ),
    ],
};

/// `ls` (GNU coreutils), when it runs as a real program inside a pipeline (or with options the
/// built-in listing lacks). Every option that turns the long format on is refused, whatever
/// comes after it: that format prints each symlink's target, and no result may show where a link
/// outside the workspace points. `-D`/`--dired` counts, since coreutils 9.3 makes it imply the
/// long format; `--format` is checked by value in the policy (`long` and `verbose` refused).
pub static LS: Table = Table {
    command: CommandName::Ls,
    syntax: GETOPT_LONG,
    obsolete_count: false,
    options: gnu_options![
        allow(Some('a'), &["all"], Flag, ""),
        allow(Some('A'), &["almost-all"], Flag, ""),
        allow(None, &["author"], Flag, ""),
        allow(Some('b'), &["escape"], Flag, ""),
        allow(None, &["block-size"], Required, "K"),
        allow(Some('B'), &["ignore-backups"], Flag, ""),
        allow(Some('c'), &[], Flag, ""),
        allow(Some('C'), &[], Flag, ""),
        allow(None, &["color"], Optional, ""),
        allow(Some('d'), &["directory"], Flag, ""),
        deny(Some('D'), &["dired"], Flag, LONG_FORMAT),
        allow(Some('f'), &[], Flag, ""),
        allow(Some('F'), &["classify"], Optional, ""),
        allow(None, &["file-type"], Flag, ""),
        allow(None, &["format"], Required, "commas"),
        deny(None, &["full-time"], Flag, LONG_FORMAT),
        deny(Some('g'), &[], Flag, LONG_FORMAT),
        allow(None, &["group-directories-first"], Flag, ""),
        allow(Some('G'), &["no-group"], Flag, ""),
        allow(Some('h'), &["human-readable"], Flag, ""),
        allow(None, &["si"], Flag, ""),
        deny(Some('H'), &["dereference-command-line"], Flag, FOLLOW,),
        deny(
            None,
            &["dereference-command-line-symlink-to-dir"],
            Flag,
            FOLLOW,
        ),
        allow(None, &["hide"], Required, "x"),
        deny(None, &["hyperlink"], Optional, "it reveals the host name"),
        allow(None, &["indicator-style"], Required, "slash"),
        allow(Some('i'), &["inode"], Flag, ""),
        allow(Some('I'), &["ignore"], Required, "x"),
        allow(Some('k'), &["kibibytes"], Flag, ""),
        deny(Some('l'), &[], Flag, LONG_FORMAT),
        deny(Some('L'), &["dereference"], Flag, FOLLOW,),
        allow(Some('m'), &[], Flag, ""),
        deny(Some('n'), &["numeric-uid-gid"], Flag, LONG_FORMAT),
        allow(Some('N'), &["literal"], Flag, ""),
        deny(Some('o'), &[], Flag, LONG_FORMAT),
        allow(Some('p'), &[], Flag, ""),
        allow(Some('q'), &["hide-control-chars"], Flag, ""),
        allow(None, &["show-control-chars"], Flag, ""),
        allow(Some('Q'), &["quote-name"], Flag, ""),
        allow(None, &["quoting-style"], Required, "literal"),
        allow(Some('r'), &["reverse"], Flag, ""),
        allow(Some('R'), &["recursive"], Flag, ""),
        allow(Some('s'), &["size"], Flag, ""),
        allow(Some('S'), &[], Flag, ""),
        allow(None, &["sort"], Required, "size"),
        allow(None, &["time"], Required, "ctime"),
        allow(None, &["time-style"], Required, "iso"),
        allow(Some('t'), &[], Flag, ""),
        allow(Some('T'), &["tabsize"], Required, "8"),
        allow(Some('u'), &[], Flag, ""),
        allow(Some('U'), &[], Flag, ""),
        allow(Some('v'), &[], Flag, ""),
        allow(Some('w'), &["width"], Required, "80"),
        allow(Some('x'), &[], Flag, ""),
        allow(Some('X'), &[], Flag, ""),
        allow(Some('Z'), &["context"], Flag, ""),
        allow(None, &["zero"], Flag, ""),
        allow(Some('1'), &[], Flag, ""),
    ],
};

/// The built-in `tee`, parsed like GNU tee so that `--a` still means `--append`.
pub static TEE: Table = Table {
    command: CommandName::Tee,
    syntax: GETOPT_LONG,
    obsolete_count: false,
    options: &[
        allow(Some('a'), &["append"], Flag, ""),
        deny(
            Some('i'),
            &["ignore-interrupts"],
            Flag,
            "the built-in tee has no signal handling to change",
        ),
        deny(
            Some('p'),
            &[],
            Flag,
            "the built-in tee has no output-error modes",
        ),
        deny(
            None,
            &["output-error"],
            Optional,
            "the built-in tee has no output-error modes",
        ),
        deny(None, &["help"], Flag, NO_HELP),
        deny(None, &["version"], Flag, NO_HELP),
    ],
};

/// `rg` (ripgrep 13): exact long names only. `--no-config` is always added in front.
pub static RG: Table = Table {
    command: CommandName::Rg,
    syntax: Syntax::Exact,
    obsolete_count: false,
    options: &[
        allow(Some('A'), &["after-context"], Required, "1"),
        allow(None, &["auto-hybrid-regex"], Flag, ""),
        allow(Some('B'), &["before-context"], Required, "1"),
        allow(None, &["binary"], Flag, ""),
        allow(None, &["block-buffered"], Flag, ""),
        allow(Some('b'), &["byte-offset"], Flag, ""),
        allow(Some('s'), &["case-sensitive"], Flag, ""),
        allow(None, &["color"], Required, "never"),
        allow(None, &["colors"], Required, "match:fg:red"),
        allow(None, &["column"], Flag, ""),
        allow(Some('C'), &["context"], Required, "1"),
        allow(None, &["context-separator"], Required, "--"),
        allow(None, &["no-context-separator"], Flag, ""),
        allow(Some('c'), &["count"], Flag, ""),
        allow(None, &["count-matches"], Flag, ""),
        allow(None, &["crlf"], Flag, ""),
        deny(
            None,
            &["debug"],
            Flag,
            "it prints internal paths and configuration",
        ),
        deny(
            None,
            &["trace"],
            Flag,
            "it prints internal paths and configuration",
        ),
        deny(None, &["dfa-size-limit"], Required, "it can exhaust memory"),
        deny(
            None,
            &["regex-size-limit"],
            Required,
            "it can exhaust memory",
        ),
        allow(Some('E'), &["encoding"], Required, "utf-8"),
        allow(None, &["engine"], Required, "default"),
        allow(None, &["field-context-separator"], Required, "-"),
        allow(None, &["field-match-separator"], Required, ":"),
        deny(
            Some('f'),
            &["file"],
            Required,
            "it reads patterns from a file and echoes them in errors; pass patterns with -e",
        ),
        allow(None, &["files"], Flag, ""),
        allow(Some('l'), &["files-with-matches"], Flag, ""),
        allow(None, &["files-without-match"], Flag, ""),
        allow(Some('F'), &["fixed-strings"], Flag, ""),
        deny(Some('L'), &["follow"], Flag, FOLLOW),
        allow(Some('g'), &["glob"], Required, "*.rs"),
        allow(None, &["glob-case-insensitive"], Flag, ""),
        allow(Some('h'), &["help"], Flag, ""),
        allow(None, &["heading"], Flag, ""),
        allow(None, &["no-heading"], Flag, ""),
        allow(Some('.'), &["hidden"], Flag, ""),
        allow(None, &["iglob"], Required, "*.rs"),
        allow(Some('i'), &["ignore-case"], Flag, ""),
        deny(None, &["ignore-file"], Required, UNSEEN_FILE),
        allow(None, &["ignore-file-case-insensitive"], Flag, ""),
        allow(None, &["include-zero"], Flag, ""),
        allow(Some('v'), &["invert-match"], Flag, ""),
        allow(None, &["json"], Flag, ""),
        allow(None, &["line-buffered"], Flag, ""),
        allow(Some('n'), &["line-number"], Flag, ""),
        allow(Some('N'), &["no-line-number"], Flag, ""),
        allow(Some('x'), &["line-regexp"], Flag, ""),
        allow(Some('M'), &["max-columns"], Required, "100"),
        allow(None, &["max-columns-preview"], Flag, ""),
        allow(Some('m'), &["max-count"], Required, "1"),
        allow(None, &["max-depth"], Required, "2"),
        allow(None, &["max-filesize"], Required, "1M"),
        allow(None, &["mmap"], Flag, ""),
        allow(None, &["no-mmap"], Flag, ""),
        allow(Some('U'), &["multiline"], Flag, ""),
        allow(None, &["multiline-dotall"], Flag, ""),
        allow(None, &["no-config"], Flag, ""),
        allow(Some('I'), &["no-filename"], Flag, ""),
        allow(Some('H'), &["with-filename"], Flag, ""),
        allow(None, &["no-ignore"], Flag, ""),
        allow(None, &["no-ignore-dot"], Flag, ""),
        allow(None, &["no-ignore-exclude"], Flag, ""),
        allow(None, &["no-ignore-files"], Flag, ""),
        allow(None, &["no-ignore-global"], Flag, ""),
        allow(None, &["no-ignore-messages"], Flag, ""),
        allow(None, &["no-ignore-parent"], Flag, ""),
        allow(None, &["no-ignore-vcs"], Flag, ""),
        allow(None, &["no-messages"], Flag, ""),
        allow(None, &["no-pcre2-unicode"], Flag, ""),
        allow(None, &["no-require-git"], Flag, ""),
        allow(None, &["no-unicode"], Flag, ""),
        allow(Some('0'), &["null"], Flag, ""),
        allow(None, &["null-data"], Flag, ""),
        allow(None, &["one-file-system"], Flag, ""),
        allow(Some('o'), &["only-matching"], Flag, ""),
        allow(None, &["passthru"], Flag, ""),
        allow(None, &["path-separator"], Required, "/"),
        allow(Some('P'), &["pcre2"], Flag, ""),
        allow(None, &["pcre2-version"], Flag, ""),
        deny(
            None,
            &["pre"],
            Required,
            "it runs a program on every searched file",
        ),
        deny(
            None,
            &["pre-glob"],
            Required,
            "it configures --pre, which runs programs",
        ),
        allow(None, &["no-pre"], Flag, ""),
        allow(Some('p'), &["pretty"], Flag, ""),
        allow(Some('q'), &["quiet"], Flag, ""),
        allow(Some('e'), &["regexp"], Required, "x"),
        allow(Some('r'), &["replace"], Required, "y"),
        deny(
            Some('z'),
            &["search-zip"],
            Flag,
            "it runs decompression programs",
        ),
        allow(Some('S'), &["smart-case"], Flag, ""),
        allow(None, &["sort"], Required, "path"),
        allow(None, &["sortr"], Required, "path"),
        allow(None, &["stats"], Flag, ""),
        allow(Some('a'), &["text"], Flag, ""),
        allow(Some('j'), &["threads"], Required, "1"),
        allow(None, &["trim"], Flag, ""),
        allow(Some('t'), &["type"], Required, "rust"),
        allow(None, &["type-add"], Required, "foo:*.foo"),
        allow(None, &["type-clear"], Required, "rust"),
        allow(None, &["type-list"], Flag, ""),
        allow(Some('T'), &["type-not"], Required, "rust"),
        allow(Some('u'), &["unrestricted"], Flag, ""),
        allow(Some('V'), &["version"], Flag, ""),
        allow(None, &["vimgrep"], Flag, ""),
        allow(Some('w'), &["word-regexp"], Flag, ""),
        deny(
            None,
            &["hostname-bin"],
            Required,
            "it runs a program (ripgrep 14+)",
        ),
        deny(
            Some('X'),
            &["index"],
            Flag,
            "it writes an index (unstable ripgrep builds)",
        ),
    ],
};

/// `fd` (fd-find 8.6): exact long names only.
pub static FD: Table = Table {
    command: CommandName::Fd,
    syntax: Syntax::Exact,
    obsolete_count: false,
    options: &[
        allow(Some('H'), &["hidden"], Flag, ""),
        allow(Some('I'), &["no-ignore"], Flag, ""),
        allow(None, &["no-ignore-vcs"], Flag, ""),
        allow(None, &["no-ignore-parent"], Flag, ""),
        allow(None, &["no-global-ignore-file"], Flag, ""),
        allow(Some('u'), &["unrestricted"], Flag, ""),
        allow(Some('s'), &["case-sensitive"], Flag, ""),
        allow(Some('i'), &["ignore-case"], Flag, ""),
        allow(Some('g'), &["glob"], Flag, ""),
        allow(None, &["regex"], Flag, ""),
        allow(Some('F'), &["fixed-strings"], Flag, ""),
        allow(None, &["and"], Required, "x"),
        deny(
            Some('a'),
            &["absolute-path"],
            Flag,
            "absolute paths start with the workspace's host path, which no result shows; fd's paths are relative to the current directory (pwd shows which), so leave -a out",
        ),
        deny(
            Some('l'),
            &["list-details"],
            Flag,
            "it runs ls -l on every result, whose long format shows where symlinks point; run ls -l DIR on its own (the built-in listing) for details",
        ),
        deny(Some('L'), &["follow", "dereference"], Flag, FOLLOW),
        deny(
            Some('p'),
            &["full-path"],
            Flag,
            "it matches the pattern against the absolute path, so a pattern can probe the workspace's host path; filter the relative paths instead, e.g. fd -t f | rg 'src/.*test'",
        ),
        allow(Some('0'), &["print0"], Flag, ""),
        allow(Some('d'), &["max-depth"], Required, "2"),
        allow(None, &["min-depth"], Required, "1"),
        allow(None, &["exact-depth"], Required, "1"),
        allow(Some('E'), &["exclude"], Required, "*.o"),
        allow(None, &["prune"], Flag, ""),
        allow(Some('t'), &["type"], Required, "f"),
        allow(Some('e'), &["extension"], Required, "rs"),
        allow(Some('S'), &["size"], Required, "+1k"),
        allow(
            None,
            &[
                "changed-within",
                "change-newer-than",
                "newer",
                "changed-after",
            ],
            Required,
            "2weeks",
        ),
        allow(
            None,
            &["changed-before", "change-older-than", "older"],
            Required,
            "2weeks",
        ),
        allow(Some('o'), &["owner"], Required, "root"),
        deny(
            Some('x'),
            &["exec"],
            Required,
            "it runs a program for every result",
        ),
        deny(
            Some('X'),
            &["exec-batch"],
            Required,
            "it runs a program on the results",
        ),
        deny(
            None,
            &["batch-size"],
            Required,
            "it only configures --exec-batch, which runs programs",
        ),
        deny(None, &["ignore-file"], Required, UNSEEN_FILE),
        allow(Some('c'), &["color"], Required, "never"),
        allow(Some('j'), &["threads"], Required, "1"),
        allow(None, &["max-results"], Required, "1"),
        allow(Some('1'), &[], Flag, ""),
        allow(Some('q'), &["quiet"], Flag, ""),
        allow(None, &["show-errors"], Flag, ""),
        deny(
            Some('C'),
            &["base-directory"],
            Required,
            "it changes the search directory behind the path checks; pass directories as operands",
        ),
        allow(None, &["path-separator"], Required, "/"),
        deny(
            None,
            &["search-path"],
            Required,
            "it names search directories behind the path checks; pass them as operands",
        ),
        allow(None, &["strip-cwd-prefix"], Flag, ""),
        allow(None, &["one-file-system", "mount", "xdev"], Flag, ""),
        allow(Some('h'), &["help"], Flag, ""),
        allow(Some('V'), &["version"], Flag, ""),
    ],
};

const READS_FILE: &str =
    "it reads a file the policy never sees; pipe the file in or pass it as an operand";

/// `jq` (1.6): exact long names, clusters of flags.
pub static JQ: Table = Table {
    command: CommandName::Jq,
    syntax: Syntax::Jq,
    obsolete_count: false,
    options: &[
        allow(Some('s'), &["slurp"], Flag, ""),
        allow(Some('r'), &["raw-output"], Flag, ""),
        allow(Some('j'), &["join-output"], Flag, ""),
        allow(Some('a'), &["ascii-output"], Flag, ""),
        allow(Some('c'), &["compact-output"], Flag, ""),
        allow(Some('C'), &["color-output"], Flag, ""),
        allow(Some('M'), &["monochrome-output"], Flag, ""),
        allow(Some('n'), &["null-input"], Flag, ""),
        allow(Some('e'), &["exit-status"], Flag, ""),
        allow(Some('S'), &["sort-keys"], Flag, ""),
        allow(Some('R'), &["raw-input"], Flag, ""),
        allow(Some('h'), &["help"], Flag, ""),
        allow(Some('V'), &["version"], Flag, ""),
        allow(None, &["tab"], Flag, ""),
        allow(None, &["seq"], Flag, ""),
        allow(None, &["stream"], Flag, ""),
        allow(None, &["unbuffered"], Flag, ""),
        allow(None, &["indent"], Required, "2"),
        allow(None, &["arg"], Pair, "v"),
        allow(None, &["argjson"], Pair, "1"),
        allow(None, &["args"], Flag, ""),
        allow(None, &["jsonargs"], Flag, ""),
        deny(
            Some('f'),
            &["from-file"],
            Flag,
            "it makes jq read its program from a file; pass the program inline",
        ),
        deny(
            Some('L'),
            &["library-path"],
            Required,
            "it makes jq load modules from a directory",
        ),
        deny(None, &["rawfile"], Pair, READS_FILE),
        deny(None, &["slurpfile"], Pair, READS_FILE),
        deny(None, &["argfile"], Pair, READS_FILE),
        deny(None, &["run-tests"], Flag, READS_FILE),
        deny(None, &["debug-dump-disasm"], Flag, "it is a debugging aid"),
        deny(None, &["debug-trace"], Flag, "it is a debugging aid"),
    ],
};

/// The option table of a command (the built-in `tee` has one too, modelled on GNU tee).
pub fn table(command: CommandName) -> &'static Table {
    match command {
        CommandName::Tail => &TAIL,
        CommandName::Rg => &RG,
        CommandName::Awk => &AWK,
        CommandName::Sed => &SED,
        CommandName::Tr => &TR,
        CommandName::Jq => &JQ,
        CommandName::Wc => &WC,
        CommandName::Tee => &TEE,
        CommandName::Fd => &FD,
        CommandName::Ls => &LS,
        CommandName::Head => &HEAD,
        CommandName::Sort => &SORT,
    }
}

/// Every option definition of a command (for tests that walk the tables).
pub fn options(command: CommandName) -> &'static [OptDef] {
    table(command).options
}
