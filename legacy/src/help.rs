//! The texts shelpa shows people and models: `--help`, the MCP instructions, the missing-tool
//! status line, in either surface (see [`super::surface`]): the original surface's texts are the
//! recorded ones, the modern surface's are this reconstruction's own.

use super::plan::CommandName;
use super::surface::{self, ShelpaTools, Surface};
use super::tools::ToolPaths;

/// The Debian package that provides a command, for "install …" hints.
fn package_of(command: CommandName) -> &'static str {
    match command {
        CommandName::Rg => "ripgrep",
        CommandName::Fd => "fd-find",
        CommandName::Awk => "gawk",
        CommandName::Jq => "jq",
        CommandName::Sed => "sed",
        _ => "coreutils",
    }
}

/// The pipeline commands that are not installed (tee is built in and never missing).
pub fn missing(tools: &ToolPaths) -> Vec<CommandName> {
    CommandName::ALL
        .into_iter()
        .filter(|c| *c != CommandName::Tee && tools.get(*c).is_none())
        .collect()
}

/// `missing pipeline commands: fd (install fd-find)`, or empty when nothing is missing.
pub fn status_line(tools: &ToolPaths) -> String {
    let missing = missing(tools);
    if missing.is_empty() {
        return String::new();
    }
    let items: Vec<String> = missing
        .iter()
        .map(|c| format!("{} (install {})", c.as_str(), package_of(*c)))
        .collect();
    format!("missing pipeline commands: {}", items.join(", "))
}

/// The guidance given to the model in `initialize`: the recorded help in the original surface
/// (the same for every tool set, see [`surface`]); in the modern surface this reconstruction's
/// own guidance, naming only the tools of `set`.
pub fn instructions(surface: Surface, set: ShelpaTools) -> String {
    match surface {
        Surface::Original => surface::RECORDED_HELP.to_string(),
        Surface::Modern => modern_instructions(set),
    }
}

fn modern_instructions(set: ShelpaTools) -> String {
    let writers = match set {
        ShelpaTools::Pipe => "",
        ShelpaTools::Help => ", or the shelpa_write tool",
        ShelpaTools::All => ", or the shelpa_write and shelpa_tee tools",
    };
    let navigation = match set {
        ShelpaTools::All => " (also through the shelpa tool)",
        _ => "",
    };
    format!(
        "shelpa is a virtual pipeline shell over one workspace. Send one command line to \
shelpa_pipe, e.g. `tail -n 100 app.log | rg ERROR | awk '{{print $3}}' | sort -u`. \
Only these commands run, joined by `|` (no shell): tail rg awk sed tr jq wc tee fd ls head sort. \
`cd DIR` and `pwd` work on their own (not inside a pipeline){navigation} and the directory persists between calls. \
There are no redirections, no `;`/`&&`, no `sed -i`, no awk file output: the only way to write a file is \
`tee FILE` (overwrite) or `tee -a FILE` (append) at the end of a pipeline{writers}. \
Writes over 2 KiB need \"confirm_oversize\": true. Every write is also recorded under .shelpa/ for audit."
    )
}

/// `--help` in `surface`, serving `set`.
pub fn help_for(surface: Surface, set: ShelpaTools, tools: &ToolPaths) -> String {
    match surface {
        Surface::Original => original_help(set, tools),
        Surface::Modern => help(tools, set),
    }
}

/// The original surface's `--help`: the recorded text first, byte for byte, then
/// [`surface::STATUS_SEPARATOR`] and what only this build and machine can say (the tools served,
/// the companion tools and commands that are missing, the kernel's fence). Tests compare the part
/// above the separator with a golden file and leave the rest alone.
fn original_help(set: ShelpaTools, tools: &ToolPaths) -> String {
    let mut out = String::from(surface::RECORDED_HELP);
    out.push_str(surface::STATUS_SEPARATOR);
    out.push('\n');
    out.push_str(&format!(
        "tools served (--shelpa-tools {}): {}\n",
        set.as_str(),
        set.names().join(", ")
    ));
    let commands: Vec<&str> = CommandName::ALL.iter().map(|c| c.as_str()).collect();
    out.push_str(&format!(
        "pipeline commands here: {} (cd, pwd and ls also alone); without cwd a call runs in the session directory, the root until a cd\n",
        commands.join(" ")
    ));
    out.push_str(&format!(
        "MISSING: {} (companion tools of the original shelpa toolkit, not available in this reconstruction: MISSING_TOOL)\n",
        super::tools::COMPANION_TOOLS.join(" ")
    ));
    let status = status_line(tools);
    if !status.is_empty() {
        out.push_str(&status);
        out.push('\n');
    }
    out.push_str(&fence_line().replace("\n    ", " "));
    out.push('\n');
    out.push_str(
        "rules and limits of this reconstruction: filesystem --legacy-pipe --surface modern --help\n",
    );
    out
}

/// The TOOLS lines of the modern `--help`, for the tools of `set`.
fn tool_lines(set: ShelpaTools) -> String {
    set.names()
        .iter()
        .map(|name| match *name {
            surface::PIPE => "  shelpa_pipe   {command, cwd?, confirm_oversize?}   run a pipeline or a navigation command\n",
            surface::TEE => "  shelpa_tee    {content, paths, append?, confirm_oversize?}   write files exactly as tee does\n",
            surface::WRITE => "  shelpa_write  {path, content, append?, confirm_oversize?}   write a file through tee\n",
            _ => "  shelpa        {command}   cd, pwd or ls on its own\n",
        })
        .collect()
}

/// shelpa's `--help` in the modern surface, listing the tools of `set`.
pub fn help(tools: &ToolPaths, set: ShelpaTools) -> String {
    let commands: Vec<String> = CommandName::ALL
        .into_iter()
        .map(|c| {
            if c == CommandName::Tee {
                "tee (built in)".to_string()
            } else if tools.get(c).is_some() {
                c.as_str().to_string()
            } else {
                format!("{} (MISSING: install {})", c.as_str(), package_of(c))
            }
        })
        .collect();
    let status = status_line(tools);
    let status = if status.is_empty() {
        String::new()
    } else {
        format!("\n{status}\n")
    };
    format!(
        "shelpa — a virtual pipeline shell over one workspace (filesystem --legacy-pipe)

USAGE
  filesystem --legacy-pipe [--root DIR] [--timeout SECONDS]
  filesystem --legacy-pipe call shelpa_pipe '{{\"command\": \"ls\"}}' --root DIR
  filesystem --legacy-pipe tools

It speaks the Model Context Protocol over stdio (newline-delimited JSON, or Content-Length
framing, answered in kind). It is meant to be started by an MCP client.

TOOLS
{tool_lines}
PIPELINE COMMANDS
  {}
  MISSING: {companions} (companion tools of the original shelpa
  toolkit, not available in this reconstruction: MISSING_TOOL)
{status}
NAVIGATION (a whole command, never inside a pipeline)
  pwd           print the session directory (absolute)
  cd DIR        change the session directory (inside the workspace)
  ls [-a] [-l] [PATH]   alone: a built-in listing restricted to the workspace

RULES
  - Stages are joined by | only. No shell runs: ; && || & backticks $( ) are refused.
  - No redirections (> >> < 2> &>); quoted, they are just text (awk '$3 > 5' is fine).
  - Every path stays inside the workspace; symlinks leading out are not followed.
  - Only allowed options run; anything that runs programs or writes files is refused
    (sed -i, sed e/w/r, awk system()/print >/getline <, rg --pre, fd --exec, sort -o, ...).
  - Save output only with tee FILE (overwrite, atomic) or tee -a FILE (append). Every write is
    also appended to the audit mirror .shelpa/<path>.
  - Writes over 2 KiB need \"confirm_oversize\": true; writes are cut at 1 MiB (truncated: true).
  - Output is capped at 1 MiB (truncated: true), and cut after a whole line to what one answer
    carries (--max-result-bytes, default 40,000 bytes: truncated: true and a note; narrow the
    pipeline with head, sed -n or rg to see the rest); each call has a wall-clock limit (--timeout,
    default 30 s), counted for a pipeline from its first stage's start at the latest.
  - At most {max_stages} stages per pipeline (TOO_MANY_STAGES): split longer work over several calls,
    passing an intermediate file written with tee.
  - Each stage may use 1 GiB of memory (--stage-memory, e.g. 512M or 2G; 0 for none) and as much
    in scratch files; {processes}, dumps no core, and dies with
    the server. A stage stopped by a limit fails the call with RESOURCE_LIMIT, naming the limit
    (memory, file size, processes, time).
  - Stages run with an empty environment (PATH=/usr/bin:/bin, LC_ALL=C.UTF-8, an empty HOME that is also TMPDIR).
  - {}
",
        commands.join(" "),
        fence_line(),
        tool_lines = tool_lines(set),
        companions = super::tools::COMPANION_TOOLS.join(" "),
        max_stages = super::limits::MAX_STAGES,
        processes = if super::fence::forbids_new_processes() {
            "it may not start processes (threads are fine)"
        } else {
            "it may start processes (no filter on this architecture)"
        },
    )
}

/// How stages are fenced on this machine.
pub fn fence_line() -> String {
    match super::fence::kernel_abi() {
        Some(abi) => format!(
            "The kernel fences every stage (Landlock ABI {abi}): it may read the workspace and the system's
    programs and libraries and write only its HOME{}{}.",
            // TCP rules arrived with Landlock ABI 4, signal and socket scoping with ABI 6.
            if abi >= 4 { "; it cannot open TCP connections" } else { "" },
            if abi >= 6 { " or signal processes outside it" } else { "" }
        ),
        None => "This kernel has no Landlock, so stages are not fenced by the kernel: the argument
    policy above is the only confinement."
            .to_string(),
    }
}
