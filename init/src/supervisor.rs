// SPDX-License-Identifier: Apache-2.0
//! Supervision of one service (the kubelet): start when wanted, forward its output to the log,
//! restart with exponential backoff when it exits (reset once it stayed up), restart only when
//! its command materially changes, stop it on shutdown.
//!
//! Reaping is not done here: the event loop reaps every child with `waitpid(-1)` and tells the
//! supervisor about the pids that are its own.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, SigSet, Signal};
use nix::unistd::Pid;

/// Restart delays: `INITIAL` doubling to `MAX`, back to `INITIAL` after `STABLE` of uptime.
#[derive(Debug, Clone, Copy)]
pub struct RestartPolicy {
    /// First delay.
    pub initial: Duration,
    /// Longest delay.
    pub max: Duration,
    /// Uptime after which an exit counts as a fresh failure.
    pub stable: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
            stable: Duration::from_secs(30),
        }
    }
}

impl RestartPolicy {
    /// The delay before the next start, given the previous delay and how long it ran.
    pub fn next_delay(&self, previous: Option<Duration>, uptime: Duration) -> Duration {
        match previous {
            Some(d) if uptime < self.stable => (d * 2).min(self.max),
            _ => self.initial,
        }
    }
}

/// How long a stopping service gets between SIGTERM and SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Running {
    pid: Pid,
    command: Vec<String>,
    started: Instant,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    partial: [Vec<u8>; 2],
    kill_at: Option<Instant>,
}

/// What a service is doing, for its status resource and the console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Not wanted.
    Stopped,
    /// Waiting to (re)start at this instant.
    Waiting(Instant),
    /// Running with this pid.
    Running(i32),
    /// SIGTERM sent, waiting for the exit.
    Stopping(i32),
}

/// One supervised service.
#[derive(Debug)]
pub struct Service {
    name: &'static str,
    policy: RestartPolicy,
    desired: Option<Vec<String>>,
    running: Option<Running>,
    start_at: Option<Instant>,
    delay: Option<Duration>,
    /// Starts so far.
    pub starts: u32,
    /// How the last process ended (`exited with status 3 after 120ms`).
    last_exit: Option<String>,
    /// A restart was asked for: the process being stopped starts again at once.
    restarting: bool,
    /// Stopped through the API (`ServiceStop`): not started again, whatever its command and
    /// policy, until `ServiceStart` or `ServiceRestart`.
    held: bool,
}

/// What the API asks of a service beyond a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `ServiceStart`: run it again (after a `ServiceStop`).
    Start,
    /// `ServiceStop`: stop it and keep it stopped.
    Stop,
}

/// Which output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// stdout.
    Out = 0,
    /// stderr.
    Err = 1,
}

impl Service {
    /// A service that is not running.
    pub fn new(name: &'static str, policy: RestartPolicy) -> Self {
        Self {
            name,
            policy,
            desired: None,
            running: None,
            start_at: None,
            delay: None,
            starts: 0,
            last_exit: None,
            restarting: false,
            held: false,
        }
    }

    /// The current state.
    pub fn state(&self) -> State {
        match (&self.running, self.start_at) {
            (Some(r), _) if r.kill_at.is_some() => State::Stopping(r.pid.as_raw()),
            (Some(r), _) => State::Running(r.pid.as_raw()),
            (None, Some(t)) => State::Waiting(t),
            (None, None) => State::Stopped,
        }
    }

    /// Set the command that should run (`None`: stop). A different command than the running
    /// one stops it; the new one starts after the old one exited.
    pub fn set_desired(&mut self, command: Option<Vec<String>>, now: Instant) {
        if self.desired == command {
            return;
        }
        self.desired = command;
        match (&mut self.running, &self.desired) {
            (Some(r), want) if want.as_ref() != Some(&r.command) && r.kill_at.is_none() => {
                log::info!(target: "pid1", "stopping {}: its command changed", self.name);
                let _ = killpg(r.pid, Signal::SIGTERM);
                r.kill_at = Some(now + STOP_GRACE);
            }
            (None, Some(_)) if !self.held => {
                self.start_at = Some(now);
                self.delay = None;
            }
            (None, None) => self.start_at = None,
            _ => {}
        }
    }

    /// Start if due; escalate a stop that is taking too long. Returns true when the set of
    /// output fds changed (the caller re-registers them).
    pub fn poll(&mut self, now: Instant) -> bool {
        if let Some(r) = &mut self.running {
            if r.kill_at.is_some_and(|t| t <= now) {
                log::warn!(target: "pid1", "{} did not stop in {STOP_GRACE:?}: SIGKILL", self.name);
                let _ = killpg(r.pid, Signal::SIGKILL);
                r.kill_at = None;
            }
            return false;
        }
        if self.held {
            return false;
        }
        let (Some(cmd), Some(at)) = (self.desired.clone(), self.start_at) else { return false };
        if at > now {
            return false;
        }
        self.start_at = None;
        self.starts += 1;
        match spawn(&cmd) {
            Ok(mut r) => {
                r.started = now;
                log::info!(target: "pid1", "started {} (pid {}): {}", self.name, r.pid, cmd.join(" "));
                self.running = Some(r);
                true
            }
            Err(e) => {
                let delay = self.policy.next_delay(self.delay, Duration::ZERO);
                let program = cmd.first().map_or("", String::as_str);
                self.last_exit = Some(format!("cannot start {program}: {e}"));
                log::error!(target: "pid1", "{}: cannot start {program}: {e}; retrying in {delay:?}", self.name);
                self.delay = Some(delay);
                self.start_at = Some(now + delay);
                false
            }
        }
    }

    /// A child exited; returns true when it was this service.
    pub fn exited(&mut self, pid: Pid, how: &str, now: Instant) -> bool {
        if self.running.as_ref().map(|r| r.pid) != Some(pid) {
            return false;
        }
        let Some(r) = self.running.take() else { return false };
        let uptime = now.saturating_duration_since(r.started);
        self.last_exit = Some(format!("{how} after {uptime:.1?}"));
        if self.desired.is_some() && !self.held {
            // A command change or an asked-for restart starts again at once; a crash backs
            // off.
            let changed =
                self.desired.as_ref() != Some(&r.command) || std::mem::take(&mut self.restarting);
            let delay =
                if changed { Duration::ZERO } else { self.policy.next_delay(self.delay, uptime) };
            self.delay = if changed { None } else { Some(delay) };
            self.start_at = Some(now + delay);
            log::warn!(target: "pid1", "{} (pid {pid}) {how} after {uptime:?}; restarting in {delay:?}", self.name);
        } else {
            log::info!(target: "pid1", "{} (pid {pid}) {how}", self.name);
        }
        true
    }

    /// The output fds to watch, with their stream.
    pub fn fds(&self) -> Vec<(BorrowedFd<'_>, Stream)> {
        let Some(r) = &self.running else { return Vec::new() };
        let mut v = Vec::new();
        if let Some(fd) = &r.stdout {
            v.push((fd.as_fd(), Stream::Out));
        }
        if let Some(fd) = &r.stderr {
            v.push((fd.as_fd(), Stream::Err));
        }
        v
    }

    /// Read what the service wrote and log it line by line, prefixed with its name.
    pub fn drain(&mut self, stream: Stream) {
        let name = self.name;
        let Some(r) = &mut self.running else { return };
        let slot = match stream {
            Stream::Out => &mut r.stdout,
            Stream::Err => &mut r.stderr,
        };
        let Some(fd) = slot.as_ref() else { return };
        let mut buf = [0u8; 4096];
        let mut file = std::fs::File::from(match fd.try_clone() {
            Ok(fd) => fd,
            Err(_) => return,
        });
        let partial = &mut r.partial[stream as usize];
        loop {
            match file.read(&mut buf) {
                Ok(0) => {
                    // EOF: the pipe is closed; forget it so epoll stops reporting it.
                    *slot = None;
                    break;
                }
                Ok(n) => partial.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    *slot = None;
                    break;
                }
            }
        }
        while let Some(pos) = partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = partial.drain(..=pos).collect();
            log::info!(target: name, "{}", String::from_utf8_lossy(&line).trim_end());
        }
        if partial.len() > 8192 {
            log::info!(target: name, "{}", String::from_utf8_lossy(partial));
            partial.clear();
        }
    }

    /// Restart now (the API's `ServiceRestart`): a running process is stopped (SIGTERM, then
    /// SIGKILL after the grace period) and started again as soon as it exited; one waiting
    /// for its backoff starts now. False when nothing is to run.
    pub fn restart(&mut self, now: Instant) -> bool {
        if self.desired.is_none() {
            return false;
        }
        match &mut self.running {
            Some(r) => {
                if r.kill_at.is_none() {
                    log::info!(target: "pid1", "restarting {}", self.name);
                    let _ = killpg(r.pid, Signal::SIGTERM);
                    r.kill_at = Some(now + STOP_GRACE);
                }
                self.restarting = true;
            }
            None => {
                self.start_at = Some(now);
                self.delay = None;
            }
        }
        true
    }

    /// `ServiceStart` / `ServiceStop`; false when nothing is configured to run.
    pub fn api(&mut self, op: Op, now: Instant) -> bool {
        if self.desired.is_none() {
            return false;
        }
        match op {
            Op::Start => {
                self.held = false;
                if self.running.is_none() {
                    log::info!(target: "pid1", "starting {} (asked through the API)", self.name);
                    self.start_at = Some(now);
                    self.delay = None;
                }
            }
            Op::Stop => {
                self.held = true;
                self.restarting = false;
                self.start_at = None;
                if let Some(r) = &mut self.running {
                    if r.kill_at.is_none() {
                        log::info!(target: "pid1", "stopping {} (asked through the API)", self.name);
                        let _ = killpg(r.pid, Signal::SIGTERM);
                        r.kill_at = Some(now + STOP_GRACE);
                    }
                }
            }
        }
        true
    }

    /// Stop for shutdown: SIGTERM now, SIGKILL after the grace period (driven by `poll`).
    pub fn shutdown(&mut self, now: Instant) {
        self.desired = None;
        self.start_at = None;
        if let Some(r) = &mut self.running {
            if r.kill_at.is_none() {
                log::info!(target: "pid1", "stopping {}", self.name);
                let _ = killpg(r.pid, Signal::SIGTERM);
                let _ = kill(r.pid, Signal::SIGTERM);
                r.kill_at = Some(now + STOP_GRACE);
            }
        }
    }

    /// The backoff before the next start, after a failure.
    pub fn backoff(&self) -> Option<Duration> {
        self.delay
    }

    /// How the last process ended, if one did.
    pub fn last_exit(&self) -> Option<&str> {
        self.last_exit.as_deref()
    }

    /// The command of the process running now (also while it stops).
    pub fn running_command(&self) -> Option<&[String]> {
        self.running.as_ref().map(|r| r.command.as_slice())
    }

    /// The command that should run.
    pub fn desired(&self) -> Option<&[String]> {
        self.desired.as_deref()
    }

    /// True when nothing runs.
    pub fn is_stopped(&self) -> bool {
        self.running.is_none()
    }

    /// The next instant `poll` has something to do.
    pub fn poll_at(&self) -> Option<Instant> {
        match &self.running {
            Some(r) => r.kill_at,
            None => self.start_at,
        }
    }
}

/// Whether `arg` is an environment assignment `NAME=value` (NAME: a letter or `_`, then
/// letters, digits and `_`), as `env(1)` and the shell read leading words.
fn assignment(arg: &str) -> Option<(&str, &str)> {
    let (name, value) = arg.split_once('=')?;
    let mut b = name.bytes();
    let first = b.next()?;
    let ok = (first.is_ascii_alphabetic() || first == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_');
    ok.then_some((name, value))
}

/// Split a command into its leading environment assignments and the program with its
/// arguments (`KUBELET_IMAGE=… /usr/bin/kubelet …`).
fn split_env(cmd: &[String]) -> (Vec<(&str, &str)>, &[String]) {
    let n = cmd.iter().take_while(|a| assignment(a).is_some()).count();
    let env = cmd.iter().take(n).filter_map(|a| assignment(a)).collect();
    (env, cmd.get(n..).unwrap_or_default())
}

fn spawn(cmd: &[String]) -> std::io::Result<Running> {
    let (env, rest) = split_env(cmd);
    let (program, args) =
        rest.split_first().ok_or_else(|| std::io::Error::other("empty command"))?;
    let mut c = Command::new(program);
    c.args(args)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let parent = nix::unistd::getpid();
    // SAFETY: runs in the child between fork and exec; it only calls sigprocmask, prctl and
    // getppid, which are async-signal-safe system calls. PID 1 blocks its signals for
    // signalfd; the service must not inherit that mask, or it could never be stopped with
    // SIGTERM. The parent-death signal ends a service whose `keelson run` was killed (as PID
    // 1 keelson never dies): it is set first, then the parent checked, so a parent that died
    // in between is not missed.
    unsafe {
        c.pre_exec(move || {
            SigSet::empty().thread_set_mask().map_err(std::io::Error::from)?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            // An errno, not a message: a boxed message would allocate in the child, and std
            // passes only the errno back to the parent anyway.
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::from(nix::errno::Errno::ESRCH));
            }
            Ok(())
        });
    }
    let mut child = c.spawn()?;
    let pid = Pid::from_raw(i32::try_from(child.id()).map_err(std::io::Error::other)?);
    let nonblocking = |fd: OwnedFd| -> OwnedFd {
        let _ =
            nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK));
        fd
    };
    let stdout = child.stdout.take().map(|s| nonblocking(OwnedFd::from(s)));
    let stderr = child.stderr.take().map(|s| nonblocking(OwnedFd::from(s)));
    // The child is reaped by the event loop's waitpid(-1), never through `Child`.
    drop(child);
    Ok(Running {
        pid,
        command: cmd.to_vec(),
        started: Instant::now(),
        stdout,
        stderr,
        partial: [Vec::new(), Vec::new()],
        kill_at: None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn leading_assignments_are_the_environment() {
        let cmd: Vec<String> =
            ["KUBELET_IMAGE=ghcr.io/x:v1", "_A1=", "/bin/k", "B=c"].map(String::from).to_vec();
        let (env, rest) = super::split_env(&cmd);
        assert_eq!(env, [("KUBELET_IMAGE", "ghcr.io/x:v1"), ("_A1", "")]);
        assert_eq!(rest, ["/bin/k", "B=c"]);
        for not in ["=x", "1A=x", "A-B=x", "/usr/bin/a=b", "plain"] {
            assert!(super::assignment(not).is_none(), "{not}");
        }
        let only: Vec<String> = vec!["A=b".into()];
        assert!(super::split_env(&only).1.is_empty());
    }

    use super::*;

    #[test]
    fn backoff_doubles_and_resets_after_stable_uptime() {
        let p = RestartPolicy::default();
        assert_eq!(p.next_delay(None, Duration::ZERO), Duration::from_secs(1));
        assert_eq!(
            p.next_delay(Some(Duration::from_secs(1)), Duration::from_secs(2)),
            Duration::from_secs(2)
        );
        assert_eq!(
            p.next_delay(Some(Duration::from_secs(40)), Duration::from_secs(2)),
            Duration::from_secs(60)
        );
        assert_eq!(
            p.next_delay(Some(Duration::from_secs(40)), Duration::from_secs(31)),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn missing_command_waits_with_backoff() {
        let mut s = Service::new("kubelet", RestartPolicy::default());
        let t0 = Instant::now();
        s.set_desired(Some(vec!["/nonexistent/kubelet".into()]), t0);
        assert_eq!(s.state(), State::Waiting(t0));
        assert!(!s.poll(t0));
        assert_eq!(s.state(), State::Waiting(t0 + Duration::from_secs(1)));
        assert!(!s.poll(t0 + Duration::from_secs(1)));
        assert_eq!(s.state(), State::Waiting(t0 + Duration::from_secs(3)), "delay doubled");
    }

    #[test]
    fn a_service_stopped_through_the_api_stays_stopped_until_started() {
        let mut s = Service::new("kubelet", RestartPolicy::default());
        let t0 = Instant::now();
        assert!(!s.api(Op::Stop, t0), "nothing configured");
        s.set_desired(Some(vec!["/nonexistent/kubelet".into()]), t0);
        assert!(s.api(Op::Stop, t0));
        assert_eq!(s.state(), State::Stopped);
        let later = t0 + Duration::from_secs(600);
        assert!(!s.poll(later));
        assert_eq!(s.state(), State::Stopped, "no start, whatever the policy");
        // A new command does not start it either.
        s.set_desired(Some(vec!["/nonexistent/other".into()]), later);
        assert_eq!(s.state(), State::Stopped);
        assert!(s.api(Op::Start, later));
        assert_eq!(s.state(), State::Waiting(later));
    }
}
