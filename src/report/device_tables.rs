//! The report's devices (pure): each device against desktop per protocol, and the calibration
//! the runs carry — per engine and device, the target slowdown, the native benchmark's achieved
//! slowdown and the page benchmark's, against desktop in the same engine.

use super::doc::{Cell, CellClass, Table};
use super::report_data::ReportData;
use crate::config::device::{DeviceId, Slowing};
use crate::config::identity::Setup;
use crate::evidence::metric_registry::{CPU_BENCHMARK_MS, DEVICE_SLOWDOWN};

/// Each device against desktop, per protocol (within each view, engine and server).
pub fn devices(data: &ReportData) -> Vec<Table> {
    let Some(base_device) = data.devices.first().filter(|d| d.is_desktop()) else {
        return vec![];
    };
    let mut out = Vec::new();
    for setup in data.setups.iter().filter(|s| &s.device == base_device) {
        let mut on = data.engine_and_view(setup);
        on.retain(|p| !p.starts_with("on "));
        if data.servers.len() > 1 {
            on.insert(0, format!("server {}", setup.server));
        }
        let on = if on.is_empty() {
            String::new()
        } else {
            format!(" ({})", on.join(", "))
        };
        for device in data.devices.iter().skip(1) {
            let other = setup.clone().with_device(device.clone());
            out.extend(super::tables::against(
                data,
                (&other, setup),
                format!("device-{device}-vs-desktop-{}", setup.slug()),
                format!("{device} against desktop{on}"),
                (device.to_string(), base_device.to_string()),
            ));
        }
    }
    out
}

/// The median of `metric` over every series of `setup` (each series' median; None without).
fn median_over_series(data: &ReportData, setup: &Setup, metric: &str) -> Option<f64> {
    let medians: Vec<f64> = data
        .summary
        .series
        .iter()
        .filter(|s| s.key.is(setup))
        .filter_map(|s| s.breakdown.get(metric)?.median?.ms())
        .collect();
    crate::support::stats::median(&medians).ok()
}

/// Per engine and device: target, how, the native and the page benchmark's achieved
/// slowdown (the page's against desktop in the same engine). None when no run timed them.
pub fn calibration(data: &ReportData) -> Option<Table> {
    let mut rows = Vec::new();
    for setup in &data.setups {
        let device = setup.device.device().ok()?;
        let js = median_over_series(data, setup, CPU_BENCHMARK_MS.name);
        let native = median_over_series(data, setup, DEVICE_SLOWDOWN.name);
        if js.is_none() && native.is_none() {
            continue;
        }
        let desktop = setup.clone().with_device(DeviceId::default());
        let desktop_js = median_over_series(data, &desktop, CPU_BENCHMARK_MS.name);
        let in_engine = js.zip(desktop_js).map(|(d, base)| d / base);
        let num = |x: Option<f64>, f: &dyn Fn(f64) -> String| {
            x.map_or(Cell::new("—", CellClass::Missing), |x| {
                Cell::new(f(x), CellClass::Text)
            })
        };
        let mut label = setup.browser.label().to_string();
        if data.servers.len() > 1 {
            label.push_str(&format!(" · {}", setup.server));
        }
        rows.push(vec![
            Cell::label(label),
            Cell::label(device.name.clone()),
            Cell::new(format!("{:.1}×", device.slowdown), CellClass::Text),
            Cell::new(how(device.slowing), CellClass::Text),
            num(native, &|x| format!("{x:.2}×")),
            num(js, &|x| format!("{x:.0}")),
            num(in_engine, &|x| format!("{x:.2}×")),
        ]);
    }
    (!rows.is_empty()).then(|| Table {
        id: "device-calibration".into(),
        title: "Devices: target and achieved slowdown".into(),
        intro: vec![
            "Every run on a device timed two fixed CPU benchmarks: a native one free and on the \
device side by side just before the run, and a JavaScript one in the page after the load. The \
achieved slowdowns are medians over the series' medians; the page's is against desktop in the \
same engine. DevTools throttling slows the page alone: its native slowdown stays near 1."
                .into(),
        ],
        header: [
            "engine",
            "device",
            "target",
            "how",
            "native slowdown",
            "page benchmark (ms)",
            "page slowdown",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![],
    })
}

fn how(s: Slowing) -> &'static str {
    match s {
        Slowing::None => "none",
        Slowing::CpuCap => "cgroup: one core, a share of it",
        Slowing::DevTools => "DevTools throttling",
    }
}
