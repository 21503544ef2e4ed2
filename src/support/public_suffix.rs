//! The registrable domain of a host name by the Public Suffix List: what Chromium calls a
//! host's site when it keys its network state (ICANN and private rules alike, as Chromium's
//! schemeful site does). The list is Debian's `publicsuffix` package's, which `./setup.sh`
//! installs; [`SuffixList::parse`] and [`SuffixList::registrable`] are pure, [`system`] reads
//! the file once.

use std::collections::HashSet;
use std::sync::OnceLock;

use anyhow::{anyhow, Result};

/// Where Debian's `publicsuffix` package puts the list.
pub const LIST_PATH: &str = "/usr/share/publicsuffix/public_suffix_list.dat";

/// The list's rules.
#[derive(Debug, Default)]
pub struct SuffixList {
    /// `co.uk`, and wildcards as written (`*.ck`).
    rules: HashSet<String>,
    /// What an exception rule (`!www.ck`) names: `www.ck`.
    exceptions: HashSet<String>,
}

impl SuffixList {
    /// The rules of a list in the publicsuffix.org format (one per line; `//` comments).
    pub fn parse(text: &str) -> SuffixList {
        let mut list = SuffixList::default();
        for line in text.lines() {
            let rule = line.split_whitespace().next().unwrap_or("");
            if rule.is_empty() || rule.starts_with("//") {
                continue;
            }
            let rule = rule.to_lowercase();
            match rule.strip_prefix('!') {
                Some(name) => list.exceptions.insert(name.to_string()),
                None => list.rules.insert(rule),
            };
        }
        list
    }

    /// How many of `labels`' last labels are its public suffix, by the list's algorithm: an
    /// exception rule wins (its labels but the first), else the longest matching rule, else 1
    /// (the implicit rule `*`).
    fn suffix_labels(&self, labels: &[String]) -> usize {
        let n = labels.len();
        let mut longest = 1;
        for k in 1..=n {
            let suffix = labels[n - k..].join(".");
            if self.exceptions.contains(&suffix) {
                return k - 1;
            }
            let wildcard = k >= 2
                && self
                    .rules
                    .contains(&format!("*.{}", labels[n - k + 1..].join(".")));
            if wildcard || self.rules.contains(&suffix) {
                longest = k;
            }
        }
        longest
    }

    /// The registrable domain of `host`: its public suffix and one label more (`a.b.co.uk` →
    /// `b.co.uk`); the host itself when it is no longer than that.
    pub fn registrable<'h>(&self, host: &'h str) -> &'h str {
        let host = host.trim_end_matches('.');
        let labels: Vec<String> = host.split('.').map(str::to_lowercase).collect();
        let keep = (self.suffix_labels(&labels) + 1).min(labels.len());
        let dropped = labels.len() - keep;
        let start: usize = host.split('.').take(dropped).map(|l| l.len() + 1).sum();
        &host[start..]
    }
}

/// The system's list, read once; an error naming the fix when it is missing.
pub fn system() -> Result<&'static SuffixList> {
    static LIST: OnceLock<Result<SuffixList, String>> = OnceLock::new();
    LIST.get_or_init(|| {
        std::fs::read_to_string(LIST_PATH)
            .map(|text| SuffixList::parse(&text))
            .map_err(|e| {
                format!(
                    "cannot read the Public Suffix List {LIST_PATH} ({e}): install Debian's \
                     publicsuffix package (./setup.sh does)"
                )
            })
    })
    .as_ref()
    .map_err(|e| anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "// ===BEGIN ICANN DOMAINS===\n\
        uk\nco.uk\n// ck\n*.ck\n!www.ck\njp\n*.kobe.jp\n!city.kobe.jp\n\
        // ===BEGIN PRIVATE DOMAINS===\ngithub.io\n";

    #[test]
    fn the_registrable_domain_follows_the_list_s_algorithm() {
        let l = SuffixList::parse(LIST);
        for (host, site) in [
            ("shop.example.co.uk", "example.co.uk"),
            ("example.co.uk", "example.co.uk"),
            ("co.uk", "co.uk"),
            ("a.b.example.ck", "b.example.ck"),
            ("www.ck", "www.ck"),
            ("a.www.ck", "www.ck"),
            ("a.b.city.kobe.jp", "city.kobe.jp"),
            ("a.b.c.kobe.jp", "b.c.kobe.jp"),
            ("user.github.io", "user.github.io"),
            ("x.user.github.io", "user.github.io"),
            // Not in the list: the implicit rule `*` (the last two labels).
            ("static.site.test", "site.test"),
            ("pagebench.test", "pagebench.test"),
            ("Static.Site.TEST.", "Site.TEST"),
            ("localhost", "localhost"),
        ] {
            assert_eq!(l.registrable(host), site, "{host}");
        }
    }

    #[test]
    fn the_system_list_knows_multi_label_suffixes() {
        let l = system().expect("./setup.sh installs Debian's publicsuffix");
        assert_eq!(l.registrable("shop.example.co.uk"), "example.co.uk");
        assert_eq!(l.registrable("a.b.s3.amazonaws.com"), "b.s3.amazonaws.com");
        assert_eq!(l.registrable("s2.pagebench.test"), "pagebench.test");
    }
}
