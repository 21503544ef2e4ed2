//! The page-side scripts both engines run through their DevTools protocol (CDP's
//! `Runtime.evaluate`, BiDi's `script.evaluate`): they read the standard Navigation, Resource
//! and Paint Timing entries, so what a run measures is defined once, whatever the engine.

use serde_json::Value;

use crate::evidence::metrics::{Observation, PaintEntries};

/// Run before the page's own scripts: keep every Resource Timing entry, also on pages with
/// more than 250 files.
pub const KEEP_RESOURCE_ENTRIES: &str = "performance.setResourceTimingBufferSize(100000);";

/// A fixed JavaScript CPU benchmark, run in the page after the load (outside the measured
/// window): string building, a sort, property access and integer arithmetic on the page's main
/// thread — the kind of work Lighthouse's benchmark index times. Three passes of the same work;
/// the median pass's wall time (ms) is the result (the first pass also compiles the code, and
/// the page may still be busy after its load), as JSON text (BiDi returns primitives only).
/// About 70 ms a pass in Chromium on this machine's core (many 10 ms quota periods); on a
/// device against desktop in the same engine, the slowdown the device achieved in the engine.
pub const CPU_BENCHMARK: &str = "(() => {\n\
  const pass = (seed) => {\n\
    const t0 = performance.now();\n\
    let acc = seed;\n\
    for (let round = 0; round < 600; round++) {\n\
      const words = [];\n\
      for (let i = 0; i < 400; i++) words.push('w' + ((i * 7919 + round * 31 + seed) % 1009).toString(36));\n\
      words.sort();\n\
      const seen = {};\n\
      for (const w of words) seen[w] = (seen[w] || 0) + w.length;\n\
      for (const k in seen) acc = (acc + seen[k] * 31) | 0;\n\
      let x = round;\n\
      for (let i = 0; i < 4000; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;\n\
      acc ^= x;\n\
    }\n\
    return [performance.now() - t0, acc];\n\
  };\n\
  const passes = [pass(1), pass(2), pass(3)];\n\
  const ms = passes.map((p) => p[0]).sort((a, b) => a - b);\n\
  return JSON.stringify({ ms: ms[1], passes: ms, check: passes.reduce((a, p) => a ^ p[1], 0) });\n\
})()";

/// The benchmark's wall time from its result, JSON text (None when it did not run or returned
/// no time).
pub fn read_cpu_benchmark(v: &Value) -> Option<f64> {
    let parsed: Value = serde_json::from_str(v.as_str()?).ok()?;
    parsed
        .get("ms")
        .and_then(Value::as_f64)
        .filter(|ms| *ms > 0.0)
}

/// How long a page may keep loading subresources after its load event before we stop waiting
/// for the ones still missing (they are then reported missing by validation).
const AFTER_LOAD_GRACE_MS: u32 = 1000;

/// A promise that resolves once the load is over: `loadEventEnd` is filled (it is after the load
/// event), `expected` Resource Timing entries are in (or a grace period after the load passed),
/// and on a transfer page the page's own `window.__pagebench.done` is set.
pub fn load_finished(expected: usize, transfer: bool) -> String {
    format!(
        "new Promise(function (resolve) {{\n\
           var want = {expected}, transfer = {transfer};\n\
           (function check() {{\n\
             var nav = performance.getEntriesByType('navigation')[0];\n\
             var loaded = nav && nav.loadEventEnd > 0;\n\
             var pb = window.__pagebench;\n\
             var done = !transfer || (pb && pb.done);\n\
             var n = performance.getEntriesByType('resource').length;\n\
             var grace = loaded && performance.now() - nav.loadEventEnd > {AFTER_LOAD_GRACE_MS};\n\
             if (loaded && done && (n >= want || grace)) resolve(true); else setTimeout(check, 10);\n\
           }})();\n\
         }})"
    )
}

/// The timing entries and the page's result, as one JSON string.
pub const TIMING_ENTRIES: &str = "JSON.stringify({ timeOrigin: performance.timeOrigin, \
    nav: performance.getEntriesByType('navigation')[0] || null, \
    res: performance.getEntriesByType('resource'), \
    pb: window.__pagebench || null })";

/// Puts what [`TIMING_ENTRIES`] returned into `obs` (whatever exists, also after a timeout).
pub fn read_timing_entries(v: &Value, obs: &mut Observation) {
    let Some(Ok(v)) = v.as_str().map(serde_json::from_str::<Value>) else {
        return;
    };
    obs.time_origin = v["timeOrigin"].as_f64();
    obs.navigation = Some(v["nav"].clone()).filter(|n| !n.is_null());
    obs.resources = v["res"].as_array().cloned().unwrap_or_default();
    obs.page_result = Some(v["pb"].clone()).filter(|p| !p.is_null());
}

/// Reads the buffered paint entries after a frame (so the last paints are reported). A buffered
/// observer hands over what the browser kept; `takeRecords` makes it synchronous.
pub const PAINT_ENTRIES: &str = r#"new Promise(function (resolve) {
  function take(type) {
    try {
      var po = new PerformanceObserver(function () {});
      po.observe({ type: type, buffered: true });
      var r = po.takeRecords();
      po.disconnect();
      return r;
    } catch (e) { return []; }
  }
  function selector(el) {
    var parts = [];
    while (el && el.nodeType === 1 && el !== document.documentElement) {
      var s = el.tagName.toLowerCase();
      if (el.id) { parts.unshift(s + '#' + el.id); break; }
      var p = el.parentElement;
      if (p && p.tagName !== 'HTML') {
        var same = Array.prototype.filter.call(p.children, function (c) { return c.tagName === el.tagName; });
        if (same.length > 1) s += ':nth-of-type(' + (same.indexOf(el) + 1) + ')';
      }
      parts.unshift(s);
      el = p;
    }
    return parts.join(' > ');
  }
  function read() {
    var paint = {};
    take('paint').forEach(function (e) { paint[e.name] = e.startTime; });
    var supported = [];
    try { supported = PerformanceObserver.supportedEntryTypes.slice(); } catch (e) {}
    resolve(JSON.stringify({
      supported: supported,
      firstPaint: paint['first-paint'] || null,
      firstContentfulPaint: paint['first-contentful-paint'] || null,
      largestContentfulPaint: take('largest-contentful-paint').map(function (e) {
        return { startTime: e.startTime, size: e.size, url: e.url || '', selector: selector(e.element) };
      }),
      layoutShifts: take('layout-shift').map(function (e) {
        return { startTime: e.startTime, value: e.value, hadRecentInput: e.hadRecentInput };
      }),
      elements: take('element').map(function (e) {
        return { identifier: e.identifier, renderTime: e.renderTime, loadTime: e.loadTime, url: e.url || '' };
      }),
      // What blocks a first render by the early-hints rule: the head's stylesheets and its
      // synchronous scripts, as absolute URLs.
      headBlocking: Array.prototype.map.call(document.querySelectorAll(
        'head link[rel~="stylesheet"][href], head script[src]:not([async]):not([defer]):not([type="module"])'),
        function (el) { return el.href || el.src; })
    }));
  }
  // Paint entries arrive with the frame's presentation, after the load on a fast link: wait
  // (at most a second) for the first contentful and largest paints, then a frame more.
  var t0 = performance.now();
  function has(type) {
    try { return PerformanceObserver.supportedEntryTypes.indexOf(type) < 0 || take(type).length > 0; }
    catch (e) { return true; }
  }
  // …and for every element Element Timing follows (a late image paints after the load).
  var tracked = document.querySelectorAll('[elementtiming]').length;
  var painted = function () {
    return performance.getEntriesByName('first-contentful-paint').length > 0 &&
      has('largest-contentful-paint') && take('element').length >= tracked;
  };
  (function wait() {
    if (painted() || performance.now() - t0 > 1000) {
      var done = false;
      var once = function () { if (!done) { done = true; read(); } };
      requestAnimationFrame(function () { setTimeout(once, 0); });
      setTimeout(once, 200);
    } else {
      setTimeout(wait, 20);
    }
  })();
})"#;

/// What [`PAINT_ENTRIES`] returned, when it returned something readable.
pub fn read_paint_entries(r: anyhow::Result<Value>) -> Option<PaintEntries> {
    match r {
        Ok(Value::String(s)) => match serde_json::from_str(&s) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!("unreadable paint entries: {e}");
                None
            }
        },
        Ok(_) => None,
        Err(e) => {
            tracing::debug!("no paint entries: {e:#}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_benchmark_reads_its_median_pass() {
        let v = serde_json::json!("{\"ms\":71.5,\"passes\":[70.1,71.5,90.2],\"check\":5}");
        assert_eq!(read_cpu_benchmark(&v), Some(71.5));
        assert_eq!(read_cpu_benchmark(&serde_json::json!("{\"ms\":0}")), None);
        assert_eq!(read_cpu_benchmark(&Value::Null), None);
    }
    use serde_json::json;

    #[test]
    fn timing_entries_fill_the_observation() {
        let mut obs = Observation::default();
        let text = json!({"timeOrigin": 1.5e12, "nav": {"loadEventEnd": 5.0},
                          "res": [{"name": "a"}], "pb": null})
        .to_string();
        read_timing_entries(&Value::String(text), &mut obs);
        assert_eq!(obs.time_origin, Some(1.5e12));
        assert_eq!(obs.navigation.unwrap()["loadEventEnd"], 5.0);
        assert_eq!(obs.resources.len(), 1);
        assert!(obs.page_result.is_none());
        let mut untouched = Observation::default();
        read_timing_entries(&json!(null), &mut untouched);
        assert!(untouched.navigation.is_none());
    }

    #[test]
    fn the_load_wait_names_its_counts() {
        let s = load_finished(50, true);
        assert!(s.contains("var want = 50, transfer = true;"), "{s}");
        assert!(s.contains("> 1000"));
    }

    #[test]
    fn paint_entries_say_which_types_the_engine_has() {
        let p = read_paint_entries(Ok(Value::String(
            json!({"supported": ["paint", "largest-contentful-paint"],
                   "firstContentfulPaint": 120.0, "largestContentfulPaint": [],
                   "layoutShifts": [], "elements": []})
            .to_string(),
        )))
        .unwrap();
        assert_eq!(p.first_contentful_paint, Some(120.0));
        assert!(!p.supports("layout-shift"));
        assert!(p.supports("largest-contentful-paint"));
        assert!(read_paint_entries(Ok(Value::Null)).is_none());
    }
}
