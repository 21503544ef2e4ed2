//! The browser's own name resolution, engine-neutral: a hosts file that names every host the
//! page may contact with its server address (or, with `--dns resolver`, only localhost, and
//! pagebench's resolver as the one name server), bind-mounted over `/etc/hosts` in a mount
//! namespace of the browser's own, with `/etc/resolv.conf` pointed at the client namespace's
//! loopback (nothing listens there, so a name the file lacks fails at once and no query
//! leaves the namespace). Any engine that resolves through the C library sees each host at
//! its own address; Firefox has no per-host resolver pref (`network.dns.forceResolve` maps
//! every name to one address), so this is how its multi-address replays resolve.

use std::ffi::CString;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The hosts file's and the resolver configuration's text, written before the launch.
pub struct PrivateNames {
    hosts: CString,
    resolv: CString,
}

/// A resolver configuration that finds nothing: the client namespace's loopback, where no
/// DNS server runs.
const RESOLV_CONF: &str = "# pagebench: names come from /etc/hosts only\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n";

impl PrivateNames {
    /// Writes `hosts` and the resolver configuration into `dir`, which the browser's user can
    /// read. With `resolver`, the hosts file names localhost only and every other name is asked
    /// of it; without, names come from the hosts file alone.
    pub fn write(
        dir: &Path,
        hosts: &[(String, IpAddr)],
        resolver: Option<IpAddr>,
    ) -> Result<PrivateNames> {
        let (text, resolv) = match resolver {
            Some(ip) => (hosts_text(&[])?, resolver_conf(ip)),
            None => (hosts_text(hosts)?, RESOLV_CONF.to_string()),
        };
        let hosts_path = dir.join("hosts");
        let resolv_path = dir.join("resolv.conf");
        std::fs::write(&hosts_path, text)
            .with_context(|| format!("cannot write {}", hosts_path.display()))?;
        std::fs::write(&resolv_path, resolv)
            .with_context(|| format!("cannot write {}", resolv_path.display()))?;
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).context("a path with a NUL");
        Ok(PrivateNames {
            hosts: c(&hosts_path)?,
            resolv: c(&resolv_path)?,
        })
    }

    /// Makes `cmd`'s process see them as `/etc/hosts` and `/etc/resolv.conf`, in a mount
    /// namespace of its own. Registered before the drop to an unprivileged user (mounting
    /// needs root).
    pub fn mount_on_exec(&self, cmd: &mut Command) {
        let hosts = self.hosts.clone();
        let resolv = self.resolv.clone();
        // SAFETY: unshare(2) and mount(2) on C strings made before the fork: async-signal-safe,
        // no allocation between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let none = c"none".as_ptr();
                if libc::unshare(libc::CLONE_NEWNS) != 0
                    || libc::mount(
                        none,
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) != 0
                    || bind(&hosts, c"/etc/hosts") != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                // Without a resolv.conf the C library asks 127.0.0.1 anyway: the same.
                if bind(&resolv, c"/etc/resolv.conf") != 0
                    && std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT)
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// A resolver configuration that asks `ip` alone, once, and gives up after a round trip no
/// profile reaches (a lost query is retried by the browser, as a real one would).
fn resolver_conf(ip: IpAddr) -> String {
    format!("# pagebench: every name is asked of its resolver, through the link\nnameserver {ip}\noptions timeout:5 attempts:2\n")
}

/// Bind-mounts `from` over `onto`.
///
/// # Safety
/// Calls mount(2); fine between fork and exec.
unsafe fn bind(from: &CString, onto: &std::ffi::CStr) -> libc::c_int {
    libc::mount(
        from.as_ptr(),
        onto.as_ptr(),
        std::ptr::null(),
        libc::MS_BIND,
        std::ptr::null(),
    )
}

/// `/etc/hosts` lines: loopback's own names, then each host at its address (a name twice is a
/// mistake upstream: refused, as the file would silently keep the first).
pub fn hosts_text(hosts: &[(String, IpAddr)]) -> Result<String> {
    let mut text = String::from("127.0.0.1 localhost\n::1 localhost ip6-localhost\n");
    let mut seen = std::collections::BTreeSet::new();
    for (host, ip) in hosts {
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '#') {
            bail!("cannot put host name {host:?} in a hosts file");
        }
        if !seen.insert(host.to_ascii_lowercase()) {
            bail!("host {host} is mapped twice");
        }
        let _ = writeln!(text, "{ip} {host}");
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_host_gets_its_own_line_and_address() {
        let hosts = vec![
            ("www.site.test".to_string(), "10.77.0.11".parse().unwrap()),
            (
                "static.site.test".to_string(),
                "10.77.0.12".parse().unwrap(),
            ),
        ];
        let text = hosts_text(&hosts).unwrap();
        assert!(text.starts_with("127.0.0.1 localhost\n"), "{text}");
        assert!(text.ends_with("10.77.0.11 www.site.test\n10.77.0.12 static.site.test\n"));
    }

    #[test]
    fn a_name_twice_or_a_name_with_a_space_is_refused() {
        let ip: IpAddr = "10.1.2.2".parse().unwrap();
        let twice = vec![("a.test".to_string(), ip), ("A.test".to_string(), ip)];
        assert!(hosts_text(&twice)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        let spaced = vec![("a b.test".to_string(), ip)];
        assert!(hosts_text(&spaced).is_err());
    }

    #[test]
    fn the_files_are_written_where_asked() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = vec![("pagebench.test".to_string(), "10.1.2.2".parse().unwrap())];
        PrivateNames::write(dir.path(), &hosts, None).unwrap();
        let written = std::fs::read_to_string(dir.path().join("hosts")).unwrap();
        assert!(written.contains("10.1.2.2 pagebench.test"));
        let resolv = std::fs::read_to_string(dir.path().join("resolv.conf")).unwrap();
        assert!(resolv.contains("nameserver 127.0.0.1"));
    }

    #[test]
    fn with_a_resolver_the_hosts_file_names_only_localhost() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = vec![("pagebench.test".to_string(), "10.1.2.2".parse().unwrap())];
        PrivateNames::write(dir.path(), &hosts, Some("10.1.2.9".parse().unwrap())).unwrap();
        let written = std::fs::read_to_string(dir.path().join("hosts")).unwrap();
        assert!(!written.contains("pagebench.test"), "{written}");
        let resolv = std::fs::read_to_string(dir.path().join("resolv.conf")).unwrap();
        assert!(resolv.contains("nameserver 10.1.2.9\n"), "{resolv}");
    }
}
