//! The bundled font: a subset of DejaVu Sans (ASCII, Latin-1 and a few symbols: – — − ≤ ≥ → …
//! ↑ ↓ Δ μ ≈ •; its licence in `assets/LICENSE-DejaVu.txt`). The generated pages serve it as
//! their web font; the report draws its charts with it and embeds it in the HTML report.

pub const FONT_TTF: &[u8] = include_bytes!("assets/DejaVuSans-subset.ttf");
