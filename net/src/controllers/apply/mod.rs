// SPDX-License-Identifier: Apache-2.0
//! The apply loop the spec controllers (links, addresses, routes, rules) share.
//!
//! A spec controller plans operations against a kernel dump (its own pure function), then
//! hands them to [`SpecApply`], which owns what is the same for every kind of object:
//! batching ([`batches`]), the [`ApplyGuard`] (what is held, what is recorded, what never
//! settles), which specs failed, the finalizer writes and the condition. What differs per
//! object is the [`SpecOps`] the controller implements: the operation's key and name, how a
//! batch goes to the host, and whether a failure stops the spec's other operations.

mod batches;
mod guard;
mod id_sets;
mod link_cache;
mod wait_log;

use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::time::Instant;

pub(crate) use batches::batches;
pub(crate) use guard::{hash_of, op_text, Applied, ApplyGuard, OpKey};
#[cfg(test)]
pub(crate) use guard::{FIGHT_LIMIT, REPEAT_LIMIT};
pub(crate) use id_sets::{IdList, SortedIds};
pub(crate) use link_cache::LinkCache;
pub(crate) use wait_log::WaitLog;

use crate::host::{Host, HostError, SharedHost};
use crate::resource::{Kind, Namespace, Phase, SpecType};
use crate::runtime::{ControllerError, Ctx, Next, Store};

/// A merged spec to apply, with its phase.
#[derive(Debug, Clone, Copy)]
pub struct Desired<'a, S> {
    /// Natural ID.
    pub id: &'a str,
    /// The spec.
    pub spec: &'a S,
    /// Running or tearing down.
    pub phase: Phase,
}

/// What the apply loop needs to know about one kind of kernel object's operations.
pub(crate) trait SpecOps {
    /// The spec applied.
    type Spec: SpecType;
    /// An operation on the kernel.
    type Op: std::fmt::Debug;
    /// The object, as the wait log names it (`route`).
    const OBJECT: &'static str;

    /// Which operation `op` is, as a tag and a name (`(0, "add")`).
    fn what(op: &Self::Op) -> (u8, &'static str);
    /// The guard's key of `op` for spec `id` (see [`ApplyGuard`]'s rule 1): the ID and
    /// which operation.
    fn key(id: &str, op: &Self::Op) -> OpKey {
        OpKey::new(id, Self::what(op).0)
    }
    /// The guard's name of `op` for spec `id` (`route <id>: add`), made only for a fight.
    fn name(id: &str, op: &Self::Op) -> String {
        op_text(Self::OBJECT, id, Self::what(op).1)
    }
    /// A hash of the whole of `op` for the guard's rule 2; `None`: not counted.
    fn value(op: &Self::Op) -> Option<u64>;
    /// Apply `ops`, no two on one spec, in order: one result each.
    fn apply(host: &mut dyn Host, ops: &[&Self::Op]) -> Vec<Result<(), HostError>>;
    /// A failure of `op` leaves the spec's other operations (and its finalizer) alone: a
    /// setting the kernel may refuse on its own while the rest still makes sense.
    fn refused_alone(_op: &Self::Op) -> bool {
        false
    }
    /// The error of a failed `op` for spec `id`, as reported.
    fn error(_id: &str, _op: &Self::Op, e: HostError) -> HostError {
        e
    }
}

/// What one reconcile's applies came to so far (a controller that applies in rounds keeps
/// one across them).
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Specs with an operation that failed or was held: their bookkeeping (finalizer, what
    /// was applied last) stays as it was, and their later operations are not sent.
    pub failed: BTreeSet<String>,
    /// Operations refused on their own ([`SpecOps::refused_alone`]), by key.
    pub refused: BTreeSet<OpKey>,
    /// Every failure, in order.
    pub errors: Vec<HostError>,
}

impl Outcome {
    /// The spec `id` failed.
    pub(crate) fn failed(&self, id: &str) -> bool {
        self.failed.contains(id)
    }

    /// Finalizers to put on: specs of `applied` that did not fail and lack one.
    pub(crate) fn to_add<S: AsRef<str>>(&self, applied: &[S], lacking: &mut SortedIds) -> IdList {
        applied
            .iter()
            .map(AsRef::as_ref)
            .filter(|id| !self.failed(id) && lacking.contains(id))
            .collect()
    }

    /// Finalizers to take off: specs of `released` that did not fail, nor `still_pending`.
    pub(crate) fn to_release<S: AsRef<str>>(
        &self,
        released: &[S],
        still_pending: impl Fn(&str) -> bool,
    ) -> IdList {
        released
            .iter()
            .map(AsRef::as_ref)
            .filter(|id| !self.failed(id) && !still_pending(id))
            .collect()
    }
}

/// A spec controller's apply loop for the objects of `O`: owns the guard and the wait log.
#[derive(Debug)]
pub(crate) struct SpecApply<O> {
    guard: ApplyGuard,
    wait_log: WaitLog,
    ops: PhantomData<fn(O)>,
}

impl<O: SpecOps> SpecApply<O> {
    /// An apply loop whose guard applies both its rules.
    pub(crate) fn new() -> Self {
        Self::with_guard(ApplyGuard::default())
    }

    /// An apply loop with `guard`.
    pub(crate) fn with_guard(guard: ApplyGuard) -> Self {
        Self { guard, wait_log: WaitLog::default(), ops: PhantomData }
    }

    /// The operation must not be applied at `now` (a fight's hold).
    pub(crate) fn held(&self, id: &str, op: &O::Op, now: Instant) -> bool {
        self.guard.held(&O::key(id, op), now)
    }

    /// Apply `ops` in order, in [`batches`]: an operation of a spec that already failed (or
    /// is held) is not sent, and a held one marks its spec failed. Successes go to the guard,
    /// failures to `out`.
    pub(crate) fn apply<S: AsRef<str>>(
        &mut self,
        target: &str,
        host: &SharedHost,
        now: Instant,
        ops: &[(S, O::Op)],
        out: &mut Outcome,
    ) {
        let any_held = self.guard.any_held(now);
        for run in batches(ops) {
            let mut batch = Vec::with_capacity(run.len());
            for (id, op) in run {
                let id = id.as_ref();
                if out.failed(id) {
                    continue;
                }
                let key = O::key(id, op);
                if any_held && self.guard.held(&key, now) {
                    // Not applied: keep its bookkeeping as it was.
                    out.failed.insert(id.to_owned());
                    continue;
                }
                batch.push((id, op, key));
            }
            let sent: Vec<&O::Op> = batch.iter().map(|(_, op, _)| *op).collect();
            let results = O::apply(&mut *host.borrow_mut(), &sent);
            for ((id, op, key), result) in batch.into_iter().zip(results) {
                match result {
                    Ok(()) => {
                        let (name, detail) = (|| O::name(id, op), || format!("{op:?}"));
                        let applied =
                            Applied { key, value: O::value(op), name: &name, detail: &detail };
                        self.guard.applied(target, applied, now);
                    }
                    Err(e) => {
                        if O::refused_alone(op) {
                            out.refused.insert(key);
                        } else {
                            out.failed.insert(id.to_owned());
                        }
                        out.errors.push(O::error(id, op, e));
                    }
                }
            }
        }
    }

    /// The guard's keys of `ops`.
    pub(crate) fn keys<S: AsRef<str>>(ops: &[(S, O::Op)]) -> Vec<OpKey> {
        ops.iter().map(|(id, op)| O::key(id.as_ref(), op)).collect()
    }

    /// End the reconcile's applies: `pending` are the keys of the operations that still
    /// differed from the kernel when last planned. The guard's errors go to `out`.
    pub(crate) fn settle(
        &mut self,
        target: &str,
        pending: Vec<OpKey>,
        now: Instant,
        out: &mut Outcome,
    ) {
        out.errors.extend(self.guard.settle(target, pending, now));
    }

    /// The reconcile's report: the specs `waiting` for their link and the held operations
    /// as the condition, and when to look again.
    pub(crate) fn report(&mut self, ctx: &mut Ctx<'_>, waiting: &[impl AsRef<str>]) -> Next {
        self.wait_log.report(ctx, O::OBJECT, waiting);
        self.guard.report(ctx)
    }
}

/// The specs of `O` in the store, in ID order, and the IDs lacking `finalizer`.
pub(crate) fn desired<'s, O: SpecOps>(
    store: &'s Store,
    finalizer: &str,
) -> (Vec<Desired<'s, O::Spec>>, SortedIds<'s>) {
    let mut lacking: Vec<&str> = Vec::new();
    let mut desired: Vec<Desired<'_, O::Spec>> = store
        .list(Namespace::Network, O::Spec::KIND)
        .filter_map(|r| {
            let spec = r.spec_as::<O::Spec>()?;
            if !r.metadata.finalizers.contains(finalizer) {
                lacking.push(&r.metadata.id);
            }
            Some(Desired { id: &r.metadata.id, spec, phase: r.metadata.phase })
        })
        .collect();
    // The store lists them in ID order; the sort is for a store that would not.
    if !desired.is_sorted_by(|a, b| a.id <= b.id) {
        crate::sort::by(&mut desired, |a, b| a.id.cmp(b.id));
    }
    (desired, SortedIds::new(lacking))
}

/// Put on the finalizers of `add` and take off those of `release`, specs of `kind`.
pub(crate) fn write_finalizers(
    ctx: &mut Ctx<'_>,
    kind: Kind,
    add: &IdList,
    release: &IdList,
) -> Result<(), ControllerError> {
    for id in add.iter() {
        ctx.add_finalizer(Namespace::Network, kind, id)?;
    }
    for id in release.iter() {
        ctx.remove_finalizer(Namespace::Network, kind, id)?;
    }
    Ok(())
}

/// Every item was attempted: log all failures but the first, and return the first (the
/// runtime logs it and retries with backoff), or `next`.
pub(crate) fn first_error(
    target: &str,
    errors: Vec<HostError>,
    next: Next,
) -> Result<Next, ControllerError> {
    let mut errors = errors.into_iter();
    let first = errors.next();
    for e in errors {
        log::error!(target: target, "{e}");
    }
    match first {
        Some(e) => Err(e.into()),
        None => Ok(next),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;

    use super::*;
    use crate::host::fake::FakeHost;
    use crate::host::HostErrorKind;
    use crate::resource::AddressSpec;

    /// A test operation: its text, and how the host answers it.
    #[derive(Debug)]
    struct Op {
        text: &'static str,
        fails: bool,
        alone: bool,
    }

    const fn ok(text: &'static str) -> Op {
        Op { text, fails: false, alone: false }
    }

    thread_local! {
        /// The batches sent to the host, by operation text.
        static SENT: RefCell<Vec<Vec<&'static str>>> = const { RefCell::new(Vec::new()) };
    }

    struct TestOps;

    impl SpecOps for TestOps {
        type Spec = AddressSpec;
        type Op = Op;
        const OBJECT: &'static str = "test";

        fn what(_op: &Op) -> (u8, &'static str) {
            (0, "apply")
        }

        fn value(op: &Op) -> Option<u64> {
            Some(hash_of(op.text))
        }

        fn apply(_host: &mut dyn Host, ops: &[&Op]) -> Vec<Result<(), HostError>> {
            SENT.with(|s| s.borrow_mut().push(ops.iter().map(|op| op.text).collect()));
            let fail = |op: &Op| HostError {
                op: op.text.to_owned(),
                message: "refused".into(),
                kind: HostErrorKind::Invalid,
            };
            ops.iter().map(|op| if op.fails { Err(fail(op)) } else { Ok(()) }).collect()
        }

        fn refused_alone(op: &Op) -> bool {
            op.alone
        }

        fn error(id: &str, op: &Op, e: HostError) -> HostError {
            HostError { op: format!("{id}: {}", op.text), ..e }
        }
    }

    fn sent() -> Vec<Vec<&'static str>> {
        SENT.with(|s| std::mem::take(&mut *s.borrow_mut()))
    }

    /// Batches hold a spec once; a failed spec's later operations are not sent, a setting
    /// refused alone leaves its spec's others going; errors come out as the object words them.
    #[test]
    fn the_loop_batches_skips_failed_specs_and_lets_a_refused_setting_fail_alone() {
        let host: SharedHost = Rc::new(RefCell::new(FakeHost::new()));
        let mut apply = SpecApply::<TestOps>::new();
        let ops = [
            ("a", ok("a1")),
            ("a", Op { fails: true, ..ok("a2") }),
            ("a", ok("a3")),
            ("b", Op { fails: true, alone: true, ..ok("b1") }),
            ("b", ok("b2")),
            ("c", ok("c1")),
        ];
        let mut out = Outcome::default();
        apply.apply("t", &host, Instant::now(), &ops, &mut out);
        assert_eq!(sent(), [vec!["a1"], vec!["a2"], vec!["b1"], vec!["b2", "c1"]]);
        assert_eq!(out.failed.iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(out.refused.iter().collect::<Vec<_>>(), [&TestOps::key("b", &ops[3].1)]);
        let errors: Vec<&str> = out.errors.iter().map(|e| e.op.as_str()).collect();
        assert_eq!(errors, ["a: a2", "b: b1"]);
        // Finalizers: only specs that did not fail; a pending one is not released.
        let mut lacking = SortedIds::new(vec!["a", "c"]);
        assert_eq!(out.to_add(&["a", "b", "c"], &mut lacking).iter().collect::<Vec<_>>(), ["c"]);
        let release = out.to_release(&["a", "b", "c"], |id| id == "c");
        assert_eq!(release.iter().collect::<Vec<_>>(), ["b"]);
    }

    /// An operation the guard holds is not sent, and its spec counts as failed (its
    /// finalizer stays as it was); the guard's rule 2 errors join the reconcile's.
    #[test]
    fn a_held_operation_is_not_sent_and_fails_its_spec() {
        let host: SharedHost = Rc::new(RefCell::new(FakeHost::new()));
        let mut apply = SpecApply::<TestOps>::new();
        let t0 = Instant::now();
        let ops = [("a", ok("a1")), ("b", ok("b1"))];
        for i in 0..REPEAT_LIMIT {
            let now = t0 + Duration::from_millis(10) * i;
            let mut out = Outcome::default();
            apply.apply("t", &host, now, &ops[..1], &mut out);
            apply.settle("t", SpecApply::<TestOps>::keys(&ops[..1]), now, &mut out);
            assert_eq!(out.errors.len(), usize::from(i + 1 == REPEAT_LIMIT), "reconcile {i}");
        }
        sent();
        let now = t0 + Duration::from_millis(100);
        assert!(apply.held("a", &ops[0].1, now));
        let mut out = Outcome::default();
        apply.apply("t", &host, now, &ops, &mut out);
        assert_eq!(sent(), [vec!["b1"]]);
        assert!(out.failed("a") && !out.failed("b") && out.errors.is_empty());
    }
}
