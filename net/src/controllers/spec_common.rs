// SPDX-License-Identifier: Apache-2.0
//! Helpers shared by the spec controllers.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::host::{HostError, HostErrorKind};
use crate::resource::{find_link, LinkStatus};
use crate::runtime::{ControllerError, Ctx, Next};

/// The fight guard's text of an operation on a spec, `<object> <id>: <what>` (`route
/// inet4/10.0.0.1//1024: add`): made only when a fight is reported.
pub(super) fn op_text(object: &str, id: &str, what: &str) -> String {
    let mut key = String::with_capacity(object.len() + id.len() + what.len() + 3);
    key.push_str(object);
    key.push(' ');
    key.push_str(id);
    key.push_str(": ");
    key.push_str(what);
    key
}

/// The fight guard's key of an operation on a spec: the spec's ID hashed and which operation
/// (`what`, an index into the controller's names of its operations). With one guard per
/// controller, two keys are equal when the texts of [`op_text`] are (two IDs hash alike with
/// odds of 2^-64 a pair, and would then share one count), and building one allocates
/// nothing: a large apply builds ten thousand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct OpKey {
    id: u64,
    what: u8,
}

impl OpKey {
    pub(super) fn new(id: &str, what: u8) -> Self {
        Self { id: hash_of(id.as_bytes()), what }
    }

    /// The key of an operation named by its whole text (`link eth0: mtu 1400`).
    pub(super) fn of_text(text: &str) -> Self {
        Self::new(text, u8::MAX)
    }
}

/// A 64-bit hash with fixed keys (SipHash): equal on every run, so tests can rely on it.
pub(super) fn hash_of(value: &(impl std::hash::Hash + ?Sized)) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// IDs copied out of the store for the finalizer writes after a reconcile, in one buffer:
/// ten thousand `String`s are ten thousand allocations.
#[derive(Debug, Default)]
pub(super) struct IdList {
    text: String,
    ends: Vec<usize>,
}

impl IdList {
    pub(super) fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).filter_map(|(a, b)| self.text.get(a..b))
    }
}

impl<S: AsRef<str>> FromIterator<S> for IdList {
    fn from_iter<I: IntoIterator<Item = S>>(ids: I) -> Self {
        let mut list = IdList::default();
        for id in ids {
            list.text.push_str(id.as_ref());
            list.ends.push(list.text.len());
        }
        list
    }
}

/// IDs in ascending order, asked about in ascending order too (both follow the store's
/// order): each question moves a cursor past the smaller IDs instead of searching again.
/// A question out of order is answered by a binary search.
#[derive(Debug)]
pub(super) struct SortedIds<'a> {
    ids: Vec<&'a str>,
    /// Every ID before this one is smaller than the last question.
    at: usize,
}

impl<'a> SortedIds<'a> {
    pub(super) fn new(mut ids: Vec<&'a str>) -> Self {
        if !ids.is_sorted() {
            crate::sort::by(&mut ids, |a, b| a.cmp(b));
        }
        Self { ids, at: 0 }
    }

    pub(super) fn contains(&mut self, id: &str) -> bool {
        let behind = self.at.checked_sub(1).and_then(|i| self.ids.get(i));
        if behind.is_some_and(|b| *b >= id) {
            return self.ids.binary_search(&id).is_ok();
        }
        let rest = self.ids.get(self.at..).unwrap_or_default();
        self.at += rest.iter().take_while(|x| **x < id).count();
        self.ids.get(self.at) == Some(&id)
    }
}

/// [`find_link`] remembering the last name asked: ten thousand routes on one link would
/// scan the links and compare names ten thousand times.
pub(super) struct LinkCache<'a, 's> {
    links: &'a [(String, LinkStatus)],
    last: Option<(&'s str, Option<(&'a str, &'a LinkStatus)>)>,
}

impl<'a, 's> LinkCache<'a, 's> {
    pub(super) fn new(links: &'a [(String, LinkStatus)]) -> Self {
        Self { links, last: None }
    }

    /// The link `name` refers to (see [`find_link`]).
    pub(super) fn find(&mut self, name: &'s str) -> Option<(&'a str, &'a LinkStatus)> {
        match self.last {
            Some((last, found)) if last == name => found,
            _ => {
                let found = find_link(self.links, name);
                self.last = Some((name, found));
                found
            }
        }
    }
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
/// Operations are counted by a 64-bit hash of their value, not a copy: a reconcile that
/// applied ten thousand routes would otherwise clone each one. The counts are kept in issue
/// order and sorted only when the next reconcile issues operations again: after a reconcile
/// that applied ten thousand routes, the next one usually issues none, and nothing is sorted
/// or looked up.
#[derive(Debug, Default)]
pub(super) struct RepeatGuard {
    counts: Vec<(u64, u32)>,
}

impl RepeatGuard {
    /// Record the operations that succeeded in this reconcile, each as a hash of its value
    /// (equal for equal operations, e.g. [`hash_of`]); returns an error, naming the operation
    /// by `text` of its index, for each one that hit the limit. Operations not issued this
    /// time start again.
    pub(super) fn check(&mut self, ops: &[u64], text: &dyn Fn(usize) -> String) -> Vec<HostError> {
        let mut previous = std::mem::take(&mut self.counts);
        if ops.is_empty() {
            return Vec::new();
        }
        // Stable: duplicates of one operation carry the same count anyway.
        crate::sort::by(&mut previous, |a, b| a.0.cmp(&b.0));
        self.counts.reserve(ops.len());
        let mut errors = Vec::new();
        for (i, hash) in ops.iter().enumerate() {
            let before = previous
                .binary_search_by(|(k, _)| k.cmp(hash))
                .ok()
                .and_then(|i| previous.get(i))
                .map_or(0, |(_, n)| *n);
            let n = before + 1;
            if n >= REPEAT_LIMIT {
                errors.push(HostError {
                    message: format!(
                        "applied {n} times in a row but the kernel keeps reporting a difference"
                    ),
                    op: text(i),
                    kind: HostErrorKind::Invalid,
                });
            }
            self.counts.push((*hash, n));
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

/// Catches an operation that has to be applied again and again because something undoes it.
///
/// Counting applies in a time window, not reconciles in a row, catches a value that flips:
/// with two writers on one link, our write's own netlink event shows our value (nothing to
/// do, which would reset a "repeated in a row" counter), the other writer's event shows
/// theirs, and each wakes the other at once. After [`FIGHT_LIMIT`] applies within
/// [`FIGHT_WINDOW`] the operation is held, one warning names it, and each further undo
/// doubles the hold up to [`FIGHT_HOLD_MAX`]; once the value has stayed put for
/// [`FIGHT_WINDOW`] an info line says the fight is over. Keys are [`OpKey`]s: a hash of the
/// operation's text, which names the object, the attribute and our value (links: `link eth0:
/// mtu 1400`), or of the spec's ID and which operation (addresses, routes); the text for the
/// log and the condition is made only when a fight is detected.
///
/// An operation applied once within the window is only its key and that time (`once`): a
/// large apply records ten thousand of them, which are forgotten [`FIGHT_WINDOW`] later.
#[derive(Debug, Default)]
pub(super) struct FightGuard {
    once: HashMap<OpKey, Instant>,
    contests: BTreeMap<OpKey, Contest>,
}

impl FightGuard {
    /// Is any operation held at `now`? One pass without key comparisons, so that a
    /// reconcile with thousands of operations and no fight skips a lookup per operation.
    pub(super) fn any_held(&self, now: Instant) -> bool {
        self.contests.values().any(|c| c.held(now))
    }

    /// The operation must not be applied at `now`.
    pub(super) fn held(&self, key: &OpKey, now: Instant) -> bool {
        self.contests.get(key).is_some_and(|c| c.held(now))
    }

    /// Record a successful apply of `key` at `now`; holds it when it is being undone. `text`
    /// names the operation in the log and the condition; it is called only when a fight is
    /// detected.
    pub(super) fn applied(
        &mut self,
        target: &str,
        key: OpKey,
        now: Instant,
        text: &dyn Fn() -> String,
    ) {
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

    /// Forget what is over at `now`: a fight whose value stayed put for [`FIGHT_WINDOW`] (said
    /// once, at info level), and applies too old to count. `pending` holds the keys that
    /// still differ from the kernel, in any order: they are sorted only if one is asked
    /// about (after a large apply nothing is quiet yet).
    pub(super) fn settle(&mut self, target: &str, mut pending: Vec<OpKey>, now: Instant) {
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
    }

    /// The operations held at `now`, for the controller's condition.
    pub(super) fn contested(&self, now: Instant) -> Vec<&str> {
        self.contests.values().filter(|c| c.held(now)).filter_map(|c| c.text.as_deref()).collect()
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

    /// An apply of a link-style operation, keyed by its text.
    fn apply(g: &mut FightGuard, key: &str, t: Instant) {
        g.applied("t", OpKey::of_text(key), t, &|| key.to_owned());
    }

    fn held(g: &FightGuard, key: &str, t: Instant) -> bool {
        g.held(&OpKey::of_text(key), t)
    }

    /// A repeat guard check of operations named by their text.
    fn check(g: &mut RepeatGuard, ops: &[&str]) -> Vec<HostError> {
        let hashes: Vec<u64> = ops.iter().map(|op| hash_of(*op)).collect();
        g.check(&hashes, &|i| ops.get(i).map(|op| (*op).to_owned()).unwrap_or_default())
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
    fn id_list_gives_back_its_ids_in_order() {
        let ids = ["b", "", "a/10.0.0.1//1024", "b"];
        let list: IdList = ids.iter().collect();
        assert_eq!(list.iter().collect::<Vec<_>>(), ids);
        assert_eq!(IdList::from_iter(Vec::<String>::new()).iter().count(), 0);
    }

    /// The cache answers as [`find_link`] does, for names, aliases, altnames and unknown
    /// names, asked once or again.
    #[test]
    fn link_cache_answers_as_find_link() {
        let link = |index, alias: &str, alt: &[&str]| LinkStatus {
            index,
            alias: alias.into(),
            alt_names: alt.iter().map(|a| (*a).to_owned()).collect(),
            ..Default::default()
        };
        let links = vec![
            ("lo".to_owned(), link(1, "", &[])),
            ("eth0".to_owned(), link(2, "uplink", &["enp1s0"])),
            ("eth1".to_owned(), link(3, "eth0", &[])),
        ];
        let mut cache = LinkCache::new(&links);
        for _ in 0..2 {
            for name in ["lo", "eth0", "uplink", "enp1s0", "eth1", "eth9", ""] {
                let got = cache.find(name).map(|(n, l)| (n, l.index));
                let want = find_link(&links, name).map(|(n, l)| (n, l.index));
                assert_eq!(got, want, "{name}");
            }
        }
    }

    /// Asked in order or not, the answer is membership.
    #[test]
    fn sorted_ids_answer_membership_in_any_order() {
        let ids = ["a", "c", "c/1", "e", "g"];
        let asked = ["", "a", "b", "c", "c/1", "c/1", "d", "a", "e", "c", "f", "g", "h", "g"];
        let mut s = SortedIds::new(vec!["g", "c", "a", "e", "c/1"]);
        for q in asked {
            assert_eq!(s.contains(q), ids.contains(&q), "{q}");
        }
        let mut s = SortedIds::new(Vec::new());
        assert!(!s.contains("a") && !s.contains(""));
    }

    /// Sorted or not, each run holds an ID at most once and the runs keep the order.
    #[test]
    fn batches_of_sorted_ops_split_only_at_a_repeated_id() {
        let ops: Vec<(&str, u32)> =
            vec![("a", 1), ("a", 2), ("b", 3), ("c", 4), ("c", 5), ("c", 6)];
        let runs: Vec<Vec<u32>> =
            batches(&ops).iter().map(|run| run.iter().map(|(_, v)| *v).collect()).collect();
        assert_eq!(runs, [vec![1], vec![2, 3, 4], vec![5], vec![6]]);
        let unsorted: Vec<(&str, u32)> = vec![("b", 1), ("a", 2), ("b", 3), ("a", 4)];
        let runs: Vec<Vec<u32>> =
            batches(&unsorted).iter().map(|run| run.iter().map(|(_, v)| *v).collect()).collect();
        assert_eq!(runs, [vec![1, 2], vec![3, 4]]);
    }

    #[test]
    fn repeat_guard_trips_on_the_same_op_only() {
        let mut g = RepeatGuard::default();
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
        let mut g = FightGuard::default();
        // Applies with reconciles in between that needed nothing: still counted.
        for i in 0..FIGHT_LIMIT as u32 - 1 {
            apply(&mut g, key, t0 + Duration::from_millis(100) * i);
            g.settle(
                "t",
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
        g.settle("t", vec![OpKey::of_text(key)], t);
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
        g.settle("t", Vec::new(), t + FIGHT_WINDOW - Duration::from_millis(1));
        assert!(g.next_wake(t).is_some());
        g.settle("t", Vec::new(), t + FIGHT_WINDOW);
        assert!(g.is_empty());
    }

    #[test]
    fn fight_guard_ignores_applies_spread_beyond_the_window() {
        let t0 = Instant::now();
        let mut g = FightGuard::default();
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
        let mut g = FightGuard::default();
        for i in 0..FIGHT_LIMIT as u32 {
            apply(&mut g, "k", t0 + ms(10) * i);
        }
        assert!(held(&g, "k", t0 + ms(50)));
        // The hold is over and the kernel happens to show our value: not over yet.
        let t = t0 + FIGHT_HOLD_INITIAL + ms(500);
        g.settle("t", Vec::new(), t);
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
        let mut g = FightGuard::default();
        let texts = std::cell::Cell::new(0);
        let text = || {
            texts.set(texts.get() + 1);
            op_text("route", "inet4/10.0.0.1//1024", "add")
        };
        let (k, other) =
            (OpKey::new("inet4/10.0.0.1//1024", 0), OpKey::new("inet4/10.0.0.1//1024", 1));
        g.applied("t", other, t0, &text);
        for i in 0..FIGHT_LIMIT as u32 - 1 {
            g.applied("t", k, t0 + ms(10) * i, &text);
            assert!(!g.held(&k, t0 + ms(10) * i));
        }
        assert_eq!(texts.get(), 0);
        let t = t0 + ms(100);
        g.applied("t", k, t, &text);
        assert_eq!(texts.get(), 1);
        assert!(g.held(&k, t) && !g.held(&other, t));
        assert_eq!(g.contested(t), ["route inet4/10.0.0.1//1024: add"]);
        // Undone again: the text is not made again.
        let t = t + FIGHT_HOLD_INITIAL;
        g.applied("t", k, t, &text);
        g.applied("t", k, t + ms(1), &text);
        assert!(g.held(&k, t + ms(1)));
        assert_eq!(texts.get(), 1);
        // The key applied once is forgotten after the window unless it still differs.
        g.settle("t", vec![other], t0 + FIGHT_WINDOW);
        assert!(g.once.contains_key(&other));
        g.settle("t", Vec::new(), t0 + FIGHT_WINDOW);
        assert!(g.once.is_empty() && !g.contests.is_empty());
        // An apply after the window counts from one again.
        for i in 0..FIGHT_LIMIT as u32 {
            g.applied("t", other, t0 + FIGHT_WINDOW * (i + 1), &text);
            assert!(!g.held(&other, t0 + FIGHT_WINDOW * (i + 1)));
        }
    }
}

/// Splits `ops` into consecutive runs in which no object appears twice, in order: a run can
/// go to the kernel as one batch, and an object's later operation is only sent after its
/// earlier one has succeeded.
pub(crate) fn batches<S: AsRef<str>, T>(ops: &[(S, T)]) -> Vec<&[(S, T)]> {
    // In ID order, as the spec controllers plan, an ID can only repeat right after itself:
    // split there, without a set of the IDs seen.
    if ops.windows(2).all(|w| matches!(w, [a, b] if a.0.as_ref() <= b.0.as_ref())) {
        return ops.chunk_by(|a, b| a.0.as_ref() != b.0.as_ref()).collect();
    }
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
