//! What a trial's model was offered, read after the agent ended from the harness's own records
//! in the trial's home: Claude Code keeps each request's system text and tools in its transcript
//! (`api-request-shape` lines under `~/.claude/projects/`). A harness that keeps no such record
//! yields nothing, and the trial record says nothing rather than a guess.

use report::classify::ServerFilter;
use report::offered::Offered;
use report::transcript::read_transcripts_offered;

use crate::record::TrialPaths;
use crate::spec::Arm;

/// Where under the trial's home Claude Code keeps its transcripts (`CLAUDE_CONFIG_DIR` is
/// `HOME/.claude`, see `home.rs`).
const CLAUDE_PROJECTS: &str = ".claude/projects";

/// The offered summary of the trial at `paths`, or `None` when no record tells it.
pub fn read(arm: &Arm, paths: &TrialPaths) -> Option<Offered> {
    let projects = paths.home.join(CLAUDE_PROJECTS);
    if !crate::named::kind(&projects).is_ok_and(|k| k == crate::named::Kind::Dir) {
        return None;
    }
    let servers = ServerFilter {
        names: vec![arm.server_name.clone()],
    };
    // A transcript that cannot be read costs the summary, never the trial.
    read_transcripts_offered(&[projects], &servers)
        .ok()
        .and_then(|(_, _, offered)| offered)
}
