// SPDX-License-Identifier: Apache-2.0
//! Helpers shared by the spec controllers.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use crate::host::{AddressOp, HostError, HostErrorKind, RouteOp};
use crate::resource::Resource;
use crate::runtime::{ControllerError, Ctx, Next};

/// The fight guard's key of an operation on a spec, `<object> <id>: <what>` (`route
/// inet4/10.0.0.1//1024: add`), written without the `fmt` machinery: routes and addresses
/// build one per operation, ten thousand in a large apply.
pub(super) fn op_key(object: &str, id: &str, what: &str) -> String {
    let mut key = String::with_capacity(object.len() + id.len() + what.len() + 3);
    key.push_str(object);
    key.push(' ');
    key.push_str(id);
    key.push_str(": ");
    key.push_str(what);
    key
}

/// An operation as the repeat guard counts it: its text, or the operation itself, compared
/// field by field and written (`Debug`) only for an error. Formatting every route operation
/// of a large apply cost more than applying it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum OpText {
    /// An operation named by its text.
    Text(String),
    /// A route operation.
    Route(RouteOp),
    /// An address operation.
    Address(AddressOp),
}

impl fmt::Display for OpText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpText::Text(text) => f.write_str(text),
            OpText::Route(op) => write!(f, "{op:?}"),
            OpText::Address(op) => write!(f, "{op:?}"),
        }
    }
}

/// Does `r` carry the finalizer `name`? A spec controller skips adding one it already holds:
/// with ten thousand specs, each add is a store lookup and an allocation that changes nothing.
pub(super) fn has_finalizer(r: &Resource, name: &str) -> bool {
    r.metadata.finalizers.contains(name)
}

/// Reports specs waiting for a link: a condition on the controller and one log line each
/// time the set changes, not once per reconcile.
#[derive(Debug, Default)]
pub(super) struct WaitLog {
    last: BTreeSet<String>,
}

impl WaitLog {
    pub(super) fn report(&mut self, ctx: &mut Ctx<'_>, what: &str, waiting: &[impl AsRef<str>]) {
        let now: BTreeSet<String> = waiting.iter().map(|w| w.as_ref().to_owned()).collect();
        if now != self.last && !now.is_empty() {
            let list: Vec<&str> = now.iter().map(String::as_str).collect();
            // The link controller owns the warning for a missing link; addresses and routes
            // on it say so only at debug level, so one missing link is one console line.
            let level = if what == "link" { log::Level::Warn } else { log::Level::Debug };
            log::log!(target: ctx.name(), level, "waiting for link: {what} {}", list.join(", "));
        }
        ctx.set_condition((!now.is_empty()).then(|| {
            format!(
                "waiting for link: {what} {}",
                now.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        }));
        self.last = now;
    }
}

/// Every item was attempted: log all failures but the first, and return the first (the
/// runtime logs it and retries with backoff).
pub(super) fn first_error(target: &str, errors: Vec<HostError>) -> Result<Next, ControllerError> {
    let mut errors = errors.into_iter();
    let first = errors.next();
    for e in errors {
        log::error!(target: target, "{e}");
    }
    match first {
        Some(e) => Err(e.into()),
        None => Ok(Next::Idle),
    }
}

/// How many reconciles in a row may issue the very same operation before it is treated as a
/// kernel that does not keep what we ask (a diff that never settles).
pub(super) const REPEAT_LIMIT: u32 = 5;

/// Breaks apply loops that run through the kernel: each apply causes a netlink event, the
/// event wakes the controller, and a diff that never settles would apply again forever
/// An operation that succeeded [`REPEAT_LIMIT`] reconciles in a row
/// is reported as an error, so the runtime backs off (at most one retry per
/// `BACKOFF_INITIAL`) and the log says which operation does not stick.
///
/// The counts are kept in issue order and sorted only when the next reconcile issues
/// operations again: after a reconcile that applied ten thousand routes, the next one usually
/// issues none, and nothing is sorted or looked up.
#[derive(Debug, Default)]
pub(super) struct RepeatGuard {
    counts: Vec<(OpText, u32)>,
}

impl RepeatGuard {
    /// Record the operations that succeeded in this reconcile; returns an error for each one
    /// that hit the limit. Operations not issued this time start again.
    pub(super) fn check(&mut self, ops: impl Iterator<Item = OpText>) -> Vec<HostError> {
        let mut previous = std::mem::take(&mut self.counts);
        let mut sorted = false;
        let mut errors = Vec::new();
        for op in ops {
            if !sorted {
                // Stable: duplicates of one operation carry the same count anyway.
                crate::sort::by(&mut previous, |a, b| a.0.cmp(&b.0));
                sorted = true;
            }
            let before = previous
                .binary_search_by(|(k, _)| k.cmp(&op))
                .ok()
                .and_then(|i| previous.get(i))
                .map_or(0, |(_, n)| *n);
            let n = before + 1;
            if n >= REPEAT_LIMIT {
                errors.push(HostError {
                    message: format!(
                        "applied {n} times in a row but the kernel keeps reporting a difference"
                    ),
                    op: op.to_string(),
                    kind: HostErrorKind::Invalid,
                });
            }
            self.counts.push((op, n));
        }
        errors
    }
}

/// How many applies of the same operation within [`FIGHT_WINDOW`] mean that something else
/// keeps undoing it (another writer on the link, or a kernel that does not keep the value).
pub(super) const FIGHT_LIMIT: usize = 5;

/// The window [`FIGHT_LIMIT`] is counted in; also how long a contested value must stay put
/// before the fight is declared over.
pub(super) const FIGHT_WINDOW: Duration = Duration::from_secs(30);

/// The first hold after a fight is detected; it doubles each time the value is undone again.
pub(super) const FIGHT_HOLD_INITIAL: Duration = Duration::from_secs(2);

/// The longest hold: a fight that never ends costs one apply per this.
pub(super) const FIGHT_HOLD_MAX: Duration = Duration::from_secs(120);

/// One operation's recent applies and its hold.
#[derive(Debug)]
struct Contest {
    /// Applies within [`FIGHT_WINDOW`], oldest first (at most [`FIGHT_LIMIT`]); emptied when
    /// a hold starts.
    applies: VecDeque<Instant>,
    /// The last apply (kept across holds: the quiet window counts from it).
    last_apply: Instant,
    /// Held (not applied) until then.
    hold_until: Option<Instant>,
    /// The next hold's length.
    hold: Duration,
    /// A fight was detected and has not ended.
    fighting: bool,
}

/// Catches an operation that has to be applied again and again because something undoes it.
///
/// Counting applies in a time window, not reconciles in a row, catches a value that flips:
/// with two writers on one link, our write's own netlink event shows our value (nothing to
/// do, which would reset a "repeated in a row" counter), the other writer's event shows
/// theirs, and each wakes the other at once. After [`FIGHT_LIMIT`] applies within
/// [`FIGHT_WINDOW`] the operation is held, one warning names it, and each further undo
/// doubles the hold up to [`FIGHT_HOLD_MAX`]; once the value has stayed put for
/// [`FIGHT_WINDOW`] an info line says the fight is over. Keys are operation texts that name
/// the object, the attribute and our value (`link eth0: mtu 1400`).
#[derive(Debug, Default)]
pub(super) struct FightGuard {
    contests: BTreeMap<String, Contest>,
}

impl FightGuard {
    /// Is any operation held at `now`? One pass without key comparisons, so that a
    /// reconcile with thousands of operations and no fight skips a lookup per operation.
    pub(super) fn any_held(&self, now: Instant) -> bool {
        self.contests.values().any(|c| c.hold_until.is_some_and(|t| now < t))
    }

    /// The operation must not be applied at `now`.
    pub(super) fn held(&self, key: &str, now: Instant) -> bool {
        self.contests.get(key).and_then(|c| c.hold_until).is_some_and(|t| now < t)
    }

    /// Record a successful apply of `key` at `now`; holds it when it is being undone.
    pub(super) fn applied(&mut self, target: &str, key: &str, now: Instant) {
        let c = self.contests.entry(key.to_owned()).or_insert_with(|| Contest {
            applies: VecDeque::new(),
            last_apply: now,
            hold_until: None,
            hold: FIGHT_HOLD_INITIAL,
            fighting: false,
        });
        while c.applies.front().is_some_and(|t| now.saturating_duration_since(*t) >= FIGHT_WINDOW) {
            c.applies.pop_front();
        }
        c.applies.push_back(now);
        c.last_apply = now;
        if c.applies.len() > FIGHT_LIMIT {
            c.applies.pop_front();
        }
        // While fighting, one more apply within the window means it was undone again.
        let undone = if c.fighting { c.applies.len() >= 2 } else { c.applies.len() >= FIGHT_LIMIT };
        if !undone {
            return;
        }
        let hold = c.hold;
        if c.fighting {
            log::debug!(target: target, "{key}: undone again; holding it for {hold:?}");
        } else {
            log::warn!(
                target: target,
                "{key}: applied {FIGHT_LIMIT} times within {FIGHT_WINDOW:?}, something else keeps \
                 changing it (another writer?); holding it for {hold:?}, backing off up to \
                 {FIGHT_HOLD_MAX:?}"
            );
        }
        c.fighting = true;
        c.hold_until = Some(now + hold);
        c.hold = (hold * 2).min(FIGHT_HOLD_MAX);
        // After the hold one apply is expected (the other value is there); a second one within
        // the window means it was undone again.
        c.applies.clear();
    }

    /// Forget what is over at `now`: a fight whose value stayed put for [`FIGHT_WINDOW`] (said
    /// once, at info level), and applies too old to count. `pending` holds the keys that
    /// still differ from the kernel.
    pub(super) fn settle(&mut self, target: &str, pending: &BTreeSet<String>, now: Instant) {
        self.contests.retain(|key, c| {
            let held = c.hold_until.is_some_and(|t| now < t);
            let quiet = now.saturating_duration_since(c.last_apply) >= FIGHT_WINDOW;
            if held || !quiet || pending.contains(key) {
                return true;
            }
            if c.fighting {
                log::info!(target: target, "{key}: stayed put for {FIGHT_WINDOW:?} after the last write; no longer contested");
            }
            false
        });
    }

    /// The keys held at `now`, for the controller's condition.
    pub(super) fn contested(&self, now: Instant) -> Vec<&str> {
        self.contests
            .iter()
            .filter(|(_, c)| c.hold_until.is_some_and(|t| now < t))
            .map(|(k, _)| k.as_str())
            .collect()
    }

    /// Add the held operations to the controller's condition (after [`WaitLog::report`], which
    /// sets it afresh each reconcile) and say when to look again.
    pub(super) fn report(&self, ctx: &mut Ctx<'_>) -> Next {
        let now = ctx.now();
        let contested = self.contested(now);
        if !contested.is_empty() {
            let held = format!("held, something else keeps changing it: {}", contested.join(", "));
            let condition = match ctx.condition() {
                Some(waiting) => format!("{waiting}; {held}"),
                None => held,
            };
            ctx.set_condition(Some(condition));
        }
        match self.next_wake(now) {
            Some(t) => Next::At(t),
            None => Next::Idle,
        }
    }

    /// When to look again: the end of a hold, or of a fight's quiet window.
    pub(super) fn next_wake(&self, now: Instant) -> Option<Instant> {
        self.contests
            .values()
            .filter_map(|c| match c.hold_until.filter(|t| now < *t) {
                Some(t) => Some(t),
                None if c.fighting => Some(c.last_apply + FIGHT_WINDOW),
                None => None,
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guards' keys name an operation with the text they had when they were formatted.
    #[test]
    fn guard_keys_keep_their_text() {
        let id = "inet4/10.0.0.1//1024";
        assert_eq!(op_key("route", id, "add"), format!("route {id}: add"));
        assert_eq!(
            op_key("address", "eth0/10.0.0.5/24", "replace"),
            "address eth0/10.0.0.5/24: replace"
        );
        let op = RouteOp::Delete(crate::resource::RouteStatus {
            family: crate::resource::Family::Inet4,
            dst: None,
            src: None,
            gateway: Some("10.0.0.1".parse().unwrap()),
            out_link_index: 2,
            out_link_name: "eth0".into(),
            table: crate::resource::RoutingTable::MAIN,
            priority: 1024,
            scope: crate::resource::Scope::GLOBAL,
            kind: crate::resource::RouteType::UNICAST,
            flags: crate::resource::RouteFlags::default(),
            protocol: crate::resource::RouteProtocol::STATIC,
            mtu: 0,
        });
        assert_eq!(OpText::Route(op.clone()).to_string(), format!("{op:?}"));
        assert_eq!(OpText::Text("add a".into()).to_string(), "add a");
    }

    #[test]
    fn repeat_guard_trips_on_the_same_op_only() {
        let mut g = RepeatGuard::default();
        let op = |s: &str| OpText::Text(s.to_owned());
        for _ in 0..REPEAT_LIMIT - 1 {
            assert!(g.check([op("add a")].into_iter()).is_empty());
        }
        let errs = g.check([op("add a"), op("add b")].into_iter());
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].op, "add a");
        // Once the op is no longer issued, it starts from zero.
        assert!(g.check(std::iter::empty()).is_empty());
        assert!(g.check([op("add a")].into_iter()).is_empty());
    }

    #[test]
    fn fight_guard_catches_a_flip_and_doubles_its_hold() {
        let t0 = Instant::now();
        let key = "link eth0: mtu 1400";
        let pending: BTreeSet<String> = [key.to_owned()].into();
        let mut g = FightGuard::default();
        // Applies with reconciles in between that needed nothing: still counted.
        for i in 0..FIGHT_LIMIT as u32 - 1 {
            g.applied("t", key, t0 + Duration::from_millis(100) * i);
            g.settle(
                "t",
                &BTreeSet::new(),
                t0 + Duration::from_millis(100) * i + Duration::from_millis(50),
            );
            assert!(!g.held(key, t0 + Duration::from_millis(100) * i));
        }
        let t = t0 + Duration::from_secs(1);
        g.applied("t", key, t);
        assert!(g.held(key, t) && g.held(key, t + FIGHT_HOLD_INITIAL - Duration::from_millis(1)));
        assert_eq!(g.contested(t), [key]);
        assert_eq!(g.next_wake(t), Some(t + FIGHT_HOLD_INITIAL));
        // After the hold one apply is expected; a second within the window is another undo.
        let t = t + FIGHT_HOLD_INITIAL;
        assert!(!g.held(key, t));
        g.applied("t", key, t);
        assert!(!g.held(key, t));
        g.settle("t", &pending, t);
        g.applied("t", key, t + Duration::from_millis(10));
        assert!(g.held(key, t + FIGHT_HOLD_INITIAL * 2));
        assert!(!g.held(key, t + Duration::from_millis(10) + FIGHT_HOLD_INITIAL * 2));
        // Capped.
        let mut t = t;
        for _ in 0..20 {
            t += FIGHT_HOLD_MAX;
            g.applied("t", key, t);
            g.applied("t", key, t);
        }
        assert!(g.held(key, t + FIGHT_HOLD_MAX - Duration::from_millis(1)));
        assert!(!g.held(key, t + FIGHT_HOLD_MAX));
        // Once the value stays put for the window, the fight is over and forgotten.
        let t = t + FIGHT_HOLD_MAX;
        g.applied("t", key, t);
        g.settle("t", &BTreeSet::new(), t + FIGHT_WINDOW - Duration::from_millis(1));
        assert!(g.next_wake(t).is_some());
        g.settle("t", &BTreeSet::new(), t + FIGHT_WINDOW);
        assert!(g.contests.is_empty());
    }

    #[test]
    fn fight_guard_ignores_applies_spread_beyond_the_window() {
        let t0 = Instant::now();
        let mut g = FightGuard::default();
        for i in 0..20u32 {
            let t = t0 + FIGHT_WINDOW / 4 * i;
            assert!(!g.held("k", t));
            g.applied("t", "k", t);
            assert!(!g.held("k", t), "apply {i}");
        }
    }

    #[test]
    fn fight_guard_counts_the_quiet_window_from_the_last_write_not_the_hold() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut g = FightGuard::default();
        for i in 0..FIGHT_LIMIT as u32 {
            g.applied("t", "k", t0 + ms(10) * i);
        }
        assert!(g.held("k", t0 + ms(50)));
        // The hold is over and the kernel happens to show our value: not over yet.
        let t = t0 + FIGHT_HOLD_INITIAL + ms(500);
        g.settle("t", &BTreeSet::new(), t);
        assert!(!g.contests.is_empty(), "30 s have not passed since the last write");
        // Undone again: one apply, then the second means a doubled hold.
        g.applied("t", "k", t);
        g.applied("t", "k", t + ms(100));
        assert!(g.held("k", t + ms(100) + FIGHT_HOLD_INITIAL * 2 - ms(1)));
    }
}

/// Splits `ops` into consecutive runs in which no object appears twice, in order: a run can
/// go to the kernel as one batch, and an object's later operation is only sent after its
/// earlier one has succeeded.
pub(crate) fn batches<S: AsRef<str>, T>(ops: &[(S, T)]) -> Vec<&[(S, T)]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (i, (id, _)) in ops.iter().enumerate() {
        if !seen.insert(id.as_ref()) {
            out.push(ops.get(start..i).unwrap_or_default());
            start = i;
            seen.clear();
            seen.insert(id.as_ref());
        }
    }
    if start < ops.len() {
        out.push(ops.get(start..).unwrap_or_default());
    }
    out
}

#[cfg(test)]
mod batch_tests {
    use super::batches;

    #[test]
    fn an_object_repeated_starts_a_new_batch_and_order_is_kept() {
        let ops: Vec<(String, u32)> = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("a", 5)]
            .map(|(i, v)| (i.to_owned(), v))
            .into();
        let runs: Vec<Vec<u32>> =
            batches(&ops).iter().map(|run| run.iter().map(|(_, v)| *v).collect()).collect();
        assert_eq!(runs, [vec![1, 2], vec![3, 4], vec![5]]);
        assert!(batches::<String, u32>(&[]).is_empty());
    }
}
