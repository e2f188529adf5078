// SPDX-License-Identifier: Apache-2.0
//! The apply guard: one record of the operations a spec controller applied, and the rules
//! that stop one that does not stick from being applied forever (see [`ApplyGuard`]).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::host::{HostError, HostErrorKind};
use crate::runtime::{Ctx, Next};

/// The guard's text of an operation on a spec, `<object> <id>: <what>` (`route
/// inet4/10.0.0.1//1024: add`): made only when a fight is reported.
pub(crate) fn op_text(object: &str, id: &str, what: &str) -> String {
    let mut key = String::with_capacity(object.len() + id.len() + what.len() + 3);
    key.push_str(object);
    key.push(' ');
    key.push_str(id);
    key.push_str(": ");
    key.push_str(what);
    key
}

/// The guard's key of an operation on a spec: the spec's ID hashed and which operation
/// (`what`, an index into the controller's names of its operations). With one guard per
/// controller, two keys are equal when the texts of [`op_text`] are (two IDs hash alike with
/// odds of 2^-64 a pair, and would then share one count), and building one allocates
/// nothing: a large apply builds ten thousand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct OpKey {
    id: u64,
    what: u8,
}

impl OpKey {
    pub(crate) fn new(id: &str, what: u8) -> Self {
        Self { id: hash_of(id.as_bytes()), what }
    }

    /// The key of an operation named by its whole text (`link eth0: mtu 1400`).
    pub(crate) fn of_text(text: &str) -> Self {
        Self::new(text, u8::MAX)
    }
}

/// A 64-bit hash with fixed keys (SipHash): equal on every run, so tests can rely on it.
pub(crate) fn hash_of(value: &(impl std::hash::Hash + ?Sized)) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// Rule 2 of [`ApplyGuard`]: how many reconciles in a row may apply the very same operation
/// before it is treated as a kernel that does not keep what we ask (a diff that never settles).
pub(crate) const REPEAT_LIMIT: u32 = 5;

/// Rule 1 of [`ApplyGuard`]: how many applies of the same operation within [`FIGHT_WINDOW`]
/// mean that something else keeps undoing it (another writer on the link, or a kernel that does not keep the value).
pub(crate) const FIGHT_LIMIT: usize = 5;

/// The window [`FIGHT_LIMIT`] is counted in; also how long a contested value must stay put
/// before the fight is declared over.
pub(crate) const FIGHT_WINDOW: Duration = Duration::from_secs(30);

/// The first hold after a fight is detected; it doubles each time the value is undone again.
pub(crate) const FIGHT_HOLD_INITIAL: Duration = Duration::from_secs(2);

/// The longest hold: a fight that never ends costs one apply per this.
pub(crate) const FIGHT_HOLD_MAX: Duration = Duration::from_secs(120);

/// One operation's recent applies and its hold, once it was applied twice within
/// [`FIGHT_WINDOW`].
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
    /// The operation's text, made when a fight is detected: log lines and the condition name
    /// the operation by it. Set whenever a hold is.
    text: Option<String>,
}

impl Contest {
    /// A contest from an operation's first apply within the window.
    fn new(first: Instant) -> Self {
        Self {
            applies: VecDeque::from([first]),
            last_apply: first,
            hold_until: None,
            hold: FIGHT_HOLD_INITIAL,
            text: None,
        }
    }

    /// A fight was detected and has not ended.
    fn fighting(&self) -> bool {
        self.text.is_some()
    }

    fn held(&self, now: Instant) -> bool {
        self.hold_until.is_some_and(|t| now < t)
    }

    /// Record an apply at `now`; holds the operation when it is being undone.
    fn applied(&mut self, target: &str, now: Instant, text: &dyn Fn() -> String) {
        while self
            .applies
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= FIGHT_WINDOW)
        {
            self.applies.pop_front();
        }
        self.applies.push_back(now);
        self.last_apply = now;
        if self.applies.len() > FIGHT_LIMIT {
            self.applies.pop_front();
        }
        // While fighting, one more apply within the window means it was undone again.
        let fighting = self.fighting();
        let undone =
            if fighting { self.applies.len() >= 2 } else { self.applies.len() >= FIGHT_LIMIT };
        if !undone {
            return;
        }
        let hold = self.hold;
        let key = self.text.get_or_insert_with(text);
        if fighting {
            log::debug!(target: target, "{key}: undone again; holding it for {hold:?}");
        } else {
            log::warn!(
                target: target,
                "{key}: applied {FIGHT_LIMIT} times within {FIGHT_WINDOW:?}, something else keeps \
                 changing it (another writer?); holding it for {hold:?}, backing off up to \
                 {FIGHT_HOLD_MAX:?}"
            );
        }
        self.hold_until = Some(now + hold);
        self.hold = (hold * 2).min(FIGHT_HOLD_MAX);
        // After the hold one apply is expected (the other value is there); a second one within
        // the window means it was undone again.
        self.applies.clear();
    }
}

/// One successful apply, as [`ApplyGuard`] records it.
pub(crate) struct Applied<'a> {
    /// Which operation on which object, without its value where the value changes (a route's
    /// ID and "add"): rule 1 counts applies per key.
    pub key: OpKey,
    /// A hash of the whole operation, value included, when rule 2 counts it (`None`: it does
    /// not).
    pub value: Option<u64>,
    /// The operation's name in the fight warning and the condition: called only when rule 1
    /// finds a fight.
    pub name: &'a dyn Fn() -> String,
    /// The operation as rule 2's error names it: called only when that error is made.
    pub detail: &'a dyn Fn() -> String,
}

/// Stops an operation that does not stick from being applied forever. Each apply causes a
/// netlink event, the event wakes the controller, and an operation the kernel does not keep,
/// or that something else keeps undoing, would be applied again at once, forever.
///
/// The controller tells the guard of every operation that succeeded ([`Self::applied`]), asks
/// it before applying one ([`Self::held`]), and ends each reconcile with [`Self::settle`]
/// (which also says which operations still differ from the kernel). Two rules read that
/// record:
///
/// 1. **A fight**: an operation (by [`Applied::key`]) applied [`FIGHT_LIMIT`] times within
///    [`FIGHT_WINDOW`] is being undone by something else. It is *held* (not applied) for
///    [`FIGHT_HOLD_INITIAL`]; one warning names it and the controller's condition lists it.
///    After a hold one apply is expected (the other value is there); a second one within the
///    window is another undo and doubles the hold, up to [`FIGHT_HOLD_MAX`]. Counting in a
///    time window, not reconciles in a row, catches a value that flips: with two writers on
///    one link, our write's own event shows our value (nothing to do), the other writer's
///    event shows theirs, and each wakes the other at once.
/// 2. **A difference that never settles**: the very same operation (by [`Applied::value`],
///    value and all) applied in [`REPEAT_LIMIT`] reconciles in a row is a kernel that does not
///    keep what we ask, however slowly the reconciles come. [`Self::settle`] returns an error
///    naming it, on that reconcile and each further one in the row: the runtime backs the
///    controller off (250 ms doubling to 30 s) and the log says which operation does not
///    stick. Operations without a value are not counted.
///
/// What resets them:
/// - rule 1: an apply older than [`FIGHT_WINDOW`] no longer counts. A fight is over once the
///   operation is not held, was last applied [`FIGHT_WINDOW`] ago and no longer differs from
///   the kernel: an info line says so and it is forgotten (a later apply counts from one);
/// - rule 2: a reconcile that does not apply the operation (it had nothing to do, the apply
///   failed, or the operation was held) ends the row: the next apply counts from one.
///
/// Both rules fire together on a fast loop (five applies in five quick reconciles); rule 1
/// alone catches a flip, rule 2 alone an operation repeated more slowly than the window (a
/// WireGuard update written at each status poll). A guard made by [`Self::without_holds`]
/// applies rule 2 only: for writes whose key cannot tell two values apart.
///
/// Keys are [`OpKey`]s: a hash of the operation's text, which names the object, the attribute
/// and our value (links: `link eth0: mtu 1400`), or of the spec's ID and which operation
/// (addresses, routes, rules); texts are made only when a rule fires. An operation applied
/// once within the window is only its key and that time (`once`): a large apply records ten
/// thousand of them, which are forgotten [`FIGHT_WINDOW`] later. Values are 64-bit hashes,
/// not copies, kept in apply order and sorted only when the next reconcile applies something
/// again: after a reconcile that applied ten thousand routes, the next one usually applies
/// nothing, and nothing is sorted or looked up.
#[derive(Debug, Default)]
pub(crate) struct ApplyGuard {
    /// Rule 1 is off.
    no_holds: bool,
    once: HashMap<OpKey, Instant>,
    contests: BTreeMap<OpKey, Contest>,
    /// Rule 2: the values applied by the previous reconcile, each with its reconciles in a row.
    runs: Vec<(u64, u32)>,
    /// `runs` is sorted by value.
    runs_sorted: bool,
    /// Rule 2: this reconcile's values so far.
    this_runs: Vec<(u64, u32)>,
    /// Rule 2's errors of this reconcile.
    never_settles: Vec<HostError>,
}

impl ApplyGuard {
    /// A guard applying rule 2 only.
    pub(crate) fn without_holds() -> Self {
        Self { no_holds: true, ..Self::default() }
    }

    /// Record a successful apply at `now`: rule 1 holds it when it is being undone, rule 2
    /// counts its reconciles in a row.
    pub(crate) fn applied(&mut self, target: &str, op: Applied<'_>, now: Instant) {
        if let Some(value) = op.value {
            self.count_run(value, op.detail);
        }
        if !self.no_holds {
            self.count_apply(target, op.key, now, op.name);
        }
    }

    /// Rule 2: one more reconcile in a row for `value`.
    fn count_run(&mut self, value: u64, detail: &dyn Fn() -> String) {
        if !self.runs_sorted {
            // Stable: duplicates of one operation carry the same count anyway.
            crate::sort::by(&mut self.runs, |a, b| a.0.cmp(&b.0));
            self.runs_sorted = true;
        }
        let before = self
            .runs
            .binary_search_by(|(k, _)| k.cmp(&value))
            .ok()
            .and_then(|i| self.runs.get(i))
            .map_or(0, |(_, n)| *n);
        let n = before + 1;
        if n >= REPEAT_LIMIT {
            self.never_settles.push(HostError {
                message: format!(
                    "applied {n} times in a row but the kernel keeps reporting a difference"
                ),
                op: detail(),
                kind: HostErrorKind::Invalid,
            });
        }
        self.this_runs.push((value, n));
    }

    /// Is any operation held at `now`? One pass without key comparisons, so that a
    /// reconcile with thousands of operations and no fight skips a lookup per operation.
    pub(crate) fn any_held(&self, now: Instant) -> bool {
        self.contests.values().any(|c| c.held(now))
    }

    /// The operation must not be applied at `now`.
    pub(crate) fn held(&self, key: &OpKey, now: Instant) -> bool {
        self.contests.get(key).is_some_and(|c| c.held(now))
    }

    /// Rule 1: record an apply of `key` at `now`; holds it when it is being undone. `text`
    /// names the operation in the log and the condition; it is called only when a fight is
    /// detected.
    fn count_apply(&mut self, target: &str, key: OpKey, now: Instant, text: &dyn Fn() -> String) {
        if let Some(c) = self.contests.get_mut(&key) {
            c.applied(target, now, text);
            return;
        }
        match self.once.entry(key) {
            Entry::Vacant(e) => {
                e.insert(now);
            }
            Entry::Occupied(mut e) => {
                if now.saturating_duration_since(*e.get()) >= FIGHT_WINDOW {
                    // The earlier apply no longer counts.
                    *e.get_mut() = now;
                    return;
                }
                let (key, first) = e.remove_entry();
                let mut c = Contest::new(first);
                c.applied(target, now, text);
                self.contests.insert(key, c);
            }
        }
    }

    /// End a reconcile at `now`: returns rule 2's errors, and forgets what is over: a fight
    /// whose value stayed put for [`FIGHT_WINDOW`] (said once, at info level), and applies too
    /// old to count. `pending` holds the keys that still differ from the kernel, in any order:
    /// they are sorted only if one is asked about (after a large apply nothing is quiet yet).
    #[must_use]
    pub(crate) fn settle(
        &mut self,
        target: &str,
        mut pending: Vec<OpKey>,
        now: Instant,
    ) -> Vec<HostError> {
        // What this reconcile did not apply starts again at the next.
        self.runs = std::mem::take(&mut self.this_runs);
        self.runs_sorted = false;
        let errors = std::mem::take(&mut self.never_settles);
        let mut sorted = false;
        let mut pending = |key: &OpKey| {
            if !sorted {
                crate::sort::by(&mut pending, OpKey::cmp);
                sorted = true;
            }
            pending.binary_search(key).is_ok()
        };
        let quiet = |last: Instant| now.saturating_duration_since(last) >= FIGHT_WINDOW;
        self.once.retain(|key, last| !quiet(*last) || pending(key));
        self.contests.retain(|key, c| {
            if c.held(now) || !quiet(c.last_apply) || pending(key) {
                return true;
            }
            if let Some(text) = &c.text {
                log::info!(target: target, "{text}: stayed put for {FIGHT_WINDOW:?} after the last write; no longer contested");
            }
            false
        });
        errors
    }

    /// The operations held at `now`, for the controller's condition.
    pub(crate) fn contested(&self, now: Instant) -> Vec<&str> {
        self.contests.values().filter(|c| c.held(now)).filter_map(|c| c.text.as_deref()).collect()
    }

    /// Add the held operations to the controller's condition (after [`super::WaitLog::report`], which
    /// sets it afresh each reconcile) and say when to look again.
    pub(crate) fn report(&self, ctx: &mut Ctx<'_>) -> Next {
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
    pub(crate) fn next_wake(&self, now: Instant) -> Option<Instant> {
        self.contests
            .values()
            .filter_map(|c| match c.hold_until.filter(|t| now < *t) {
                Some(t) => Some(t),
                None if c.fighting() => Some(c.last_apply + FIGHT_WINDOW),
                None => None,
            })
            .min()
    }

    /// Nothing is remembered.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.once.is_empty() && self.contests.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An apply of a link-style operation, keyed by its text and not counted by rule 2.
    fn apply(g: &mut ApplyGuard, key: &str, t: Instant) {
        applied(g, OpKey::of_text(key), t, &|| key.to_owned());
    }

    /// An apply under `key` that rule 2 does not count.
    fn applied(g: &mut ApplyGuard, key: OpKey, t: Instant, name: &dyn Fn() -> String) {
        g.applied("t", Applied { key, value: None, name, detail: &String::new }, t);
    }

    /// The end of a reconcile in which rule 2 counted nothing, so it reports nothing.
    fn settle(g: &mut ApplyGuard, pending: Vec<OpKey>, t: Instant) {
        assert!(g.settle("t", pending, t).is_empty());
    }

    fn held(g: &ApplyGuard, key: &str, t: Instant) -> bool {
        g.held(&OpKey::of_text(key), t)
    }

    /// One reconcile at `t` that applied `ops`, each keyed and valued by its text, and
    /// rule 2's errors.
    fn reconcile_at(g: &mut ApplyGuard, ops: &[&str], t: Instant) -> Vec<HostError> {
        let ops: Vec<(&str, &str)> = ops.iter().map(|op| (*op, *op)).collect();
        reconcile_values(g, &ops, t)
    }

    /// One reconcile at `t` that applied `(key text, value text)` pairs, named by their
    /// value, and rule 2's errors.
    fn reconcile_values(g: &mut ApplyGuard, ops: &[(&str, &str)], t: Instant) -> Vec<HostError> {
        for (key, value) in ops {
            let (name, detail) = (|| format!("name {key}"), || (*value).to_owned());
            let key = OpKey::of_text(key);
            let a = Applied { key, value: Some(hash_of(*value)), name: &name, detail: &detail };
            g.applied("t", a, t);
        }
        g.settle("t", Vec::new(), t)
    }

    /// A reconcile as [`reconcile_at`], at one fixed time.
    fn check(g: &mut ApplyGuard, ops: &[&str]) -> Vec<HostError> {
        reconcile_at(g, ops, Instant::now())
    }

    /// The guards name an operation with the text it had when keys were that text.
    #[test]
    fn op_text_keeps_its_text() {
        let id = "inet4/10.0.0.1//1024";
        assert_eq!(op_text("route", id, "add"), format!("route {id}: add"));
        assert_eq!(
            op_text("address", "eth0/10.0.0.5/24", "replace"),
            "address eth0/10.0.0.5/24: replace"
        );
    }

    /// Compact keys are equal exactly when the texts they stand for are: IDs that are
    /// prefixes of each other, differ in one byte, or are equal in separate allocations, and
    /// the ten thousand route IDs of a large apply.
    #[test]
    fn op_keys_equal_exactly_when_their_texts_are() {
        let mut ids: Vec<String> = [
            "",
            "inet4/10.0.0.1//1024",
            "inet4/10.0.0.1//102",
            "inet4/10.0.0.1//10240",
            "inet4/10.0.0.2//1024",
            "eth0/inet6//2001:db8::/64/1024",
            "eth0/10.0.0.5/24",
        ]
        .map(String::from)
        .into();
        ids.extend(ids.clone());
        let whats = ["add", "delete", "replace"];
        for (a, wa) in ids.iter().flat_map(|i| (0..3u8).map(move |w| (i, w))) {
            for (b, wb) in ids.iter().flat_map(|i| (0..3u8).map(move |w| (i, w))) {
                let texts_equal = op_text("route", a, whats[usize::from(wa)])
                    == op_text("route", b, whats[usize::from(wb)]);
                assert_eq!(
                    OpKey::new(a, wa) == OpKey::new(b, wb),
                    texts_equal,
                    "{a} {wa} {b} {wb}"
                );
            }
        }
        let many: Vec<String> = (0..10_000u32)
            .map(|i| {
                format!(
                    "inet4/10.0.0.1/10.{}.{}.{}/32/1024",
                    100 + i / 65536,
                    (i / 256) % 256,
                    i % 256
                )
            })
            .collect();
        let mut keys: Vec<OpKey> =
            many.iter().flat_map(|id| [OpKey::new(id, 0), OpKey::new(id, 1)]).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 20_000);
    }

    #[test]
    fn repeat_guard_trips_on_the_same_op_only() {
        let mut g = ApplyGuard::default();
        for _ in 0..REPEAT_LIMIT - 1 {
            assert!(check(&mut g, &["add a"]).is_empty());
        }
        let errs = check(&mut g, &["add a", "add b"]);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].op, "add a");
        // Once the op is no longer issued, it starts from zero.
        assert!(check(&mut g, &[]).is_empty());
        assert!(check(&mut g, &["add a"]).is_empty());
    }

    #[test]
    fn fight_guard_catches_a_flip_and_doubles_its_hold() {
        let t0 = Instant::now();
        let key = "link eth0: mtu 1400";
        let mut g = ApplyGuard::default();
        // Applies with reconciles in between that needed nothing: still counted.
        for i in 0..FIGHT_LIMIT as u32 - 1 {
            apply(&mut g, key, t0 + Duration::from_millis(100) * i);
            settle(
                &mut g,
                Vec::new(),
                t0 + Duration::from_millis(100) * i + Duration::from_millis(50),
            );
            assert!(!held(&g, key, t0 + Duration::from_millis(100) * i));
        }
        let t = t0 + Duration::from_secs(1);
        apply(&mut g, key, t);
        assert!(
            held(&g, key, t) && held(&g, key, t + FIGHT_HOLD_INITIAL - Duration::from_millis(1))
        );
        assert_eq!(g.contested(t), [key]);
        assert_eq!(g.next_wake(t), Some(t + FIGHT_HOLD_INITIAL));
        // After the hold one apply is expected; a second within the window is another undo.
        let t = t + FIGHT_HOLD_INITIAL;
        assert!(!held(&g, key, t));
        apply(&mut g, key, t);
        assert!(!held(&g, key, t));
        settle(&mut g, vec![OpKey::of_text(key)], t);
        apply(&mut g, key, t + Duration::from_millis(10));
        assert!(held(&g, key, t + FIGHT_HOLD_INITIAL * 2));
        assert!(!held(&g, key, t + Duration::from_millis(10) + FIGHT_HOLD_INITIAL * 2));
        // Capped.
        let mut t = t;
        for _ in 0..20 {
            t += FIGHT_HOLD_MAX;
            apply(&mut g, key, t);
            apply(&mut g, key, t);
        }
        assert!(held(&g, key, t + FIGHT_HOLD_MAX - Duration::from_millis(1)));
        assert!(!held(&g, key, t + FIGHT_HOLD_MAX));
        // Once the value stays put for the window, the fight is over and forgotten.
        let t = t + FIGHT_HOLD_MAX;
        apply(&mut g, key, t);
        settle(&mut g, Vec::new(), t + FIGHT_WINDOW - Duration::from_millis(1));
        assert!(g.next_wake(t).is_some());
        settle(&mut g, Vec::new(), t + FIGHT_WINDOW);
        assert!(g.is_empty());
    }

    #[test]
    fn fight_guard_ignores_applies_spread_beyond_the_window() {
        let t0 = Instant::now();
        let mut g = ApplyGuard::default();
        for i in 0..20u32 {
            let t = t0 + FIGHT_WINDOW / 4 * i;
            assert!(!held(&g, "k", t));
            apply(&mut g, "k", t);
            assert!(!held(&g, "k", t), "apply {i}");
        }
    }

    #[test]
    fn fight_guard_counts_the_quiet_window_from_the_last_write_not_the_hold() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut g = ApplyGuard::default();
        for i in 0..FIGHT_LIMIT as u32 {
            apply(&mut g, "k", t0 + ms(10) * i);
        }
        assert!(held(&g, "k", t0 + ms(50)));
        // The hold is over and the kernel happens to show our value: not over yet.
        let t = t0 + FIGHT_HOLD_INITIAL + ms(500);
        settle(&mut g, Vec::new(), t);
        assert!(!g.is_empty(), "30 s have not passed since the last write");
        // Undone again: one apply, then the second means a doubled hold.
        apply(&mut g, "k", t);
        apply(&mut g, "k", t + ms(100));
        assert!(held(&g, "k", t + ms(100) + FIGHT_HOLD_INITIAL * 2 - ms(1)));
    }

    /// Keys that are not text: the text is made once, when the fight is detected, and names
    /// the operation in the condition; an operation applied once is forgotten after the window.
    #[test]
    fn fight_guard_with_compact_keys_makes_text_only_for_a_fight() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut g = ApplyGuard::default();
        let texts = std::cell::Cell::new(0);
        let text = || {
            texts.set(texts.get() + 1);
            op_text("route", "inet4/10.0.0.1//1024", "add")
        };
        let (k, other) =
            (OpKey::new("inet4/10.0.0.1//1024", 0), OpKey::new("inet4/10.0.0.1//1024", 1));
        applied(&mut g, other, t0, &text);
        for i in 0..FIGHT_LIMIT as u32 - 1 {
            applied(&mut g, k, t0 + ms(10) * i, &text);
            assert!(!g.held(&k, t0 + ms(10) * i));
        }
        assert_eq!(texts.get(), 0);
        let t = t0 + ms(100);
        applied(&mut g, k, t, &text);
        assert_eq!(texts.get(), 1);
        assert!(g.held(&k, t) && !g.held(&other, t));
        assert_eq!(g.contested(t), ["route inet4/10.0.0.1//1024: add"]);
        // Undone again: the text is not made again.
        let t = t + FIGHT_HOLD_INITIAL;
        applied(&mut g, k, t, &text);
        applied(&mut g, k, t + ms(1), &text);
        assert!(g.held(&k, t + ms(1)));
        assert_eq!(texts.get(), 1);
        // The key applied once is forgotten after the window unless it still differs.
        settle(&mut g, vec![other], t0 + FIGHT_WINDOW);
        assert!(g.once.contains_key(&other));
        settle(&mut g, Vec::new(), t0 + FIGHT_WINDOW);
        assert!(g.once.is_empty() && !g.contests.is_empty());
        // An apply after the window counts from one again.
        for i in 0..FIGHT_LIMIT as u32 {
            applied(&mut g, other, t0 + FIGHT_WINDOW * (i + 1), &text);
            assert!(!g.held(&other, t0 + FIGHT_WINDOW * (i + 1)));
        }
    }

    /// Rule 2 alone: reconciles further apart than rule 1's window, each applying the same
    /// operation, are reported from the fifth in a row on, by the operation's detail, and
    /// nothing is held.
    #[test]
    fn rule_2_reports_a_slow_repeat_and_rule_1_does_not_hold_it() {
        let t0 = Instant::now();
        let mut g = ApplyGuard::default();
        for i in 0..REPEAT_LIMIT - 1 {
            let t = t0 + FIGHT_WINDOW * 2 / 3 * i;
            assert!(reconcile_at(&mut g, &["add a"], t).is_empty(), "reconcile {i}");
            assert!(!held(&g, "add a", t));
        }
        for i in REPEAT_LIMIT - 1..REPEAT_LIMIT + 2 {
            let t = t0 + FIGHT_WINDOW * 2 / 3 * i;
            let errs = reconcile_at(&mut g, &["add a"], t);
            assert_eq!(errs.len(), 1, "reconcile {i}");
            assert_eq!(errs[0].op, "add a");
            assert!(errs[0].message.contains(&format!("applied {} times in a row", i + 1)));
            assert!(!held(&g, "add a", t) && g.contested(t).is_empty());
        }
    }

    /// Rule 1 alone: a value that flips (our apply, then a reconcile with nothing to do on
    /// our own event) is held at the fifth apply within the window; rule 2 never fires.
    #[test]
    fn rule_1_holds_a_flip_that_rule_2_never_sees() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut g = ApplyGuard::default();
        for i in 0..FIGHT_LIMIT as u32 {
            let t = t0 + ms(100) * i;
            assert!(reconcile_at(&mut g, &["add a"], t).is_empty());
            assert!(reconcile_at(&mut g, &[], t + ms(50)).is_empty());
        }
        let t = t0 + ms(100) * (FIGHT_LIMIT as u32 - 1);
        assert!(held(&g, "add a", t));
        assert_eq!(g.contested(t), ["name add a"]);
    }

    /// A fast loop (the same operation in quick reconciles in a row) trips both rules at the
    /// fifth apply: held, and reported. A reconcile that holds it applies nothing, which
    /// ends the row: after the hold, the next apply counts from one.
    #[test]
    fn a_fast_loop_trips_both_rules_and_a_hold_ends_the_row() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut g = ApplyGuard::default();
        for i in 0..REPEAT_LIMIT - 1 {
            assert!(reconcile_at(&mut g, &["add a"], t0 + ms(10) * i).is_empty());
        }
        let t = t0 + ms(10) * (REPEAT_LIMIT - 1);
        assert_eq!(reconcile_at(&mut g, &["add a"], t).len(), 1);
        assert!(held(&g, "add a", t));
        // During the hold the controller does not apply it.
        assert!(reconcile_at(&mut g, &[], t + ms(10)).is_empty());
        let t = t + FIGHT_HOLD_INITIAL;
        assert!(!held(&g, "add a", t));
        assert!(reconcile_at(&mut g, &["add a"], t).is_empty(), "the row starts again");
    }

    /// Rule 2's row ends at a reconcile that applies something else, the same key with
    /// another value, or nothing; operations are told apart by value.
    #[test]
    fn rule_2_row_ends_without_the_very_same_operation() {
        let mut g = ApplyGuard::without_holds();
        let t0 = Instant::now();
        let mut at = 0u32;
        let mut run = |g: &mut ApplyGuard, ops: &[(&str, &str)]| {
            at += 1;
            reconcile_values(g, ops, t0 + Duration::from_millis(10) * at)
        };
        let a = ("add a", "add a");
        for ends_the_row in [&[("add b", "add b")][..], &[], &[("add a", "add a mtu 1400")]] {
            for _ in 0..REPEAT_LIMIT - 1 {
                assert!(run(&mut g, &[a]).is_empty());
            }
            assert!(run(&mut g, ends_the_row).is_empty(), "{ends_the_row:?}");
        }
        for _ in 0..REPEAT_LIMIT - 2 {
            assert!(run(&mut g, &[a, a]).is_empty(), "twice in one reconcile counts once");
        }
        assert_eq!(run(&mut g, &[a]).len(), 0);
        assert_eq!(run(&mut g, &[a]).len(), 1);
    }

    /// A guard without holds never holds, however fast the applies, and still reports.
    #[test]
    fn without_holds_only_rule_2_applies() {
        let t = Instant::now();
        let mut g = ApplyGuard::without_holds();
        for _ in 0..REPEAT_LIMIT - 1 {
            assert!(reconcile_at(&mut g, &["wireguard set wg0"], t).is_empty());
        }
        assert_eq!(reconcile_at(&mut g, &["wireguard set wg0"], t).len(), 1);
        assert!(!held(&g, "wireguard set wg0", t) && !g.any_held(t));
        assert_eq!(g.next_wake(t), None);
        assert!(g.is_empty());
    }
}
