//! pagebench's namespaces in `ip netns`'s directory: their names (`pb-<pid>-<instance>-<role>`,
//! so that a later cleanup can tell whether their owner is alive), their files, and deleting
//! one. Below both [`super::netns`], which creates them, and [`super::cleanup`], which removes
//! those of dead processes (and which `netns` calls when a dead process held a name).

use std::io;
use std::path::{Path, PathBuf};

/// Every namespace pagebench creates starts with this.
pub const NAME_PREFIX: &str = "pb-";
/// Where `ip netns` keeps its namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// `pb-<pid>-<instance>-<role>`.
pub fn namespace_name(pid: u32, instance: u64, role: &str) -> String {
    format!("{NAME_PREFIX}{pid}-{instance}-{role}")
}

/// The owner PID, instance and role of a pagebench namespace name.
pub fn parse_name(name: &str) -> Option<(u32, u64, &str)> {
    let rest = name.strip_prefix(NAME_PREFIX)?;
    let mut parts = rest.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let instance = parts.next()?.parse().ok()?;
    let role = parts.next()?;
    if role.is_empty() || !role.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some((pid, instance, role))
}

/// The file `ip netns` keeps a namespace as.
pub fn namespace_path(name: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(name)
}

/// Deletes a namespace the way `ip netns delete` does: detach its bind mount, remove the file.
/// The namespace itself disappears once no process, thread or socket uses it any more.
pub fn delete_by_name(name: &str) -> io::Result<()> {
    let path = namespace_path(name);
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in namespace name"))?;
    // SAFETY: a valid C string; MNT_DETACH never blocks.
    let r = unsafe { libc::umount2(c_path.as_ptr(), libc::MNT_DETACH) };
    let umount_err = (r != 0).then(io::Error::last_os_error);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => match umount_err {
            Some(u) if u.raw_os_error() != Some(libc::EINVAL) => Err(u),
            _ => Ok(()),
        },
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let n = namespace_name(1234, 7, "c");
        assert_eq!(n, "pb-1234-7-c");
        assert_eq!(parse_name(&n), Some((1234, 7, "c")));
        for bad in ["pb-x-1-c", "pb-1-2-", "other-1-2-c", "pb-1-c", "pb-1-2-c-d"] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }
}
