// SPDX-License-Identifier: Apache-2.0
//! Kernel module tables and load order: `modules.dep`, `modules.softdep` and `modules.alias`
//! of `/lib/modules/<release>`, and the order a module and everything it needs load in.
//!
//! `modules.dep` lines read `path/to/mod.ko: dep1.ko dep2.ko`, every (transitive) dependency
//! listed, the last one to be loaded first (as modprobe reads it). `modules.softdep` lines read
//! `softdep MOD pre: A B post: C`: modules the kernel cannot see a symbol dependency on (a
//! crypto algorithm wanted by name), loaded before (after) `MOD`; their names may be aliases.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::alias::{normalize, Aliases};

/// The largest table file read (Debian's full `modules.alias` is about 1.5 MiB).
const TABLE_LIMIT: u64 = 16 << 20;
/// How deep softdeps may chain (they can name each other; kmod stops cycles the same way).
const SOFTDEP_DEPTH: usize = 8;
/// How deep dependencies are followed while ordering them. Real chains are a few modules deep,
/// and `modules.dep` lists every transitive dependency on the module's own line anyway; without
/// a bound a crafted file (one line per link of a long chain) would recurse once per line and
/// overflow the loader thread's stack.
pub const DEP_DEPTH: usize = 64;

/// A module's name from its path: `kernel/net/8021q/8021q.ko` is `8021q`.
pub fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    normalize(file.split(".ko").next().unwrap_or(file))
}

/// Parsed `modules.dep`: module name → (path, dependency paths).
pub fn parse_modules_dep(text: &str) -> BTreeMap<String, (String, Vec<String>)> {
    net::sort::into_map(text.lines().filter_map(|line| {
        let (path, deps) = line.split_once(':')?;
        // The name from the trimmed path too: one file, one name (and one load).
        let path = path.trim();
        let deps = deps.split_whitespace().map(str::to_owned).collect();
        Some((module_name(path), (path.to_owned(), deps)))
    }))
}

/// One module's soft dependencies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SoftDep {
    /// Loaded before the module.
    pub pre: Vec<String>,
    /// Loaded after it.
    pub post: Vec<String>,
}

/// Parsed `modules.softdep` (or a modprobe.d file's `softdep` lines): module → its softdeps.
pub fn parse_softdep(text: &str) -> BTreeMap<String, SoftDep> {
    let mut out: BTreeMap<String, SoftDep> = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("softdep") {
            continue;
        }
        let Some(module) = words.next() else { continue };
        let entry = out.entry(normalize(module)).or_default();
        let mut post = false;
        for w in words {
            match w {
                "pre:" => post = false,
                "post:" => post = true,
                name if post => entry.post.push(name.to_owned()),
                name => entry.pre.push(name.to_owned()),
            }
        }
    }
    out
}

/// Everything needed to turn a name, alias or modalias into module files.
#[derive(Debug, Default)]
pub struct Tables {
    /// `/lib/modules/<release>`.
    pub base: PathBuf,
    dep: BTreeMap<String, (String, Vec<String>)>,
    soft: BTreeMap<String, SoftDep>,
    /// `modules.alias`.
    pub aliases: Aliases,
}

impl Tables {
    /// Tables from their texts (tests, and [`Tables::load`]).
    pub fn from_texts(base: PathBuf, dep: &str, softdep: &str, alias: &str) -> Self {
        Self {
            base,
            dep: parse_modules_dep(dep),
            soft: parse_softdep(softdep),
            aliases: Aliases::parse(alias),
        }
    }

    /// Read the tables of the running kernel. `modules.dep` must be there; the others may be
    /// missing (an image built with a fixed list only has no alias table).
    pub fn load() -> Result<Self, String> {
        let release = nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default();
        Self::load_from(&Path::new("/lib/modules").join(release))
    }

    /// [`Tables::load`] from a given directory.
    pub fn load_from(base: &Path) -> Result<Self, String> {
        let read = |name: &str| net::bounded::read_text(&base.join(name), TABLE_LIMIT);
        let dep = read("modules.dep")
            .map_err(|e| format!("{}: {e}", base.join("modules.dep").display()))?;
        let softdep = read("modules.softdep").unwrap_or_default();
        let alias = read("modules.alias").unwrap_or_default();
        Ok(Self::from_texts(base.to_path_buf(), &dep, &softdep, &alias))
    }

    /// The modules `name` stands for: itself if it is a module, else what its alias matches.
    pub fn resolve(&self, name: &str) -> Vec<String> {
        let module = normalize(name);
        if self.dep.contains_key(&module) {
            return vec![module];
        }
        self.aliases.lookup(name)
    }

    /// The files to load for `module`, in order: each dependency before what needs it,
    /// softdeps `pre:` before and `post:` after their module, each file once. `None` when the
    /// module is not in `modules.dep` (built in, or not shipped).
    pub fn chain(&self, module: &str) -> Option<Vec<String>> {
        let module = normalize(module);
        self.dep.get(&module)?;
        let mut order = Vec::new();
        let mut seen = BTreeSet::new();
        self.visit(&module, &mut order, &mut seen, 0, 0);
        Some(order)
    }

    fn visit(
        &self,
        module: &str,
        order: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
        depth: usize,
        nest: usize,
    ) {
        let Some((path, deps)) = self.dep.get(module) else { return };
        if nest > DEP_DEPTH {
            return;
        }
        if !seen.insert(module.to_owned()) {
            return;
        }
        let soft = self.soft.get(module);
        if depth < SOFTDEP_DEPTH {
            for pre in soft.map(|s| s.pre.as_slice()).unwrap_or_default() {
                for m in self.resolve(pre) {
                    self.visit(&m, order, seen, depth + 1, nest + 1);
                }
            }
        }
        // The last listed dependency loads first; each one's own softdeps come with it.
        for d in deps.iter().rev() {
            self.visit(&module_name(d), order, seen, depth, nest + 1);
        }
        order.push(path.clone());
        if depth < SOFTDEP_DEPTH {
            for post in soft.map(|s| s.post.as_slice()).unwrap_or_default() {
                for m in self.resolve(post) {
                    self.visit(&m, order, seen, depth + 1, nest + 1);
                }
            }
        }
    }
}

/// The names in a module list file: one per line, `#` comments and blank lines skipped.
pub fn parse_list(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const DEP: &str = "kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/drivers/net/bonding/bonding.ko: kernel/net/tls/tls.ko
kernel/net/tls/tls.ko:
kernel/net/netfilter/nf_tables.ko: kernel/lib/libcrc32c.ko kernel/net/netfilter/nfnetlink.ko
kernel/lib/libcrc32c.ko:
kernel/net/netfilter/nfnetlink.ko:
kernel/crypto/crc32c_generic.ko:
kernel/arch/x86/crypto/crc32c-intel.ko:
kernel/drivers/net/ethernet/intel/e1000/e1000.ko:
";
    const SOFTDEP: &str = "# Soft dependencies extracted from modules themselves.
softdep libcrc32c pre: crc32c
softdep virtio_net post: tls
softdep loop_a pre: loop_b
softdep loop_b pre: loop_a
";
    const ALIAS: &str = "alias crc32c crc32c_generic
alias crypto-crc32c crc32c_generic
alias crc32c crc32c-intel
alias rtnl-link-bond bonding
alias pci:v00008086d0000100Esv*sd*bc*sc*i* e1000
";

    fn tables() -> Tables {
        Tables::from_texts(PathBuf::from("/m"), DEP, SOFTDEP, ALIAS)
    }

    #[test]
    fn dependencies_first_each_once() {
        let t = tables();
        assert_eq!(
            t.chain("virtio-net").unwrap(),
            [
                "kernel/net/core/failover.ko",
                "kernel/drivers/net/net_failover.ko",
                "kernel/drivers/net/virtio_net.ko",
                // softdep post:
                "kernel/net/tls/tls.ko",
            ]
        );
        assert_eq!(t.chain("nope"), None);
        assert_eq!(
            t.chain("bonding").unwrap(),
            ["kernel/net/tls/tls.ko", "kernel/drivers/net/bonding/bonding.ko"]
        );
    }

    #[test]
    fn softdep_pre_through_an_alias_before_the_dependency() {
        assert_eq!(
            tables().chain("nf_tables").unwrap(),
            [
                "kernel/net/netfilter/nfnetlink.ko",
                "kernel/crypto/crc32c_generic.ko",
                "kernel/arch/x86/crypto/crc32c-intel.ko",
                "kernel/lib/libcrc32c.ko",
                "kernel/net/netfilter/nf_tables.ko",
            ]
        );
    }

    #[test]
    fn softdep_cycles_end() {
        let t = Tables::from_texts(PathBuf::new(), "a/loop_a.ko:\na/loop_b.ko:\n", SOFTDEP, "");
        assert_eq!(t.chain("loop_a").unwrap(), ["a/loop_b.ko", "a/loop_a.ko"]);
    }

    #[test]
    fn resolve_names_aliases_and_modaliases() {
        let t = tables();
        assert_eq!(t.resolve("crc32c-intel"), ["crc32c_intel"]);
        assert_eq!(t.resolve("rtnl-link-bond"), ["bonding"]);
        assert_eq!(t.resolve("pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00"), ["e1000"]);
        assert!(t.resolve("pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00").is_empty());
    }

    #[test]
    fn softdeps_parse_pre_and_post() {
        let s = parse_softdep("softdep a-b pre: x y post: z\nsoftdep c post: w pre: v\nother\n");
        assert_eq!(s["a_b"], SoftDep { pre: vec!["x".into(), "y".into()], post: vec!["z".into()] });
        assert_eq!(s["c"], SoftDep { pre: vec!["v".into()], post: vec!["w".into()] });
    }

    #[test]
    fn list_files() {
        assert_eq!(parse_list("# c\nvirtio_pci\n\n  e1000 # nic\n"), ["virtio_pci", "e1000"]);
    }
}
