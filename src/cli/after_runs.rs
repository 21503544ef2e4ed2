//! After a matrix or a merge: why transfers were slow, and the report, each retried by hand
//! when it fails (no run is lost).

use std::path::Path;

/// After the statistics: why transfers were slow, and the report (tables, charts, HTML) when
/// asked. A failure of either loses no run: it says how to retry.
pub fn diagnosis_and_report(dir: &Path, report: bool) {
    if let Err(e) = crate::diagnosis::slow_transfers::run(dir) {
        eprintln!(
            "pagebench: the diagnosis could not be written ({e:#}); retry with `pagebench diagnose {}`",
            dir.display()
        );
    }
    if report {
        match crate::report::generate(dir) {
            Ok(out) => eprintln!("report: {}", out.html.display()),
            Err(e) => eprintln!(
                "pagebench: the report could not be written ({e:#}); the runs are safe: retry with `pagebench report {}`",
                dir.display()
            ),
        }
    }
}
