//! Which of a browser's processes a process is, from its command line (pure, but for
//! [`of_pid`]): the kind a CPU figure is told by — the network service, a renderer, the GPU
//! process. Chromium names it with `--type=` (and `--utility-sub-type=` for the network
//! service); Firefox's child processes end their arguments with theirs after `-contentproc`
//! (its networking runs in the parent process unless a socket process is enabled).

/// A process's kind from its arguments (the executable first).
pub fn of_args(args: &[String]) -> String {
    let flag = |name: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(name).map(str::to_string))
    };
    if let Some(kind) = flag("--type=") {
        return match kind.as_str() {
            "utility" => match flag("--utility-sub-type=").as_deref() {
                Some("network.mojom.NetworkService") => "network service".into(),
                Some(sub) => format!("utility ({sub})"),
                None => "utility".into(),
            },
            "gpu-process" => "GPU".into(),
            other => other.into(),
        };
    }
    if args.iter().any(|a| a == "-contentproc") {
        return match args.last().map(String::as_str) {
            Some("tab") => "content".into(),
            Some("socket") => "socket process".into(),
            Some(kind) => kind.into(),
            None => "child".into(),
        };
    }
    "browser".into()
}

/// The kind of process `pid` (None: gone, or its command line unreadable).
pub fn of_pid(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args = split_cmdline(&raw);
    (!args.is_empty()).then(|| of_args(&args))
}

/// A `/proc/PID/cmdline`'s arguments: separated by NULs, or — after Chromium's child
/// processes rewrite their title (setproctitle) — by spaces in one string.
fn split_cmdline(raw: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(raw)
        .split(['\0', ' '])
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(cmdline: &str) -> String {
        of_args(&cmdline.split(' ').map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn a_retitled_command_line_is_split_on_spaces() {
        let retitled = b"/usr/lib/chromium/chromium --type=renderer --lang=en-US\0\0";
        assert_eq!(of_args(&split_cmdline(retitled)), "renderer");
        let plain = b"/usr/lib/chromium/chromium\0--type=gpu-process\0";
        assert_eq!(of_args(&split_cmdline(plain)), "GPU");
    }

    #[test]
    fn chromium_s_and_firefox_s_processes_are_told_apart() {
        assert_eq!(
            kind("/opt/chromium/chrome --headless --no-sandbox"),
            "browser"
        );
        assert_eq!(
            kind("/opt/chromium/chrome --type=utility --utility-sub-type=network.mojom.NetworkService --lang=en"),
            "network service"
        );
        assert_eq!(
            kind("chrome --type=utility --utility-sub-type=storage.mojom.StorageService"),
            "utility (storage.mojom.StorageService)"
        );
        assert_eq!(
            kind("chrome --type=renderer --renderer-client-id=7"),
            "renderer"
        );
        assert_eq!(kind("chrome --type=gpu-process --use-gl=angle"), "GPU");
        assert_eq!(kind("chrome --type=zygote"), "zygote");
        assert_eq!(
            kind("/usr/lib/firefox-esr/firefox-esr -headless -no-remote"),
            "browser"
        );
        assert_eq!(
            kind("/usr/lib/firefox-esr/firefox-esr -contentproc -isForBrowser -prefsLen 1 4 tab"),
            "content"
        );
        assert_eq!(
            kind("firefox-esr -contentproc -parentPid 9 7 socket"),
            "socket process"
        );
        assert_eq!(kind("firefox-esr -contentproc -parentPid 9 7 rdd"), "rdd");
    }
}
