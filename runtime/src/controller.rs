// SPDX-License-Identifier: Apache-2.0
//! The controller contract and the context a reconcile runs in.
//!
//! A controller declares what it reads (inputs: namespace + kind) and what it writes (outputs:
//! kind, exclusive or shared). A reconcile reads anything through [`Ctx`], but writes only its
//! declared outputs, and only resources it owns; anything else is a [`ControllerError::Bug`].

use std::time::Instant;

use super::store::{Change, Store, StoreError};
use model::kinds::{AnySpec, Kind, Resource, SpecType};
use model::merge::Provenance;
use model::resource::{Namespace, Phase};

/// How an input wakes the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputMode {
    /// Any change wakes it, and it needs the input to do its job.
    Strong,
    /// Any change wakes it; the input is optional.
    Weak,
    /// Only "tearing down with no finalizers left" wakes it (owners watching their outputs).
    DestroyReady,
}

/// A declared input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Input {
    /// Namespace watched.
    pub namespace: Namespace,
    /// Kind watched.
    pub kind: Kind,
    /// Wake-up rule.
    pub mode: InputMode,
}

impl Input {
    /// A strong input.
    pub const fn strong(namespace: Namespace, kind: Kind) -> Self {
        Self { namespace, kind, mode: InputMode::Strong }
    }

    /// A weak input.
    pub const fn weak(namespace: Namespace, kind: Kind) -> Self {
        Self { namespace, kind, mode: InputMode::Weak }
    }

    /// A destroy-ready input.
    pub const fn destroy_ready(namespace: Namespace, kind: Kind) -> Self {
        Self { namespace, kind, mode: InputMode::DestroyReady }
    }
}

/// Whether other controllers may write the same kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// This controller is the only writer of the kind.
    Exclusive,
    /// Several controllers write the kind, each its own resources.
    Shared,
}

/// A declared output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    /// Namespace written.
    pub namespace: Namespace,
    /// Kind written.
    pub kind: Kind,
    /// Exclusive or shared.
    pub mode: OutputMode,
}

impl Output {
    /// An exclusive output.
    pub const fn exclusive(namespace: Namespace, kind: Kind) -> Self {
        Self { namespace, kind, mode: OutputMode::Exclusive }
    }

    /// A shared output.
    pub const fn shared(namespace: Namespace, kind: Kind) -> Self {
        Self { namespace, kind, mode: OutputMode::Shared }
    }
}

/// When the controller wants to run again without being woken by an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Only when an input changes.
    Idle,
    /// At this instant (or earlier, if an input changes).
    At(Instant),
}

/// Category of a controller error; drives logging and retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Will likely succeed later (busy, missing link, buffer overrun).
    Transient,
    /// The input is wrong; retrying will not help until it changes.
    Invalid,
    /// The kernel lacks a feature.
    Unsupported,
    /// A broken invariant in our code.
    Bug,
}

/// A failed reconcile.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The store refused a write (wrong owner, undeclared output, tearing down...).
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A write to a kind the controller did not declare as an output.
    #[error("{controller} wrote {kind} in {namespace}, which is not one of its outputs")]
    UndeclaredOutput {
        /// The controller.
        controller: &'static str,
        /// The namespace.
        namespace: Namespace,
        /// The kind.
        kind: Kind,
    },
    /// The reconcile panicked; the runtime caught it.
    #[error("panicked: {0}")]
    Panic(String),
    /// Anything else, with its category.
    #[error("{message}")]
    Other {
        /// Category.
        kind: ErrorKind,
        /// Description.
        message: String,
    },
}

impl ControllerError {
    /// A transient error with a message.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::Other { kind: ErrorKind::Transient, message: message.into() }
    }

    /// The error's category.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ControllerError::Store(StoreError::TearingDown { .. }) => ErrorKind::Transient,
            ControllerError::Store(_) | ControllerError::UndeclaredOutput { .. } => ErrorKind::Bug,
            ControllerError::Panic(_) => ErrorKind::Bug,
            ControllerError::Other { kind, .. } => *kind,
        }
    }
}

/// A reconciling controller.
pub trait Controller {
    /// Stable name: the owner of its outputs, its log target and its finalizer.
    fn name(&self) -> &'static str;
    /// What it reads.
    fn inputs(&self) -> Vec<Input>;
    /// What it writes.
    fn outputs(&self) -> Vec<Output>;
    /// Bring outputs in line with inputs.
    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError>;
}

/// The view of the runtime a reconcile gets.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub(super) store: &'a mut Store,
    pub(super) name: &'static str,
    pub(super) outputs: &'a [Output],
    pub(super) now: Instant,
    pub(super) changes: &'a mut Vec<Change>,
    pub(super) condition: &'a mut Option<String>,
}

impl<'a> Ctx<'a> {
    /// The time of this pass (the event loop reads the clock once per iteration).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The controller's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Read access to everything.
    pub fn store(&self) -> &Store {
        self.store
    }

    /// One typed spec.
    pub fn get<S: SpecType>(&self, namespace: Namespace, id: &str) -> Option<&S> {
        self.store.get_spec(namespace, id)
    }

    /// All typed specs of a kind, as `(id, spec)` ordered by ID.
    pub fn list<S: SpecType>(&self, namespace: Namespace) -> Vec<(&str, &S)> {
        self.store.list_specs(namespace).collect()
    }

    /// Create or update an output this controller owns. Equal writes change nothing.
    pub fn put<S: SpecType>(
        &mut self,
        namespace: Namespace,
        id: &str,
        spec: S,
    ) -> Result<(), ControllerError> {
        self.put_any(namespace, id, spec.into())
    }

    /// [`Ctx::put`] for a spec whose type is known only at run time.
    pub fn put_any(
        &mut self,
        namespace: Namespace,
        id: &str,
        spec: AnySpec,
    ) -> Result<(), ControllerError> {
        let kind = spec.kind();
        self.check_output(namespace, kind)?;
        if let Some(ch) = self.store.put(self.name, namespace, id, spec)? {
            self.changes.push(ch);
        }
        Ok(())
    }

    /// Like [`Ctx::put`], and record where each field came from.
    pub fn put_with_provenance<S: SpecType>(
        &mut self,
        namespace: Namespace,
        id: &str,
        spec: S,
        provenance: Provenance,
    ) -> Result<(), ControllerError> {
        self.check_output(namespace, S::KIND)?;
        let spec = spec.into();
        if let Some(ch) =
            self.store.put_with_provenance(self.name, namespace, id, spec, provenance)?
        {
            self.changes.push(ch);
        }
        Ok(())
    }

    /// Tear down (or destroy, when no finalizers hold it) an output this controller owns.
    pub fn teardown(
        &mut self,
        namespace: Namespace,
        kind: Kind,
        id: &str,
    ) -> Result<(), ControllerError> {
        self.check_output(namespace, kind)?;
        if let Some(ch) = self.store.teardown(self.name, namespace, kind, id)? {
            self.changes.push(ch);
        }
        Ok(())
    }

    /// Remove every output of `kind` in `namespace` that this controller owns and did not
    /// write during this reconcile: resources whose finalizers are gone are destroyed, the
    /// others torn down. This is how a controller forgets what it no longer wants.
    pub fn cleanup_untouched(
        &mut self,
        namespace: Namespace,
        kind: Kind,
    ) -> Result<(), ControllerError> {
        // The runtime starts a store pass per reconcile, so "untouched" means "not put by
        // this reconcile".
        for id in self.store.untouched(self.name, namespace, kind) {
            self.teardown(namespace, kind, &id)?;
        }
        Ok(())
    }

    /// Is this resource tearing down?
    pub fn is_tearing_down(&self, namespace: Namespace, kind: Kind, id: &str) -> bool {
        self.store.get(namespace, kind, id).is_some_and(|r| r.metadata.phase == Phase::TearingDown)
    }

    /// Is any resource of `kind` in `namespace` tearing down? When not, a caller about to
    /// write many IDs can skip asking [`Ctx::is_tearing_down`] for each.
    pub fn any_tearing_down(&self, namespace: Namespace, kind: Kind) -> bool {
        self.store.any_tearing_down(namespace, kind)
    }

    /// One resource with its metadata.
    pub fn resource(&self, namespace: Namespace, kind: Kind, id: &str) -> Option<&Resource> {
        self.store.get(namespace, kind, id)
    }

    /// Put this controller's finalizer on a resource (a spec it has applied).
    pub fn add_finalizer(
        &mut self,
        namespace: Namespace,
        kind: Kind,
        id: &str,
    ) -> Result<(), ControllerError> {
        if let Some(ch) = self.store.add_finalizer(namespace, kind, id, self.name)? {
            self.changes.push(ch);
        }
        Ok(())
    }

    /// Take this controller's finalizer off (the kernel object is gone).
    pub fn remove_finalizer(
        &mut self,
        namespace: Namespace,
        kind: Kind,
        id: &str,
    ) -> Result<(), ControllerError> {
        if let Some(ch) = self.store.remove_finalizer(namespace, kind, id, self.name)? {
            self.changes.push(ch);
        }
        Ok(())
    }

    /// The condition set so far (by this reconcile or the last one).
    pub fn condition(&self) -> Option<&str> {
        self.condition.as_deref()
    }

    /// Say why the controller is not converged (shown by the CLI); `None` clears it.
    pub fn set_condition(&mut self, reason: Option<String>) {
        *self.condition = reason;
    }

    fn check_output(&self, namespace: Namespace, kind: Kind) -> Result<(), ControllerError> {
        if self.outputs.iter().any(|o| o.namespace == namespace && o.kind == kind) {
            Ok(())
        } else {
            Err(ControllerError::UndeclaredOutput { controller: self.name, namespace, kind })
        }
    }
}
