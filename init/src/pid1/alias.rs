// SPDX-License-Identifier: Apache-2.0
//! `modules.alias`: which modules claim a device's `modalias` (or an alias such as
//! `rtnl-link-bond`). Each line reads `alias PATTERN MODULE`; the pattern is a shell glob
//! matched against the whole string as kmod does with `fnmatch(3)` and no flags: `*` any run
//! of bytes, `?` one byte, `[...]` one byte of a set (ranges `a-z`, negation `!` or `^`, a
//! leading `]` is a member, an unclosed `[` is a literal). Pure: no file access here.

/// Module names treat `-` and `_` alike; this is the `_` spelling.
pub fn normalize(name: &str) -> String {
    name.replace('-', "_")
}

/// One `alias` line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Alias {
    pattern: String,
    module: String,
}

/// The parsed `modules.alias`, in file order (kmod loads matches in that order too).
#[derive(Debug, Clone, Default)]
pub struct Aliases {
    entries: Vec<Alias>,
}

impl Aliases {
    /// Parse `modules.alias`; lines that are not `alias PATTERN MODULE` are skipped.
    pub fn parse(text: &str) -> Self {
        let entries = text
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                if words.next()? != "alias" {
                    return None;
                }
                let pattern = words.next()?.to_owned();
                let module = normalize(words.next()?);
                Some(Alias { pattern, module })
            })
            .collect();
        Self { entries }
    }

    /// How many aliases there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The modules whose alias matches `text`, each once, in file order.
    pub fn lookup(&self, text: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in &self.entries {
            if glob_match(a.pattern.as_bytes(), text.as_bytes()) && !out.contains(&a.module) {
                out.push(a.module.clone());
            }
        }
        out
    }
}

/// A bracket expression at the start of `p` (just after its `[`): whether `c` is in it, and
/// how many bytes of `p` it took including the closing `]`. `None` when it never closes.
fn bracket(p: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 0;
    let negate = matches!(p.first(), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let lo = *p.get(i)?;
        if lo == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        // A range `lo-hi`, unless the `-` is the last member.
        match (p.get(i + 1), p.get(i + 2)) {
            (Some(b'-'), Some(&hi)) if hi != b']' => {
                matched |= lo <= c && c <= hi;
                i += 3;
            }
            _ => {
                matched |= lo == c;
                i += 1;
            }
        }
    }
}

/// Whether the glob `pattern` matches all of `text`. Linear in practice: on a mismatch only
/// the last `*` is retried one byte further, which is enough because every other element
/// matches exactly one byte.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was (pattern index after it) and the text index it now covers up to.
    let mut star: Option<(usize, usize)> = None;
    while let Some(&c) = text.get(t) {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p + 1, t));
                p += 1;
                continue;
            }
            Some(b'?') => Some(1),
            Some(b'[') => match bracket(pattern.get(p + 1..).unwrap_or_default(), c) {
                Some((true, len)) => Some(len + 1),
                Some((false, _)) => None,
                // An unclosed `[` is an ordinary byte.
                None => (c == b'[').then_some(1),
            },
            Some(&lit) => (lit == c).then_some(1),
            None => None,
        };
        match (step, star) {
            (Some(n), _) => {
                p += n;
                t += 1;
            }
            (None, Some((sp, st))) => {
                p = sp;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            (None, None) => return false,
        }
    }
    pattern.get(p..).unwrap_or_default().iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        glob_match(p.as_bytes(), t.as_bytes())
    }

    #[test]
    fn literals_question_marks_and_stars() {
        assert!(m("abc", "abc"));
        assert!(!m("abc", "abcd"));
        assert!(!m("abcd", "abc"));
        assert!(m("a?c", "abc"));
        assert!(!m("a?c", "ac"));
        assert!(m("*", ""));
        assert!(m("a*", "a"));
        assert!(m("*c", "abc"));
        assert!(m("a*b*c", "axxbyyc"));
        assert!(m("a*b*c", "abcbc"));
        assert!(!m("a*b*c", "axxbyy"));
        assert!(m("**x", "x"));
        assert!(!m("", "x"));
    }

    #[test]
    fn brackets() {
        assert!(m("[abc]", "b"));
        assert!(!m("[abc]", "d"));
        assert!(m("[a-f]x", "dx"));
        assert!(!m("[a-f]x", "gx"));
        assert!(m("[!a-f]", "g"));
        assert!(m("[^a-f]", "g"));
        assert!(!m("[!a-f]", "a"));
        assert!(m("[]]", "]"));
        assert!(m("[a-]", "-"));
        assert!(m("[0-9A-F]", "C"));
        // Unclosed: a literal bracket.
        assert!(m("a[b", "a[b"));
        assert!(!m("a[b", "ab"));
    }

    #[test]
    fn real_modalias_patterns() {
        // From Debian's modules.alias for e1000 and virtio_net, and one USB NIC.
        let e1000 = "pci:v00008086d0000100Esv*sd*bc*sc*i*";
        let qemu_e1000 = "pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00";
        assert!(m(e1000, qemu_e1000));
        assert!(!m(e1000, "pci:v00008086d000010D3sv00001AF4sd00001100bc02sc00i00"));
        assert!(m("virtio:d00000001v*", "virtio:d00000001v00001AF4"));
        assert!(!m("virtio:d00000001v*", "virtio:d00000002v00001AF4"));
        let usb = "usb:v0BDAp8153d*dc*dsc*dp*icFFiscFFip00in*";
        assert!(m(usb, "usb:v0BDAp8153d3100dc00dsc00dp00icFFiscFFip00in00"));
        assert!(!m(usb, "usb:v0BDAp8153d3100dc00dsc00dp00ic02isc06ip00in00"));
        // A dmi alias with brackets as kmod writes them.
        assert!(m("dmi*:svn[Ll][Ee][Nn][Oo][Vv][Oo]*", "dmi:bvnX:svnLENOVO:pn1"));
    }

    #[test]
    fn lookup_in_file_order_each_module_once() {
        let a = Aliases::parse(
            "# Aliases extracted from modules themselves.
alias pci:v00008086d0000100Esv*sd*bc*sc*i* e1000
alias pci:v*d*sv*sd*bc02sc00i* catch-all
alias rtnl-link-bond bonding
alias pci:v00008086d0000100Esv*sd*bc02sc*i* e1000
garbage line
alias incomplete
",
        );
        assert_eq!(a.len(), 4);
        assert_eq!(
            a.lookup("pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00"),
            ["e1000", "catch_all"]
        );
        assert_eq!(a.lookup("rtnl-link-bond"), ["bonding"]);
        assert!(a.lookup("rtnl-link-bon").is_empty());
    }
}
