// Throwaway: the --runs auto rule applied to a fixed matrix's rounds (not committed).
use pagebench::matrix::adaptive::{judge, RuleContext};
use pagebench::plan::{Adaptive, Cell};
fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap());
    let rows = pagebench::results::summary::read_runs(&dir).unwrap();
    let meta = pagebench::results::store::read_meta(&dir).unwrap();
    let ctx = RuleContext {
        adaptive: Adaptive::new(5, 30, 5.0).unwrap(),
        server_order: meta.plan.servers.clone(),
        seed: meta.plan.seed,
        resamples: 10_000,
        timeout_ms: meta.timeout_s * 1e3,
    };
    for cell in meta.plan.cells() {
        let w: Vec<String> = (5..=meta.plan.runs)
            .map(|r| {
                let j = judge(&rows, &cell, r, &ctx).unwrap();
                format!(
                    "{}:{}",
                    r,
                    j.widest_pct.map_or("-".into(), |w| format!("{w:.1}"))
                )
            })
            .collect();
        println!("{cell}: {}", w.join(" "));
    }
    let _ = Cell {
        profile: String::new(),
        workload: String::new(),
    };
}
