//! The registrable domain of a host name by the Public Suffix List: what Chromium calls a
//! host's site when it keys its network state (ICANN and private rules alike, as Chromium's
//! schemeful site does). The list is compiled in (the `psl` crate, republished with every
//! change to the list), so nothing is read at run time.

/// The registrable domain of `host`: its public suffix and one label more
/// (`shop.example.co.uk` → `example.co.uk`; a name the list does not know keeps its last two
/// labels, the implicit rule `*`); the host itself when it is no longer than that. Lowercase.
pub fn registrable(host: &str) -> String {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match psl::domain_str(&host) {
        Some(domain) => domain.to_string(),
        None => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registrable_domain_follows_the_list() {
        for (host, site) in [
            ("shop.example.co.uk", "example.co.uk"),
            ("example.co.uk", "example.co.uk"),
            ("co.uk", "co.uk"),
            // Wildcards and their exceptions (`*.ck`, `!www.ck`; `*.kobe.jp`, `!city.kobe.jp`).
            ("a.b.example.ck", "b.example.ck"),
            ("a.www.ck", "www.ck"),
            ("a.b.city.kobe.jp", "city.kobe.jp"),
            ("a.b.c.kobe.jp", "b.c.kobe.jp"),
            // Private rules: a GitHub Pages site is its own site, as is an S3 bucket.
            ("user.github.io", "user.github.io"),
            ("x.user.github.io", "user.github.io"),
            ("a.b.s3.amazonaws.com", "b.s3.amazonaws.com"),
            // Not in the list: the implicit rule `*` (the last two labels).
            ("static.site.test", "site.test"),
            ("s2.pagebench.test", "pagebench.test"),
            ("pagebench.test", "pagebench.test"),
            ("Static.Site.TEST.", "site.test"),
            ("localhost", "localhost"),
        ] {
            assert_eq!(registrable(host), site, "{host}");
        }
    }
}
