// SPDX-License-Identifier: Apache-2.0
//! The single-threaded resource runtime (a small COSI).
//!
//! This crate owns the resource store ([`store`]), the controller contract ([`controller`]) and
//! the reconcile loop ([`Runtime`]) that the network pipeline, time sync, KubeSpan and the node
//! wiring all run on. It knows resources only through the `model` crate and must not depend on
//! the network stack (`net`), on netlink, nix or libc, or on anything that does I/O: the loop
//! never reads a socket or the clock, so every rule below is tested with plain values.
//!
//! Rules (each has a unit test below):
//! - A change to a resource marks every controller with a matching input dirty; marking is a
//!   flag, so a hundred changes still mean one reconcile (coalescing).
//! - An equal write changes nothing and wakes nobody (enforced by the store).
//! - A controller is not woken by the finalizers it put on or took off its own inputs: it made
//!   that change knowing everything else it read, so a second pass would see the same inputs
//!   and do nothing (a spec controller adding ten thousand finalizers would otherwise re-plan
//!   all its specs once more). Other controllers are woken as usual, and so is an owner whose
//!   resource became ready to destroy.
//! - [`Runtime::run`] reconciles dirty and due controllers, in registration order, until none
//!   is dirty, or until [`PASS_CAP`] reconciles in one call. When the cap is hit, the
//!   controllers that ran more than once in that call are named in the log and backed off, so
//!   two controllers that keep waking each other cannot spin the event loop.
//! - A reconcile that returns an error, or panics (caught and turned into an error), is logged
//!   with the controller's name and retried after an exponential backoff; success resets it.
//!   A change to one of its inputs lets it retry early, but never sooner than
//!   [`BACKOFF_INITIAL`] after its last run: a failing apply whose own kernel events wake it
//!   again cannot spin. A repeat of the same error is logged at debug level only.
//! - Controllers backed off by the loop cap stay held until their delay ends, whatever
//!   changes meanwhile.
//! - When the last finalizer leaves a resource that is tearing down, its owner is woken so it
//!   can destroy it.
//!
//! The runtime never reads the clock: callers pass `now` and ask [`Runtime::poll_at`] when to
//! call again, so it fits a sans-IO event loop and tests drive time explicitly.
#![warn(missing_docs)]

pub mod controller;
pub mod store;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

pub use controller::{
    Controller, ControllerError, Ctx, ErrorKind, Input, InputMode, Next, Output, OutputMode,
};
pub use store::{Change, ChangeKind, Store, StoreError};

use base::metrics::Histogram;
use model::kinds::{AnySpec, Kind, SpecType};
use model::resource::Namespace;

/// Bucket bounds of the reconcile-duration histogram, in seconds: 10 µs to 10 s, a reconcile
/// of a few routes at the low end, a full apply of ten thousand at the high.
pub const RECONCILE_SECONDS: [f64; 10] = [1e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 1.0, 10.0];

/// Most reconciles one [`Runtime::run`] call performs before it declares a loop.
pub const PASS_CAP: usize = 1000;

/// First retry delay after an error.
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(250);

/// Longest retry delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Why a controller could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// Two controllers share a name.
    #[error("controller {0} registered twice")]
    DuplicateName(&'static str),
    /// Two controllers claim the same kind exclusively, or one exclusively and one shared.
    #[error("{kind} is an exclusive output of {first}, so {second} cannot write it")]
    OutputConflict {
        /// The kind.
        kind: Kind,
        /// The first claimant.
        first: &'static str,
        /// The second.
        second: &'static str,
    },
}

/// What one controller is doing, for the CLI and for tests.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerState {
    /// Name.
    pub name: &'static str,
    /// Total reconciles so far.
    pub runs: u64,
    /// Reconciles that failed (an error or a panic).
    pub errors: u64,
    /// How long reconciles took, in seconds.
    pub durations: Histogram,
    /// Why it is not converged, if it said so.
    pub condition: Option<String>,
    /// The last error, until the next success.
    pub last_error: Option<String>,
    /// When it will be retried after an error.
    pub retry_at: Option<Instant>,
}

/// What a [`Runtime::run`] call did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunReport {
    /// Reconciles performed.
    pub reconciles: usize,
    /// Controllers backed off because the cap was hit (they kept waking each other).
    pub looping: Vec<&'static str>,
}

struct Slot {
    ctrl: Box<dyn Controller>,
    name: &'static str,
    inputs: Vec<Input>,
    outputs: Vec<Output>,
    dirty: bool,
    wake_at: Option<Instant>,
    /// Error backoff: not before this, unless an input changed (see `retry_early`).
    retry_at: Option<Instant>,
    /// An input changed during the error backoff: retry at `last_run + BACKOFF_INITIAL`.
    retry_early: bool,
    /// Loop-cap hold: not before this, whatever changes.
    hold_until: Option<Instant>,
    last_run: Option<Instant>,
    backoff: Duration,
    runs: u64,
    errors: u64,
    durations: Histogram,
    condition: Option<String>,
    last_error: Option<String>,
}

/// The controller runtime and its store.
pub struct Runtime {
    store: Store,
    slots: Vec<Slot>,
    /// Every change since the last [`Runtime::take_changes`] (for watchers), of the kinds
    /// in `journaled`.
    journal: Vec<Change>,
    /// The kinds whose changes the journal keeps; `None` keeps all.
    journaled: Option<Vec<Kind>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("resources", &self.store.len())
            .field("controllers", &self.slots.iter().map(|s| s.name).collect::<Vec<_>>())
            .finish()
    }
}

impl Default for Runtime {
    fn default() -> Self {
        Self::new()
    }
}

impl Runtime {
    /// An empty runtime.
    pub fn new() -> Self {
        Self { store: Store::new(), slots: Vec::new(), journal: Vec::new(), journaled: None }
    }

    /// Add a controller. It starts dirty, so its first [`Runtime::run`] reconciles it.
    pub fn register(&mut self, ctrl: Box<dyn Controller>) -> Result<(), RuntimeError> {
        let name = ctrl.name();
        let outputs = ctrl.outputs();
        for slot in &self.slots {
            if slot.name == name {
                return Err(RuntimeError::DuplicateName(name));
            }
            for theirs in &slot.outputs {
                for ours in &outputs {
                    let exclusive =
                        theirs.mode == OutputMode::Exclusive || ours.mode == OutputMode::Exclusive;
                    if theirs.namespace == ours.namespace && theirs.kind == ours.kind && exclusive {
                        return Err(RuntimeError::OutputConflict {
                            kind: ours.kind,
                            first: slot.name,
                            second: name,
                        });
                    }
                }
            }
        }
        self.slots.push(Slot {
            inputs: ctrl.inputs(),
            outputs,
            ctrl,
            name,
            dirty: true,
            wake_at: None,
            retry_at: None,
            retry_early: false,
            hold_until: None,
            last_run: None,
            backoff: BACKOFF_INITIAL,
            runs: 0,
            errors: 0,
            durations: Histogram::new(&RECONCILE_SECONDS),
            condition: None,
            last_error: None,
        });
        Ok(())
    }

    /// Read access to the store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Write an input that comes from outside the runtime (the kernel command line, the config
    /// file, links declared to `plan`), owned by `source`. Wakes dependents like any change.
    pub fn put_input<S: SpecType>(
        &mut self,
        source: &'static str,
        namespace: Namespace,
        id: &str,
        spec: S,
    ) -> Result<(), StoreError> {
        self.put_input_any(source, namespace, id, spec.into())
    }

    /// [`Runtime::put_input`] for a spec whose type is known only at run time.
    pub fn put_input_any(
        &mut self,
        source: &'static str,
        namespace: Namespace,
        id: &str,
        spec: AnySpec,
    ) -> Result<(), StoreError> {
        if let Some(ch) = self.store.put(source, namespace, id, spec)? {
            self.notify(&ch, None);
            self.record(ch);
        }
        Ok(())
    }

    /// Remove an input written with [`Runtime::put_input`].
    pub fn remove_input(
        &mut self,
        source: &'static str,
        namespace: Namespace,
        kind: Kind,
        id: &str,
    ) -> Result<(), StoreError> {
        if let Some(ch) = self.store.destroy(source, namespace, kind, id)? {
            self.notify(&ch, None);
            self.record(ch);
        }
        Ok(())
    }

    /// Mark every controller that reads `kind` (in any namespace) dirty: kernel events are
    /// triggers, not data.
    pub fn mark_dirty(&mut self, kind: Kind) {
        for slot in &mut self.slots {
            if slot.inputs.iter().any(|i| i.kind == kind)
                || slot.outputs.iter().any(|o| o.kind == kind)
            {
                slot.mark_dirty();
            }
        }
    }

    /// Mark every controller dirty (after a netlink overrun, for example).
    pub fn mark_all_dirty(&mut self) {
        for slot in &mut self.slots {
            slot.mark_dirty();
        }
    }

    /// The earliest timer (a requested wake-up or a retry). Dirty controllers are not timers:
    /// call [`Runtime::run`] while [`Runtime::has_work`] says so.
    pub fn poll_at(&self) -> Option<Instant> {
        self.slots.iter().filter_map(Slot::next_timer).min()
    }

    /// True when some controller is dirty and free to run now (not backing off or held).
    pub fn has_work(&self) -> bool {
        self.slots.iter().any(|s| s.dirty && s.retry_at.is_none() && s.hold_until.is_none())
    }

    /// The state of every controller, in registration order.
    pub fn controllers(&self) -> Vec<ControllerState> {
        self.slots
            .iter()
            .map(|s| ControllerState {
                name: s.name,
                runs: s.runs,
                errors: s.errors,
                durations: s.durations.clone(),
                condition: s.condition.clone(),
                last_error: s.last_error.clone(),
                retry_at: s.retry_at,
            })
            .collect()
    }

    /// Changes since the last call (for watchers).
    pub fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.journal)
    }

    /// Keep only changes of `kinds` in the journal from now on (`None`: every change). A
    /// large config makes a change per object several times over; nobody reads most of them.
    pub fn journal_only(&mut self, kinds: Option<Vec<Kind>>) {
        self.journaled = kinds;
    }

    fn record(&mut self, ch: Change) {
        if self.journaled.as_ref().is_none_or(|kinds| kinds.contains(&ch.kind)) {
            self.journal.push(ch);
        }
    }

    /// Reconcile until nothing is dirty or due at `now`, or the cap is hit.
    pub fn run(&mut self, now: Instant) -> RunReport {
        for slot in &mut self.slots {
            slot.release_due(now);
        }
        let mut report = RunReport::default();
        let mut runs_this_pass: BTreeMap<usize, usize> = BTreeMap::new();
        while let Some(i) = self
            .slots
            .iter()
            .position(|s| s.dirty && s.retry_at.is_none() && s.hold_until.is_none())
        {
            if report.reconciles >= PASS_CAP {
                report.looping = self.back_off_loopers(&runs_this_pass, now);
                break;
            }
            report.reconciles += 1;
            *runs_this_pass.entry(i).or_default() += 1;
            self.reconcile_one(i, now);
        }
        report
    }

    fn reconcile_one(&mut self, i: usize, now: Instant) {
        let mut changes = Vec::new();
        let slot = &mut self.slots[i];
        slot.dirty = false;
        slot.runs += 1;
        slot.last_run = Some(now);
        slot.retry_early = false;
        // Read the clock here rather than use `now`: `now` is the pass's start, shared by every
        // reconcile in it.
        let started = Instant::now();
        let result = {
            self.store.begin_pass();
            let mut ctx = Ctx {
                store: &mut self.store,
                name: slot.name,
                outputs: &slot.outputs,
                now,
                changes: &mut changes,
                condition: &mut slot.condition,
            };
            let ctrl = &mut slot.ctrl;
            catch_unwind(AssertUnwindSafe(|| ctrl.reconcile(&mut ctx))).unwrap_or_else(|payload| {
                Err(ControllerError::Panic(panic_message(payload.as_ref())))
            })
        };
        match result {
            Ok(next) => {
                slot.backoff = BACKOFF_INITIAL;
                slot.last_error = None;
                slot.wake_at = match next {
                    Next::Idle => None,
                    Next::At(t) => Some(t),
                };
            }
            Err(err) => {
                slot.errors += 1;
                let delay = slot.backoff;
                slot.backoff = (slot.backoff * 2).min(BACKOFF_MAX);
                slot.retry_at = Some(now + delay);
                let text = err.to_string();
                // The same failure again is news only at debug level: a link that stays missing
                // must not flood the console (PID 1 logs to kmsg).
                if slot.last_error.as_deref() == Some(text.as_str()) {
                    log::debug!(target: slot.name, "still failing, retrying in {delay:?}: {text}");
                } else {
                    log::error!(target: slot.name, "reconcile failed ({:?}), retrying in {delay:?}: {text}", err.kind());
                }
                slot.last_error = Some(text);
            }
        }
        let took = started.elapsed();
        let slot = &mut self.slots[i];
        slot.durations.observe(took.as_secs_f64());
        log::trace!(target: "runtime", "{}: {took:?}, {} changes", slot.name, changes.len());
        // Whom a change wakes depends only on these fields, and a reconcile's changes come in
        // runs of one kind: a run of ten thousand notifies once.
        let mut woken = None;
        for ch in changes {
            let wakes = (ch.namespace, ch.kind, ch.what, ch.owner, ch.destroy_ready);
            if woken != Some(wakes) {
                self.notify(&ch, Some(i));
                woken = Some(wakes);
            }
            self.record(ch);
        }
    }

    /// Wake the controllers `ch` concerns; `by` is the slot whose reconcile made it.
    fn notify(&mut self, ch: &Change, by: Option<usize>) {
        for (j, slot) in self.slots.iter_mut().enumerate() {
            if by == Some(j) && ch.what == ChangeKind::Finalizers && !ch.destroy_ready {
                continue;
            }
            let wakes = slot.inputs.iter().any(|inp| {
                inp.namespace == ch.namespace
                    && inp.kind == ch.kind
                    && (inp.mode != InputMode::DestroyReady || ch.destroy_ready)
            });
            let owner_must_destroy = ch.destroy_ready && slot.name == ch.owner;
            if wakes || owner_must_destroy {
                slot.mark_dirty();
            }
        }
    }

    fn back_off_loopers(
        &mut self,
        runs: &BTreeMap<usize, usize>,
        now: Instant,
    ) -> Vec<&'static str> {
        let looping: Vec<usize> = runs.iter().filter(|(_, n)| **n > 1).map(|(i, _)| *i).collect();
        let names: Vec<&'static str> = looping.iter().map(|i| self.slots[*i].name).collect();
        log::error!(
            target: "runtime",
            "{PASS_CAP} reconciles without settling; backing off controllers that keep waking each other: {}",
            names.join(", ")
        );
        for i in looping {
            let slot = &mut self.slots[i];
            slot.hold_until = Some(now + slot.backoff);
            slot.backoff = (slot.backoff * 2).min(BACKOFF_MAX);
            slot.last_error = Some("reconcile loop: kept being woken without settling".into());
        }
        names
    }
}

impl Slot {
    /// An input changed: run when free; during an error backoff, retry early (new input is a
    /// reason to try again: the link a failing route needed may have just come up).
    fn mark_dirty(&mut self) {
        self.dirty = true;
        if self.retry_at.is_some() {
            self.retry_early = true;
        }
    }

    /// The next instant this slot must be looked at without further input.
    fn next_timer(&self) -> Option<Instant> {
        let early = match (self.retry_early, self.last_run) {
            (true, Some(t)) => Some(t + BACKOFF_INITIAL),
            _ => None,
        };
        let retry = match (self.retry_at, early) {
            (Some(r), Some(e)) => Some(r.min(e)),
            (r, _) => r,
        };
        [retry, self.hold_until, self.wake_at].into_iter().flatten().min()
    }

    /// Clear whatever timers are due at `now`, making the slot dirty for each.
    fn release_due(&mut self, now: Instant) {
        if self.hold_until.is_some_and(|t| t <= now) {
            self.hold_until = None;
            self.dirty = true;
        }
        let early_due =
            self.retry_early && self.last_run.is_some_and(|t| t + BACKOFF_INITIAL <= now);
        if self.retry_at.is_some_and(|t| t <= now) || (self.retry_at.is_some() && early_due) {
            self.retry_at = None;
            self.retry_early = false;
            self.dirty = true;
        }
        if self.wake_at.is_some_and(|t| t <= now) {
            self.wake_at = None;
            self.dirty = true;
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".to_owned())
}

#[cfg(test)]
mod tests;
