// SPDX-License-Identifier: Apache-2.0
//! Partial loading: one invalid entry costs its entry, not the document.
//!
//! A document is deserialized and checked; on the first problem, the narrowest unit holding
//! it (the field, else the list item) is removed from the document's YAML tree and the rest
//! is tried again, until it loads. Each problem becomes one [`ConfigError`] naming the
//! field's path and line in the original text, and what was dropped.
//!
//! Some units are read as a whole: anything invalid inside a route, a peer, a nameserver, a
//! host entry, a link selector or `machine.tenantNetworks` drops that route, peer, nameserver,
//! entry, selector or agent, because what is left would mean something else (a route without
//! its gateway is a direct route; a selector without one of its fields matches more links; an
//! agent without its `node` reports under the hostname).
//!
//! When dropping a field makes its parent invalid (a device without its `interface`, a peer
//! without its key), the parent goes as well and the first line says so. Nothing can be
//! dropped from the root: a document whose root is wrong is dropped as a whole.

use serde_yaml::Value;

use super::error::{ConfigError, Position};
use super::locate::{Seg, YamlPath};

/// The most rounds (one dropped unit, or several found together, per round) before the
/// document is dropped as a whole: each round parses the document again.
pub(crate) const MAX_ROUNDS: usize = 64;

/// The most text parsed again (each round, and each position looked up: both parse the whole
/// document), summed over rounds: bounds the time a large document with many invalid
/// entries can cost. At least this much, and four times the document's length (a 16 MiB
/// document: its first reading, its tree, the lines of one round's problems, one more round).
const REPARSE_BUDGET: usize = 32 << 20;

/// The most problems handled in one round (each one's position costs a parse); the others
/// are found again in the next round.
const PER_ROUND: usize = 16;

/// Units dropped whole when anything inside them is invalid (see the module docs).
const WHOLE_UNITS: [&str; 8] = [
    "routes",
    "peers",
    "nameservers",
    "extraHostEntries",
    "deviceSelector",
    "deviceSelectors",
    "selector",
    "tenantNetworks",
];

/// The original text and the units removed so far (in its coordinates), to find where a
/// path of the pruned document was in the original one.
pub(crate) struct Source<'a> {
    /// The document's text as written.
    pub text: &'a str,
    /// Units removed, as paths in `text`.
    pub removed: Vec<YamlPath>,
}

impl<'a> Source<'a> {
    /// Nothing removed yet.
    pub(crate) fn new(text: &'a str) -> Self {
        Self { text, removed: Vec::new() }
    }

    /// `path` of the pruned document, as a path of the original one: list indices skip the
    /// items removed before them.
    pub(crate) fn original(&self, path: &YamlPath) -> YamlPath {
        let mut out: Vec<Seg> = Vec::new();
        for seg in path.segs() {
            match seg {
                Seg::Key(k) => out.push(Seg::Key(k.clone())),
                Seg::Index(n) => {
                    let mut gone: Vec<usize> = self
                        .removed
                        .iter()
                        .filter_map(|r| match r.segs().split_last() {
                            Some((Seg::Index(i), head)) if head == out.as_slice() => Some(*i),
                            _ => None,
                        })
                        .collect();
                    gone.sort_unstable();
                    let mut i = *n;
                    for g in gone {
                        if g <= i {
                            i += 1;
                        }
                    }
                    out.push(Seg::Index(i));
                }
            }
        }
        YamlPath::from_segs(out)
    }

    /// Where `path` of the pruned document is in the original text.
    pub(crate) fn locate(&self, path: &YamlPath) -> Option<Position> {
        self.original(path).locate(self.text)
    }

    /// `path (line N)` for a path of the pruned document, or the bare path.
    pub(crate) fn at_line(&self, path: &YamlPath) -> String {
        let path = self.original(path);
        match path.locate(self.text) {
            Some(p) => format!("{path} (line {})", p.line),
            None => path.to_string(),
        }
    }
}

/// What loading a document left: the value (`None`: the document was dropped whole), one
/// error per dropped unit, and the units removed.
pub(crate) struct Loaded<'a, T> {
    pub value: Option<T>,
    pub errors: Vec<ConfigError>,
    pub source: Source<'a>,
    /// For each of `source.removed`, the error that says so.
    said_by: Vec<usize>,
    /// Bytes of text still to be parsed (see [`REPARSE_BUDGET`]).
    budget: usize,
}

/// A document read whole at the first try from elsewhere than its text (the tree the bounds
/// scan built): what [`load`] returns for it.
pub(crate) fn loaded<T>(text: &str, value: T) -> Loaded<'_, T> {
    Loaded {
        value: Some(value),
        errors: Vec::new(),
        source: Source::new(text),
        said_by: Vec::new(),
        budget: REPARSE_BUDGET.max(text.len().saturating_mul(4)),
    }
}

/// A problem found in one round, in the pruned document's coordinates.
struct Problem {
    path: YamlPath,
    position: Option<Position>,
    message: String,
}

/// Load `text` with `deser`, dropping what `deser` or `check` refuses (see the module docs).
/// `check` returns the problems of a value that deserialized, as paths of that value.
pub(crate) fn load<'a, T>(
    text: &'a str,
    deser: impl Fn(&str) -> Result<T, serde_yaml::Error>,
    check: impl Fn(&T, &Source<'_>) -> Vec<(YamlPath, String)>,
) -> Loaded<'a, T> {
    let mut out = Loaded {
        value: None,
        errors: Vec::new(),
        source: Source::new(text),
        said_by: Vec::new(),
        budget: REPARSE_BUDGET.max(text.len().saturating_mul(4)),
    };
    let mut tree: Option<Value> = None;
    let mut pruned: Option<String> = None;
    for round in 0..=MAX_ROUNDS {
        let current = pruned.as_deref().unwrap_or(text);
        let spent = spend(&mut out.budget, current.len());
        let problems = match deser(current) {
            Err(e) => {
                let e = ConfigError::from_yaml(&e);
                // Positions of later rounds are in the pruned text: found again below.
                let position = if round == 0 { e.position } else { None };
                vec![Problem { path: YamlPath::parse(&e.path), position, message: e.message }]
            }
            Ok(value) => {
                let found = check(&value, &out.source);
                if found.is_empty() {
                    out.value = Some(value);
                    sort(&mut out);
                    return out;
                }
                found
                    .into_iter()
                    .map(|(path, message)| Problem { path, position: None, message })
                    .collect()
            }
        };
        if round == MAX_ROUNDS || !spent {
            let first = problems.into_iter().next();
            let (path, message) = first.map_or((String::new(), String::new()), |p| {
                (out.source.original(&p.path).to_string(), p.message)
            });
            let position = YamlPath::parse(&path).locate(text);
            let e = ConfigError::new(
                path,
                position,
                format!("{message}; too many invalid entries, so the whole document is dropped"),
            );
            out.errors.push(e);
            return abandon(out);
        }
        if tree.is_none() {
            spend(&mut out.budget, text.len());
            match serde_yaml::from_str::<Value>(text) {
                Ok(v) => tree = Some(v),
                Err(_) => {
                    // Not a tree either: the first problem costs the document.
                    for p in problems.into_iter().take(1) {
                        out.errors.push(whole(&out.source, p));
                    }
                    return abandon(out);
                }
            }
        }
        let Some(doc) = tree.as_mut() else { return out };
        let mut units: Vec<(YamlPath, usize)> = Vec::new();
        let mut root = false;
        let mut problems: Vec<Problem> = problems.into_iter().take(PER_ROUND).collect();
        place(&mut problems, &mut out);
        for problem in problems {
            let unit = unit_of(doc, &problem.path);
            if unit.is_root() {
                root = true;
            }
            let said = record(&mut out, &problem, &unit);
            units.push((unit, said));
        }
        if root {
            return abandon(out);
        }
        // Remove the deepest and last first, so the other paths stay valid; a unit inside
        // another one goes with it.
        units.sort_by(|a, b| b.0.segs().cmp(a.0.segs()));
        units.dedup_by(|a, b| a.0 == b.0);
        let mut done: Vec<YamlPath> = Vec::new();
        for (unit, said) in units {
            if done.iter().any(|d| unit.within(d)) {
                continue;
            }
            out.source.removed.push(out.source.original(&unit));
            out.said_by.push(said);
            remove(doc, unit.segs());
            done.push(unit);
        }
        match serde_yaml::to_string(doc) {
            Ok(t) => pruned = Some(t),
            Err(_) => return abandon(out),
        }
    }
    abandon(out)
}

/// The document is dropped whole: every line says so (none may say that only its entry
/// went), in the order of the text.
fn abandon<T>(mut out: Loaded<'_, T>) -> Loaded<'_, T> {
    out.value = None;
    for e in &mut out.errors {
        e.dropped = Some(DOCUMENT.into());
    }
    sort(&mut out);
    out
}

/// Lines in the order of the text (rounds find serde's problems before the checks'); the
/// removals' references into them are not needed any more.
fn sort<T>(out: &mut Loaded<'_, T>) {
    out.errors.sort_by_key(|e| e.position.map_or((usize::MAX, 0), |p| (p.line, p.column)));
    out.said_by.clear();
}

/// What a dropped document is called in [`ConfigError::dropped`].
pub(crate) const DOCUMENT: &str = "the whole document";

/// The first problem of a document that cannot be pruned.
fn whole(source: &Source<'_>, p: Problem) -> ConfigError {
    let path = source.original(&p.path);
    let position = p.position.or_else(|| path.locate(source.text));
    let mut e = ConfigError::new(path.to_string(), position, p.message);
    e.dropped = Some(DOCUMENT.into());
    e
}

/// Find the lines of a round's problems in one pass over the original text: each one's path,
/// else its closest enclosing node there (a check may name a key left out). What the pass
/// cannot see (a path through an alias) is left to [`nearest`].
fn place<T>(problems: &mut [Problem], out: &mut Loaded<'_, T>) {
    let originals: Vec<Option<YamlPath>> = problems
        .iter()
        .map(|p| p.position.is_none().then(|| out.source.original(&p.path)))
        .collect();
    let mut wanted: Vec<YamlPath> = Vec::new();
    for path in originals.iter().flatten() {
        let mut at = path.clone();
        while !at.is_root() {
            let up = at.parent();
            wanted.push(at);
            at = up;
        }
    }
    if wanted.is_empty() || !spend(&mut out.budget, out.source.text.len()) {
        return;
    }
    let found = super::positions::locate_all(out.source.text, &wanted);
    let at: Vec<(YamlPath, Position)> =
        wanted.into_iter().zip(found).filter_map(|(w, f)| f.map(|f| (w, f))).collect();
    for (problem, original) in problems.iter_mut().zip(&originals) {
        let Some(path) = original else { continue };
        let mut step = path.clone();
        while !step.is_root() && problem.position.is_none() {
            problem.position = at.iter().find(|(w, _)| *w == step).map(|(_, p)| *p);
            step = step.parent();
        }
    }
}

/// Take `bytes` of parsing from `budget`; false when it is spent.
fn spend(budget: &mut usize, bytes: usize) -> bool {
    match budget.checked_sub(bytes) {
        Some(left) => {
            *budget = left;
            true
        }
        None => false,
    }
}

/// Where `path` is, or else the closest enclosing node that is in the text (a check may name
/// a key left out, whose default is wrong); `None` once the budget is spent.
fn nearest(path: &YamlPath, text: &str, budget: &mut usize) -> Option<Position> {
    let mut at = path.clone();
    while spend(budget, text.len()) {
        if let Some(p) = at.locate(text) {
            return Some(p);
        }
        if at.is_root() {
            return None;
        }
        at = at.parent();
    }
    None
}

/// One line per dropped unit: a problem that only follows from an earlier drop (its path
/// holds or is a unit already removed) widens that line instead of adding one. Returns the
/// index of the line.
fn record<T>(out: &mut Loaded<'_, T>, problem: &Problem, unit: &YamlPath) -> usize {
    let path = out.source.original(&problem.path);
    let dropped =
        if unit.is_root() { DOCUMENT.to_owned() } else { out.source.original(unit).to_string() };
    let earlier = out.source.removed.iter().position(|r| r.within(&path));
    if let Some(i) = earlier.and_then(|i| out.said_by.get(i).copied()) {
        if let Some(e) = out.errors.get_mut(i) {
            let at = if path.is_root() { "the document".to_owned() } else { path.to_string() };
            e.message = super::error::excerpt_quotes(&format!(
                "{}; without it, {at}: {}",
                e.message, problem.message
            ));
            e.dropped = Some(dropped);
            return i;
        }
    }
    let position = problem.position.or_else(|| nearest(&path, out.source.text, &mut out.budget));
    let mut e = ConfigError::new(path.to_string(), position, problem.message.clone());
    e.dropped = Some(dropped);
    out.errors.push(e);
    out.errors.len() - 1
}

/// The unit to drop for a problem at `path`: the outermost whole unit holding it, else the
/// path itself; a path no longer in the tree (a default, or already dropped) gives its
/// parent.
fn unit_of(doc: &Value, path: &YamlPath) -> YamlPath {
    let segs = path.segs();
    let whole =
        segs.iter().position(|s| matches!(s, Seg::Key(k) if WHOLE_UNITS.contains(&k.as_ref())));
    let mut unit = match whole {
        Some(i) => {
            // The list item when the unit is a list, else the map itself.
            let end = match segs.get(i + 1) {
                Some(Seg::Index(_)) => i + 2,
                _ => i + 1,
            };
            YamlPath::from_segs(segs.iter().take(end).cloned().collect())
        }
        None => path.clone(),
    };
    while !unit.is_root() && find(doc, unit.segs()).is_none() {
        unit = unit.parent();
    }
    unit
}

fn find<'v>(doc: &'v Value, segs: &[Seg]) -> Option<&'v Value> {
    let mut at = doc;
    for seg in segs {
        at = match (seg, at) {
            (Seg::Key(k), Value::Mapping(m)) => m.get(k.as_ref())?,
            (Seg::Index(i), Value::Sequence(s)) => s.get(*i)?,
            (_, Value::Tagged(t)) => find(&t.value, std::slice::from_ref(seg))?,
            _ => return None,
        };
    }
    Some(at)
}

/// Remove the node at `segs` (a map entry or a list item) from `doc`.
fn remove(doc: &mut Value, segs: &[Seg]) {
    let Some((last, head)) = segs.split_last() else { return };
    let mut at = doc;
    for seg in head {
        let next = match (seg, at) {
            (Seg::Key(k), Value::Mapping(m)) => m.get_mut(k.as_ref()),
            (Seg::Index(i), Value::Sequence(s)) => s.get_mut(*i),
            _ => None,
        };
        let Some(next) = next else { return };
        at = next;
    }
    match (last, at) {
        (Seg::Key(k), Value::Mapping(m)) => {
            m.remove(k.as_ref());
        }
        (Seg::Index(i), Value::Sequence(s)) if *i < s.len() => {
            s.remove(*i);
        }
        _ => {}
    }
}
