//! `pagebench compare BASE NEW`: each series of two results directories against itself, and
//! the `--fail-if-slower` gate.

use std::process::ExitCode;

use anyhow::Result;

use super::args::CompareArgs;

pub fn compare(a: CompareArgs) -> Result<ExitCode> {
    if let Some(p) = a.fail_if_slower {
        anyhow::ensure!(
            p.is_finite() && p >= 0.0,
            "--fail-if-slower {p}: give a percentage of 0 or more"
        );
    }
    let gate = a
        .fail_if_slower
        .map(|pct| crate::report::base_vs_new::Gate::new(pct, a.allow_missing));
    let b = crate::report::base_vs_new::baseline(&a.base, &a.new, gate)?;
    let out = a.out.clone().unwrap_or_else(|| {
        let name = a
            .base
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
            .unwrap_or_else(|| "base".into());
        a.new.join(format!("compare-{name}"))
    });
    let written = crate::report::base_vs_new::write(&out, &b)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&b)?);
    } else {
        print!("{}", crate::report::base_vs_new::terminal(&b));
        let diffs = b.setup_differences.iter().chain(&b.machine_differences);
        for d in diffs.chain(&b.busy_difference) {
            println!("differs: {d}");
        }
        for p in &written {
            println!("wrote {}", p.display());
        }
    }
    let Some(g) = &b.gate else {
        return Ok(ExitCode::SUCCESS);
    };
    for f in &g.failures {
        eprintln!(
            "pagebench compare: gate failed (exit {}): {}",
            g.exit_code,
            f.line()
        );
    }
    for f in &g.warnings {
        eprintln!("pagebench compare: warning: {}", f.line());
    }
    Ok(ExitCode::from(g.exit_code))
}
