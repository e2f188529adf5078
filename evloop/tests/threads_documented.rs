// SPDX-License-Identifier: Apache-2.0
//! The Threads table in docs/architecture.md lists exactly the threads the code starts with
//! `spawn_worker`: a new thread without a row, or a row for a thread that is gone, fails.
#![allow(clippy::tests_outside_test_module)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The workspace's members, from its `Cargo.toml` (`members = [...]` on one line).
fn members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let line = manifest.lines().find(|l| l.starts_with("members")).expect("a members line");
    line.split('"').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The names (or, for a `format!` name, its fixed start) passed to `spawn_worker` in every
/// member's sources but this crate's own (its tests start threads of their own).
fn names_in_code(root: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    let members = members(root);
    assert!(members.len() >= 8, "workspace members: {members:?}");
    for member in members.iter().filter(|m| *m != "evloop") {
        rust_files(&root.join(member).join("src"), &mut files);
    }
    let mut names = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, _) in text.match_indices("spawn_worker(") {
            let rest = &text[i + "spawn_worker(".len()..];
            let rest = rest.strip_prefix("&format!(").unwrap_or(rest);
            let Some(rest) = rest.strip_prefix('"') else { continue };
            let end = rest.find(['"', '{']).unwrap();
            names.insert(rest[..end].to_owned());
        }
    }
    names
}

/// The first cell of each row of the Threads table: the names in backquotes.
fn names_in_doc(root: &Path) -> Vec<String> {
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let section = doc.split("\n## Threads\n").nth(1).expect("a Threads section");
    let section = section.split("\n## ").next().unwrap();
    let mut names = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cell = line.split('|').nth(1).unwrap();
        names.extend(cell.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    names
}

#[test]
fn every_worker_thread_has_a_row_and_every_row_a_thread() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let code = names_in_code(&root);
    let doc = names_in_doc(&root);
    assert!(code.len() >= 9, "found too few spawn_worker calls: {code:?}");
    for name in &code {
        assert!(
            doc.iter().any(|d| d.starts_with(name.as_str())),
            "thread {name:?} is started with spawn_worker but has no row in docs/architecture.md"
        );
    }
    for d in &doc {
        assert!(
            code.iter().any(|name| d.starts_with(name.as_str())),
            "docs/architecture.md lists thread {d:?}, which no spawn_worker call starts"
        );
    }
}
