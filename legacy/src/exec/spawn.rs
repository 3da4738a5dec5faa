//! The first phase of a run: starting every stage in pipeline order, joining each to the one
//! before it (through a counted junction between two external stages, directly otherwise).

use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::process::Pid;

use super::builtin_tee::{spawn_tee, TeeThread};
use super::relay::Junction;
use super::stage::{spawn_stage, Place, Proc, Running, StageDir};
use super::streams::Shared;
use super::supervise::stop_now;
use super::{step_name, ExecLimits, Outcome, SpawnError};
use crate::fence::{self, Fence};
use crate::limits::PreparedLimits;
use crate::plan::Step;
use crate::scratch::Home;
use mcp_core::toolset::CallContext;
use workspace::Workspace;

/// What every stage of a run shares: its private home (and scratch folder), the fence it
/// enters and its prepared limits. Made before the first spawn; outlives every stage.
pub(super) struct Setup {
    /// The per-call home and scratch folder.
    pub(super) home: Home,
    fence: Fence,
    prepared: PreparedLimits,
}

impl Setup {
    /// Creates the home, builds the fence around the workspace, the home and the programs the
    /// steps run, and prepares the limits for the children.
    pub(super) fn new(
        steps: &[Step],
        workspace: &Workspace,
        limits: &ExecLimits,
    ) -> Result<Setup, SpawnError> {
        let first = steps.first().map(step_name).unwrap_or("pipeline");
        let setup = |source: io::Error| SpawnError {
            command: first,
            source,
        };
        let home = Home::create().map_err(setup)?;
        let programs: Vec<&Path> = steps
            .iter()
            .filter_map(|step| match step {
                Step::Run { argv, .. } => argv.first().map(Path::new),
                Step::Tee { .. } => None,
            })
            .collect();
        let fence = Fence::new(workspace.root_fd(), home.dir().as_fd(), &programs)
            .map_err(|e| setup(io::Error::other(e)))?;
        fence::prepare();
        let prepared = limits.stage.prepare();
        Ok(Setup {
            home,
            fence,
            prepared,
        })
    }
}

/// Everything the spawn phase started, handed to the later phases. Fields drop in order, so
/// on an early return the pipes and junctions close before `running` kills and reaps.
pub(super) struct Started {
    /// The built-in tees.
    pub(super) tees: Vec<TeeThread>,
    /// Each external stage's stderr reader and the buffer it is collected into.
    pub(super) stderr_pipes: Vec<(os_pipe::PipeReader, Shared)>,
    /// The reader of the last stage's stdout.
    pub(super) last_out: Option<os_pipe::PipeReader>,
    /// The counted junctions between external stages.
    pub(super) junctions: Vec<Junction>,
    /// Per step: the count of the junction its stdout feeds, if it feeds one.
    pub(super) counted: Vec<Option<Arc<AtomicU64>>>,
    /// Why the run stopped before every stage started (cancelled, or out of time), if it did.
    pub(super) stopped: Option<Outcome>,
    /// The started external stages.
    pub(super) running: Running,
}

/// Starts `steps` in order. Cancellation and both clocks (`own`, the pipeline's own limit from
/// its first spawn) are checked before every spawn, so a run stopped while starting stops at
/// once; what did start is then handed on with `stopped` set. A stage that cannot start ends
/// the run: dropping what started kills and reaps it.
pub(super) fn spawn_all(
    steps: &[Step],
    workspace: &Workspace,
    setup: &Setup,
    limits: &ExecLimits,
    ctx: &CallContext,
    own: Option<(Instant, Duration)>,
) -> Result<Started, SpawnError> {
    let mut started = Started {
        tees: Vec::new(),
        stderr_pipes: Vec::new(),
        last_out: None,
        junctions: Vec::new(),
        counted: vec![None; steps.len()],
        stopped: None,
        running: Running {
            procs: Vec::new(),
            pgid: None,
        },
    };
    for (index, step) in steps.iter().enumerate() {
        if let Some(stop) = stop_now(ctx, own) {
            started.stopped = Some(stop);
            break;
        }
        let out = match step {
            Step::Run { command, argv, cwd } => {
                let spawned = StageDir::open(workspace, cwd).and_then(|dir| {
                    let place = Place {
                        dir: &dir,
                        home: setup.home.path(),
                        fence: setup.fence.handle(),
                        limits: &setup.prepared,
                    };
                    let stdin = started.stdin_for(steps, index)?;
                    spawn_stage(*command, argv, &place, stdin, started.running.pgid)
                });
                let (child, out, err) = spawned.map_err(|source| SpawnError {
                    command: command.as_str(),
                    source,
                })?;
                started.add_stage(index, child, err);
                out
            }
            Step::Tee { append, targets } => spawn_tee(
                *append,
                targets.clone(),
                started.last_out.take(),
                limits.tee_limit,
            )
            .map(|(handle, out)| {
                started.tees.push(TeeThread { index, handle });
                out
            })
            .map_err(|source| SpawnError {
                command: "tee",
                source,
            })?,
        };
        started.last_out = Some(out);
    }
    Ok(started)
}

impl Started {
    /// Keeps a started external stage: the first one's pid becomes the group's, and its stderr
    /// goes to the collector.
    fn add_stage(&mut self, index: usize, child: Child, err: os_pipe::PipeReader) {
        let pid = Pid::from_child(&child);
        self.running.pgid.get_or_insert(pid);
        let stderr: Shared = Arc::new(Mutex::new(Vec::new()));
        self.stderr_pipes.push((err, stderr.clone()));
        self.running.procs.push(Proc {
            index,
            child,
            pid,
            stderr,
            done: None,
            killed: false,
        });
    }

    /// The stdin of the external stage at `index`: the previous stage's stdout, through a
    /// counted junction when that stage is external too (the junction's count is its
    /// `output_size`), directly when it is a tee, and none for the first stage.
    fn stdin_for(
        &mut self,
        steps: &[Step],
        index: usize,
    ) -> io::Result<Option<os_pipe::PipeReader>> {
        let upstream_runs = index > 0 && matches!(steps[index - 1], Step::Run { .. });
        Ok(match self.last_out.take() {
            Some(from) if upstream_runs => {
                let (stdin, to) = os_pipe::pipe()?;
                let (junction, moved) = Junction::new(from, to);
                self.junctions.push(junction);
                self.counted[index - 1] = Some(moved);
                Some(stdin)
            }
            other => other,
        })
    }
}
