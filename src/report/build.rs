//! Assembling the report document (pure), in reading order: the answer first (the findings and
//! the overview chart), then its details (the study's tables, the breakdown, where the time
//! went, the sweep, uploads, servers, distributions, every series), then how the runs were made
//! (setup, how to read, warnings, what the counted runs leave out, the machine).

use crate::config::protocol::Variant;
use crate::evidence::engine_tells::EngineTells;

use super::chart_data::{Chart, ChartData};
use super::doc::{Block, Document, Table};
use super::report_data::{workload_title, ReportData};
use super::tables::{self, Skipped};
use super::wire_tables;

/// A chart with its encoded PNG, ready to be placed in the document.
pub struct PlacedChart<'a> {
    pub chart: &'a Chart,
    pub png: &'a [u8],
}

/// What the browsers' DevTools view was called: CDP (Chromium), BiDi (Firefox).
fn devtools(data: &ReportData) -> String {
    data.browsers
        .iter()
        .map(|b| {
            data.engine_tells(*b)
                .map_or("DevTools", |e| e.devtools.as_ref())
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Why engines are compared, and what differs between them here.
const ENGINES_INTRO: &str = "The same page, link, server and protocol, loaded by another engine: \
ratio = the other browser / Chromium. Chromium throttles low-priority requests of an origin it \
only knows by `--origin-to-force-quic-on` (forced `h3`) as for HTTP/1.1; Firefox dispatches forced \
HTTP/3 requests straight onto the connection. Where the two engines' h3 differ but their h2 \
agree, the difference is the browser's (scheduler or QUIC stack: Chromium's own vs Firefox's \
neqo), not the protocol's. Firefox has no Layout Instability or Element Timing (no CLS, no hero \
time) and no request priorities or connection ids over BiDi.";

/// The "Setup" section's lines: the machine and builds, the servers, HTTP/3's mode, the
/// plan and the statistics.
fn setup(data: &ReportData) -> Vec<(String, String)> {
    let mut kv = machine_lines(data);
    kv.extend(server_lines(data));
    kv.push(("HTTP/3 mode".into(), h3_mode(data)));
    kv.extend(plan_lines(data));
    kv
}

/// The machine, each browser's version and pagebench's.
fn machine_lines(data: &ReportData) -> Vec<(String, String)> {
    let m = &data.meta;
    let mc = &m.machine;
    let mut kv: Vec<(String, String)> = Vec::new();
    kv.push((
        "machine".into(),
        format!(
            "{}: {}, {} CPUs, {} GiB, kernel {}",
            mc.hostname, mc.cpu_model, mc.cpus, mc.memory_gib, mc.kernel
        ),
    ));
    for b in &data.browsers {
        let version = mc.browsers.get(b.name()).map(String::as_str);
        kv.push((
            "browser".into(),
            super::machines::engine_version(*b, version),
        ));
    }
    kv.push((
        "pagebench".into(),
        format!("{} (git {})", m.pagebench_version, m.git_revision),
    ));
    kv
}

/// Each server with the knobs it applied, and the viewpoints its runs were checked from.
fn server_lines(data: &ReportData) -> Vec<(String, String)> {
    let m = &data.meta;
    let mut kv: Vec<(String, String)> = Vec::new();
    let servers: Vec<String> = data
        .servers
        .iter()
        .map(|s| {
            if let Some(d) = m.servers_applied.get(s) {
                return server_summary(s.as_str(), d);
            }
            let knobs = m
                .servers
                .get(s.as_str())
                .map(super::server_knobs::flatten_knobs)
                .unwrap_or_default();
            if knobs.is_empty() {
                format!("{s} (no configuration recorded)")
            } else {
                format!("{s}: {}", knobs.join(", "))
            }
        })
        .collect();
    kv.push((
        if servers.len() > 1 {
            "servers"
        } else {
            "server"
        }
        .into(),
        servers.join("; "),
    ));
    let viewpoints: Vec<String> = data
        .servers
        .iter()
        .filter_map(|s| {
            data.summary.viewpoints.get(s).map(|v| match v {
                3 => format!(
                    "{s}: 3 (Resource Timing, {} and the server's own log)",
                    devtools(data)
                ),
                n => format!(
                    "{s}: {n} (Resource Timing and {} only: the server keeps no log pagebench can read; --server-log-format gives a third)",
                    devtools(data)
                ),
            })
        })
        .collect();
    if !viewpoints.is_empty() {
        kv.push((
            "protocol and files verified from".into(),
            viewpoints.join("; "),
        ));
    }
    kv
}

/// A server in a line: its version and its note; its settings are the table under the setup
/// ([`super::server_knobs`]).
fn server_summary(name: &str, d: &crate::servers::ServerDescription) -> String {
    let mut parts = vec![d.version.clone()];
    parts.extend(d.note.clone());
    parts.push(format!(
        "settings in \"The servers' settings\" (every value as applied: `meta.json`, `servers_applied.{name}`)"
    ));
    format!("{name}: {}", parts.join("; "))
}

/// How HTTP/3 was reached, per variant and engine.
fn h3_mode(data: &ReportData) -> String {
    let notes = |note: fn(&EngineTells) -> Option<&str>| {
        data.browsers
            .iter()
            .filter_map(|b| data.engine_tells(*b).and_then(note))
            .collect::<Vec<_>>()
    };
    let mut h3 = Vec::new();
    if data.has_variant(Variant::H3) {
        h3.push(
            "forced (`h3`): cold, `--origin-to-force-quic-on`, the study's method; Chromium then \
throttles low-priority requests as for HTTP/1.1",
        );
        h3.extend(notes(|e| e.forced_h3.as_deref()));
    }
    if data.has_variant(Variant::H3_PRIMED) {
        h3.push(
            "primed (`h3-primed`): the profile already knows the origin's QUIC alternative \
service, as a returning visitor's browser does",
        );
        h3.extend(notes(|e| e.primed_h3.as_deref()));
    }
    if h3.is_empty() {
        "HTTP/3 not measured".into()
    } else {
        h3.join("; ")
    }
}

/// Protocols, profiles, workloads, runs, statistics and dates.
fn plan_lines(data: &ReportData) -> Vec<(String, String)> {
    let m = &data.meta;
    let mut kv: Vec<(String, String)> = Vec::new();
    kv.push((
        "protocols".into(),
        data.variants
            .iter()
            .map(Variant::name)
            .collect::<Vec<_>>()
            .join(", "),
    ));
    let profiles: Vec<String> = data
        .profiles
        .iter()
        .map(|name| match m.profiles.iter().find(|p| &p.name == name) {
            Some(p) => {
                let mut t = format!(
                    "{} (RTT {} ms, jitter ±{} ms, loss {} %",
                    p.name, p.rtt_ms, p.jitter_ms, p.loss_pct
                );
                if let Some(d) = p.down_mbit {
                    t.push_str(&format!(", down {d} Mbit/s"));
                }
                if let Some(u) = p.up_mbit {
                    t.push_str(&format!(", up {u} Mbit/s"));
                }
                t.push(')');
                t
            }
            None => format!("{name} (values not recorded)"),
        })
        .collect();
    kv.push(("profiles".into(), profiles.join("; ")));
    kv.push((
        "workloads".into(),
        data.workloads
            .iter()
            .map(|w| format!("{w} ({})", workload_title(w)))
            .collect::<Vec<_>>()
            .join(", "),
    ));
    kv.push((
        "runs".into(),
        format!(
            "{} measured + {} warm-up per series, protocols interleaved in a seeded random order \
(seed {}); timeout {} s; pages seed {}",
            m.plan.runs, m.plan.warmup, m.plan.seed, m.timeout_s, m.pages_seed
        ),
    ));
    let s = &data.summary;
    kv.push((
        "statistics".into(),
        format!(
            "median with a 95 % percentile-bootstrap CI ({} resamples); Mann-Whitney U test, \
Holm's correction over the {} tested comparisons, α = {}",
            s.bootstrap_resamples, s.holm_family, s.alpha
        ),
    ));
    let mut dates = format!(
        "started {}, ended {} (status: {})",
        m.started_at,
        m.ended_at.as_deref().unwrap_or("—"),
        m.status
    );
    if !m.resumed_at.is_empty() {
        dates.push_str(&format!("; resumed {}", m.resumed_at.join(", ")));
    }
    kv.push(("dates".into(), dates));
    kv
}

fn how_to_read(data: &ReportData) -> Vec<String> {
    let mut v = vec![
        "Series cells: the median of the headline time (loadEventEnd for pages, body complete \
for downloads) in ms, with its 95 % bootstrap confidence interval in brackets, over the valid \
runs and the runs that did not finish (DNF): a DNF counts as slower than every finished run, so \
DNFs raise the median instead of being dropped. `· 1 invalid, 2 DNF` counts them: invalid = a \
run that was not measured right (the link did not deliver the profile, the wrong protocol on the \
wire, a short body), left out; DNF = did not finish within the timeout. A median or CI end \
that is itself a DNF reads `DNF`, e.g. `DNF (5 of 8 DNF)`."
            .to_string(),
        "Ratio a/b = median(a) ÷ median(b) with its 95 % CI: below 1 means a is faster, above 1 \
slower. With a DNF median the ratio is a bound, a DNF counted at the timeout: `≥ 4.1` (a did not \
finish), `≤ 0.3` (b did not), `DNF/DNF`."
            .to_string(),
        format!(
            "Marks: `↓ faster` / `↑ slower` = significant after Holm's correction over all {} \
comparisons of the matrix (two-sided Mann-Whitney U, α = {}) and the ratio's CI excludes 1; \
`≈ n.s.` = no significant difference; `?` = undetermined (e.g. fewer than 3 valid or DNF runs). \
p is the Holm-adjusted p-value. Every verdict comes from the test; DNFs are ranked as tied \
slowest observations.",
            data.summary.holm_family, data.summary.alpha
        ),
        "Study columns (grey, italic in HTML): the published study's medians (Chromium 141, \
Caddy 2.8.4, HTTP/3 forced). `vs study`: our verdict against the study's direction — agrees, \
disagrees, not confirmed (the study saw a difference we cannot call significant), or differs \
(we see a significant difference where the study's two numbers were within 5 %). The study gave \
no confidence intervals."
            .to_string(),
        "`—`: not measured in this matrix (or not published by the study).".to_string(),
    ];
    if data.has_variant(Variant::H3_PRIMED) {
        v.push(
            "`h3` is HTTP/3 forced cold (the study's method); `h3-primed` is HTTP/3 as a \
returning visitor's browser reaches it. The difference between the two is Chromium's request \
throttling for origins it only knows by force, not the protocol."
                .into(),
        );
    }
    v
}

/// Places a table, or says why it is absent (for the first server only: other servers often
/// measure a subset on purpose).
fn push_table(
    doc: &mut Document,
    r: Result<Table, Skipped>,
    tables: &mut Vec<Table>,
    explain_absence: bool,
) {
    match r {
        Ok(t) => {
            tables.push(t.clone());
            doc.blocks.push(Block::Table(t));
        }
        Err(s) if explain_absence => doc.para(format!("**{}**: {}.", s.title, s.why)),
        Err(_) => {}
    }
}

/// The "What the user saw" charts: visual progress curves and filmstrips.
fn is_visual(c: &Chart) -> bool {
    matches!(c.data, ChartData::Filmstrip(_)) || c.file.starts_with("charts/progress-")
}

fn figure(doc: &mut Document, c: &PlacedChart) {
    doc.blocks.push(Block::Figure {
        path: c.chart.file.clone(),
        alt: c.chart.title.clone(),
        caption: c.chart.caption.clone(),
        png: c.png.to_vec(),
    });
}

fn figures_where(doc: &mut Document, charts: &[PlacedChart], pred: impl Fn(&Chart) -> bool) {
    for c in charts.iter().filter(|c| pred(c.chart)) {
        figure(doc, c);
    }
}

/// The whole document, and the tables in it (for tests and callers): its sections in order.
pub fn document(
    data: &ReportData,
    title: &str,
    charts: &[PlacedChart],
    warnings: &[String],
    diagnosis: Option<&crate::diagnosis::slow_transfers::Diagnosis>,
) -> (Document, Vec<Table>) {
    let mut doc = Document {
        title: title.to_string(),
        blocks: Vec::new(),
    };
    let mut tables: Vec<Table> = Vec::new();
    doc.para(opening(data));
    answer(&mut doc, data, charts, warnings, diagnosis);
    study_and_breakdown(&mut doc, &mut tables, data, charts);
    round_trips(&mut doc, &mut tables, data, diagnosis);
    measured_sections(&mut doc, &mut tables, data, charts);
    sites_and_sharding(&mut doc, &mut tables, data);
    comparison_sections(&mut doc, &mut tables, data);
    if let Some(d) = diagnosis.filter(|d| !d.transfers.is_empty()) {
        diagnostics(&mut doc, d);
    }
    doc.heading(2, "Distributions", "distributions");
    figures_where(&mut doc, charts, |c| matches!(c.data, ChartData::Bars(_)));
    figures_where(&mut doc, charts, |c| {
        matches!(c.data, ChartData::Cdf(_)) && !is_visual(c)
    });
    every_series(&mut doc, &mut tables, data);
    // How the runs were made, and what to read with care, after the answer and its details.
    setup_and_warnings(&mut doc, &mut tables, data, warnings);
    super::left_out::section(&mut doc, data, &mut tables);
    runs_and_machines(&mut doc, &mut tables, data);
    problem_runs(&mut doc, data);
    (doc, tables)
}

/// The report's first screen: the findings in a few sentences and the overview chart.
fn answer(
    doc: &mut Document,
    data: &ReportData,
    charts: &[PlacedChart],
    warnings: &[String],
    diagnosis: Option<&crate::diagnosis::slow_transfers::Diagnosis>,
) {
    doc.heading(2, "The answer", "overview");
    doc.blocks.push(Block::List(super::findings::findings(
        data,
        diagnosis,
        warnings.len(),
    )));
    figures_where(doc, charts, |c| matches!(c.data, ChartData::Heatmap(_)));
    doc.para(
        "The details follow: the study's tables and the breakdowns, where the time went, every \
series; then the setup, how to read the tables, the warnings, what the counted runs leave out \
and the machine during the run.",
    );
}

/// Appends `found` to the document and the table list.
fn push_tables(doc: &mut Document, tables: &mut Vec<Table>, found: Vec<Table>) {
    for t in found {
        tables.push(t.clone());
        doc.blocks.push(Block::Table(t));
    }
}

/// A section of tables under a heading, with an optional introduction; none when `found` is
/// empty.
fn tables_section(
    doc: &mut Document,
    tables: &mut Vec<Table>,
    (heading, id): (&str, &str),
    intro: Option<&str>,
    found: Vec<Table>,
) {
    if found.is_empty() {
        return;
    }
    doc.heading(2, heading, id);
    if let Some(intro) = intro {
        doc.para(intro);
    }
    push_tables(doc, tables, found);
}

/// Per workload and setup, the tables `make` gives.
fn per_workload_and_setup(
    data: &ReportData,
    make: impl Fn(&str, &crate::config::identity::Setup) -> Option<Table>,
) -> Vec<Table> {
    data.workloads
        .iter()
        .flat_map(|w| {
            data.setups
                .iter()
                .filter_map(|s| make(w, s))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The first paragraph: what was measured, how many runs, and the question.
fn opening(data: &ReportData) -> String {
    let s = &data.summary;
    let (valid, invalid, dnf) = s.series.iter().fold((0, 0, 0), |acc, x| {
        (
            acc.0 + x.valid_runs(),
            acc.1 + x.completion.n_invalid,
            acc.2 + x.completion.n_dnf,
        )
    });
    let without: usize = s.series.iter().map(|x| x.without_headline).sum();
    let without = if without > 0 {
        format!(
            " ({without} of the valid runs have no {}: they are left out of the medians and \
comparisons, counted per series under \"Invalid and unfinished runs\")",
            crate::results::summary::metric_word(&s.metric)
        )
    } else {
        String::new()
    };
    let mut more = String::new();
    if data.servers.len() > 1 {
        more.push_str(&format!(" × {} servers", data.servers.len()));
    }
    if data.browsers.len() > 1 {
        more.push_str(&format!(" × {} browsers", data.browsers.len()));
    }
    format!(
        "{} series ({} profiles × {} workloads × {} protocols{more}), {} measured runs: {valid} valid{without}, \
{invalid} invalid, {dnf} did not finish. Is HTTP/1.1, HTTP/2 or HTTP/3 faster for these pages on \
these networks — and why?",
        s.series.len(),
        data.profiles.len(),
        data.workloads.len(),
        data.variants.len(),
        valid + invalid + dnf
    )
}

fn setup_and_warnings(
    doc: &mut Document,
    tables: &mut Vec<Table>,
    data: &ReportData,
    warnings: &[String],
) {
    doc.heading(2, "Setup", "setup");
    doc.blocks.push(Block::KeyValues(setup(data)));
    push_tables(
        doc,
        tables,
        super::server_knobs::table(data).into_iter().collect(),
    );
    push_tables(doc, tables, tables::link_table(data).into_iter().collect());
    doc.heading(2, "How to read", "how-to-read");
    doc.blocks.push(Block::List(how_to_read(data)));
    doc.heading(2, "Warnings", "warnings");
    if warnings.is_empty() {
        doc.para("None.");
    } else {
        doc.blocks.push(Block::List(warnings.to_vec()));
    }
}

/// The workloads the study's tables are made of.
const STUDY_WORKLOADS: [&str; 3] = ["page10", "page50", "download"];

/// The study's tables, then the 50-file page taken apart with its on-wire and waterfall
/// charts; each section only when the matrix measured one of its workloads (a replayed site's
/// report has neither, rather than a row of "not measured").
fn study_and_breakdown(
    doc: &mut Document,
    tables: &mut Vec<Table>,
    data: &ReportData,
    charts: &[PlacedChart],
) {
    let measured = |w: &str| data.workloads.iter().any(|x| x == w);
    if STUDY_WORKLOADS.iter().any(|w| measured(w)) {
        doc.heading(2, "The study's tables, from our data", "study");
        for (i, setup) in data.setups.iter().enumerate() {
            let first = i == 0;
            push_table(doc, tables::h2_vs_h1(data, setup), tables, first);
            push_table(doc, tables::h3_vs_h2(data, "page10", setup), tables, first);
            push_table(doc, tables::h3_vs_h2(data, "page50", setup), tables, first);
            push_table(doc, tables::download(data, setup), tables, first);
        }
    }
    let wire_charts = |c: &Chart| matches!(c.data, ChartData::Onwire(_) | ChartData::Waterfall(_));
    if measured("page50") {
        doc.heading(2, "Why: the 50-file page taken apart", "breakdown");
        for (i, setup) in data.setups.iter().enumerate() {
            push_table(
                doc,
                tables::breakdown(data, "page50", setup),
                tables,
                i == 0,
            );
        }
    } else if charts.iter().any(|c| wire_charts(c.chart)) {
        doc.heading(2, "The median runs, request by request", "breakdown");
    } else {
        return;
    }
    figures_where(doc, charts, |c| matches!(c.data, ChartData::Onwire(_)));
    figures_where(doc, charts, |c| matches!(c.data, ChartData::Waterfall(_)));
}

/// Where the time went, in round trips (per workload and setup), and where each significant
/// difference comes from (the diagnosis' explanations); nothing for records without the
/// accounting.
fn round_trips(
    doc: &mut Document,
    tables: &mut Vec<Table>,
    data: &ReportData,
    diagnosis: Option<&crate::diagnosis::slow_transfers::Diagnosis>,
) {
    let found = per_workload_and_setup(data, |w, s| wire_tables::round_trips(data, w, s));
    if found.is_empty() {
        return;
    }
    tables_section(
        doc,
        tables,
        ("Where the time went, in round trips", "round-trips"),
        Some(wire_tables::ROUND_TRIPS_INTRO),
        found,
    );
    let differences = diagnosis.map_or(&[][..], |d| d.differences.as_slice());
    doc.heading(3, "Where the difference comes from", "differences");
    doc.para(crate::diagnosis::slow_transfers::DIFFERENCES_INTRO);
    let metric = &data.summary.metric;
    if crate::diagnosis::explain::accounting_for(metric).is_none() {
        doc.para(format!(
            "{metric} has no round-trip accounting (load, loadEventEnd, FCP, LCP, Speed Index and visual completeness have: `pagebench report --metric fcp`), so its differences are not explained term by term."
        ));
    } else if differences.is_empty() && significant(data) > 0 {
        let why = if metric == crate::evidence::metric_registry::SPEED_INDEX_MS.name
            || metric == crate::evidence::metric_registry::VISUAL_COMPLETE_MS.name
        {
            "runs recorded before pagebench took the visual changes apart"
        } else {
            "runs recorded before pagebench kept render paths, or by an engine that marks no request render-blocking (Firefox)"
        };
        doc.para(format!(
            "{} significant comparisons, but their runs have no {metric} accounting: {why}.",
            significant(data)
        ));
    } else if differences.is_empty() {
        doc.para("No comparison is significant: there is no difference to explain.");
    } else {
        doc.blocks.push(Block::List(
            differences
                .iter()
                .map(|e| {
                    let waited = super::render_paths::contrast(
                        data,
                        metric,
                        (&e.a, e.a_run.as_ref()),
                        (&e.b, e.b_run.as_ref()),
                    );
                    match waited {
                        Some(w) => format!("`{}` {}. {w}.", e.label, e.sentence),
                        None => format!("`{}` {}.", e.label, e.sentence),
                    }
                })
                .collect(),
        ));
    }
}

/// The comparisons of the report's summary that found a difference.
fn significant(data: &ReportData) -> usize {
    use crate::support::stats::Verdict;
    data.summary
        .comparisons
        .iter()
        .filter(|c| matches!(c.comparison.verdict, Verdict::Faster | Verdict::Slower))
        .count()
}

/// What only some matrices measure: paint, head-of-line blocking, a trace's capacity, a
/// file-count sweep.
fn measured_sections(
    doc: &mut Document,
    tables: &mut Vec<Table>,
    data: &ReportData,
    charts: &[PlacedChart],
) {
    let paint: Vec<Table> = super::chart_data::key_pages(data)
        .iter()
        .flat_map(|w| data.setups.iter().filter_map(|s| tables::paint(data, w, s)))
        .collect();
    if !paint.is_empty() {
        tables_section(doc, tables, ("What the user saw", "paint"), None, paint);
        figures_where(doc, charts, is_visual);
    }
    tables_section(
        doc,
        tables,
        ("What the paints waited for", "render-paths"),
        Some(super::render_paths::INTRO),
        super::render_paths::tables(data),
    );
    let hol = per_workload_and_setup(data, |w, s| wire_tables::head_of_line(data, w, s));
    let hol_heading = ("Head-of-line blocking", "hol");
    tables_section(
        doc,
        tables,
        hol_heading,
        Some(wire_tables::HEAD_OF_LINE_INTRO),
        hol,
    );
    let order = data
        .workloads
        .iter()
        .filter_map(|w| wire_tables::response_order(data, w))
        .collect();
    tables_section(
        doc,
        tables,
        ("The servers' response order", "order"),
        Some(wire_tables::RESPONSE_ORDER_INTRO),
        order,
    );
    let traces = per_workload_and_setup(data, |w, s| wire_tables::trace_capacity(data, w, s));
    let trace_heading = ("Trace capacity offered", "trace");
    tables_section(
        doc,
        tables,
        trace_heading,
        Some(wire_tables::TRACE_INTRO),
        traces,
    );
    if tables::has_sweep(data) {
        doc.heading(2, "File-count sweep", "sweep");
        for setup in &data.setups {
            for metric in [
                Some(&crate::evidence::metric_registry::QUEUEING_MEDIAN_MS),
                None,
            ] {
                push_tables(
                    doc,
                    tables,
                    tables::sweep(data, setup, metric).into_iter().collect(),
                );
            }
        }
        figures_where(doc, charts, |c| matches!(c.data, ChartData::Sweep(_)));
    }
}

const SITES_INTRO: &str =
    "Each site was served from its archive by the embedded server: every recorded \
origin on the server address it was given (origins that shared one when recorded share one here, \
unless `--origin-addresses` said otherwise), with its own host name in the browser's resolver \
rules and, for HTTP/3, forced or primed like the page's own origin.";

const SHARDING_INTRO: &str =
    "The same page's files from one host and spread round-robin over K hosts \
(`pageNsK`: host 1 is the page's own, the others `s2.`…`sK.` subdomains, each on its own server \
address). Sharding was HTTP/1.1-era advice: more hosts, more connections; with HTTP/2 and HTTP/3 \
each extra host costs a handshake and splits one multiplexed connection.";

fn sites_and_sharding(doc: &mut Document, tables: &mut Vec<Table>, data: &ReportData) {
    let mut sites = super::sites::tables(data);
    sites.extend(super::sites::fidelity_tables(data));
    sites.extend(super::sites::origin_tables(data));
    if !sites.is_empty() {
        tables_section(
            doc,
            tables,
            ("Replayed sites", "sites"),
            Some(SITES_INTRO),
            sites,
        );
        for w in super::sites::recorded_sites(data) {
            for (i, setup) in data.setups.iter().enumerate() {
                push_table(doc, tables::breakdown(data, &w, setup), tables, i == 0);
            }
        }
    }
    match super::sharding::section(data) {
        Ok(None) => {}
        Ok(Some(sharding)) => {
            doc.heading(2, "Domain sharding", "sharding");
            doc.para(SHARDING_INTRO);
            push_tables(doc, tables, sharding.tables);
            doc.blocks.push(Block::List(sharding.advice));
        }
        Err(e) => {
            doc.heading(2, "Domain sharding", "sharding");
            doc.para(format!(
                "The sharding comparisons could not be computed: {e:#}."
            ));
        }
    }
}

/// Uploads, repeat views, and the comparisons across servers and engines.
fn comparison_sections(doc: &mut Document, tables: &mut Vec<Table>, data: &ReportData) {
    let uploads: Vec<Table> = data
        .setups
        .iter()
        .flat_map(|s| tables::uploads(data, s))
        .collect();
    tables_section(doc, tables, ("Uploads", "uploads"), None, uploads);
    let views = per_workload_and_setup(data, |w, s| wire_tables::views(data, w, s));
    let views_heading = ("Returning visitors: first visit and repeat view", "views");
    tables_section(
        doc,
        tables,
        views_heading,
        Some(wire_tables::VIEWS_INTRO),
        views,
    );
    let servers = tables::servers(data);
    tables_section(
        doc,
        tables,
        ("Server against server", "servers"),
        None,
        servers,
    );
    let engines = tables::engines(data);
    let engines_heading = ("Browser against browser", "engines");
    tables_section(doc, tables, engines_heading, Some(ENGINES_INTRO), engines);
    let mut devices: Vec<Table> = super::device_tables::calibration(data)
        .into_iter()
        .collect();
    devices.extend(super::device_tables::devices(data));
    let devices_heading = ("Devices: the browser's CPU", "devices");
    tables_section(doc, tables, devices_heading, Some(DEVICES_INTRO), devices);
}

const DEVICES_INTRO: &str = "A device is the CPU the whole browser gets — every process of it, \
the network service where Chromium runs QUIC and the GPU process included: one core and a share of \
it (a cgroup cap over a 10 ms period), the same for both engines; or Chromium's DevTools throttling, \
which slows the page's main thread alone. The protocol tables above are per device; here each \
device against desktop, and what each achieved.";

fn diagnostics(doc: &mut Document, d: &crate::diagnosis::slow_transfers::Diagnosis) {
    doc.heading(2, "Diagnostics: why transfers were slow", "diagnostics");
    doc.para(
        "For each download/upload series: goodput × RTT is the window that was effectively in \
flight; far below what the path carried, with no loss, it means a fixed window capped the transfer. \
UDP buffer overflows are read from `/proc/net/snmp` inside each namespace; retransmissions come from \
the server's TCP_INFO and quinn's statistics, drops from the emulator.",
    );
    if d.findings.is_empty() {
        doc.para("No finding: no transfer was window-limited, no UDP buffer overflowed, and retransmissions match the emulator's drops.");
    } else {
        doc.blocks.push(Block::List(
            d.findings
                .iter()
                .map(|f| format!("{} ({} of {} runs)", f.sentence, f.runs, f.of))
                .collect(),
        ));
    }
}

fn every_series(doc: &mut Document, tables: &mut Vec<Table>, data: &ReportData) {
    doc.heading(2, "Every series", "all-series");
    doc.para(
        "Every workload on every server (and in every browser), with every protocol comparison \
made (ratios a/b, verdicts after Holm).",
    );
    let all = per_workload_and_setup(data, |w, s| tables::all_series(data, w, s));
    push_tables(doc, tables, all);
}

/// How many runs each series took, the machine during the runs, and the machines.
fn runs_and_machines(doc: &mut Document, tables: &mut Vec<Table>, data: &ReportData) {
    if let Some(t) = super::adaptive_runs::table(data) {
        doc.heading(2, "Runs per series", "runs-per-series");
        push_tables(doc, tables, vec![t]);
    }
    super::machine_load::section(doc, data, tables);
    if let Some(t) = super::machines::table(data) {
        doc.heading(2, "Machines", "machines");
        push_tables(doc, tables, vec![t]);
    }
}

/// Invalid and unfinished runs, and where the report came from.
fn problem_runs(doc: &mut Document, data: &ReportData) {
    doc.heading(2, "Invalid and unfinished runs", "problem-runs");
    let s = &data.summary;
    if !s.invalid_by_reason.is_empty() || s.retries > 0 {
        doc.para(format!(
            "Invalid attempts by reason (warm-ups and retried attempts included): {}. {} attempt(s) were runs made again after a measurement failure (link, server, browser crash; up to {} per planned run); every attempt is on disk, only the last of each planned run counts.",
            if s.invalid_by_reason.is_empty() {
                "none".to_string()
            } else {
                s.invalid_by_reason
                    .iter()
                    .map(|(k, n)| format!("`{k}` {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            s.retries,
            data.meta.retry_invalid
        ));
    }
    let problems = tables::problem_runs(data);
    if problems.is_empty() {
        doc.para("Every measured run was valid and finished.");
    } else {
        doc.blocks.push(Block::List(problems));
    }
    doc.para(format!(
        "Generated by `pagebench report` {} from `meta.json`, `runs.csv`, `summary.json` and the \
median runs' records in `runs/`.",
        env!("CARGO_PKG_VERSION")
    ));
}
