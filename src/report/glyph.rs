//! A bitmap backend whose text is rasterised here with the bundled font. plotters 0.3.7's
//! ab_glyph text drops each glyph's left side bearing (narrow glyphs like `1`, `l`, `i` drift
//! left and words look broken: "emb edded"); this backend lays glyphs out at their true
//! positions, with kerning, and keeps every other drawing call on plotters' bitmap backend.

use std::sync::OnceLock;

use ab_glyph::{point, Font, FontRef, PxScale, ScaleFont};
use plotters::backend::BitMapBackend;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
    FontStyle,
};

/// The bundled font: drawn here, registered with plotters by `draw`, embedded in the HTML
/// report.
pub use crate::support::font::FONT_TTF;

fn font() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(FONT_TTF).ok())
        .as_ref()
}

/// Whether the bundled font parses (checked before drawing, for one clear error).
pub fn font_ok() -> bool {
    font().is_some()
}

/// Width and height (ascent − descent) of a line of text at `size` px.
pub fn text_size(text: &str, size: f64) -> (u32, u32) {
    let Some(f) = font() else {
        return (0, 0);
    };
    let sf = f.as_scaled(PxScale::from(size as f32));
    let mut w = 0.0f32;
    let mut prev = None;
    for c in text.chars() {
        let id = sf.glyph_id(c);
        if let Some(p) = prev {
            w += sf.kern(p, id);
        }
        w += sf.h_advance(id);
        prev = Some(id);
    }
    (w.ceil() as u32, (sf.ascent() - sf.descent()).ceil() as u32)
}

/// Coverage of every pixel of a line of text, relative to the top-left of its box.
fn rasterise(text: &str, size: f64, mut put: impl FnMut(i32, i32, f32)) {
    let Some(f) = font() else {
        return;
    };
    let scale = PxScale::from(size as f32);
    let sf = f.as_scaled(scale);
    let mut caret = 0.0f32;
    let mut prev = None;
    for c in text.chars() {
        let id = sf.glyph_id(c);
        if let Some(p) = prev {
            caret += sf.kern(p, id);
        }
        let glyph = id.with_scale_and_position(scale, point(caret, sf.ascent()));
        if let Some(outline) = f.outline_glyph(glyph) {
            let b = outline.px_bounds();
            outline
                .draw(|x, y, cov| put(b.min.x as i32 + x as i32, b.min.y as i32 + y as i32, cov));
        }
        caret += sf.h_advance(id);
        prev = Some(id);
    }
}

/// plotters' bitmap backend with correct text.
pub struct GlyphBackend<'a> {
    inner: BitMapBackend<'a>,
}

impl<'a> GlyphBackend<'a> {
    pub fn with_buffer(buf: &'a mut [u8], size: (u32, u32)) -> GlyphBackend<'a> {
        GlyphBackend {
            inner: BitMapBackend::with_buffer(buf, size),
        }
    }
}

type Res<E> = Result<(), DrawingErrorKind<E>>;

impl<'a> DrawingBackend for GlyphBackend<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Res<Self::ErrorType> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Res<Self::ErrorType> {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Res<Self::ErrorType> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Res<Self::ErrorType> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Res<Self::ErrorType> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Res<Self::ErrorType> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Res<Self::ErrorType> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Res<Self::ErrorType> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Res<Self::ErrorType> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> Res<Self::ErrorType> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let (w, h) = text_size(text, style.size());
        let (w, h) = (w as i32, h as i32);
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            HPos::Left => 0,
            HPos::Right => -w,
            HPos::Center => -w / 2,
        };
        let dy = match anchor.v_pos {
            VPos::Top => 0,
            VPos::Center => -h / 2,
            VPos::Bottom => -h,
        };
        let trans = style.transform();
        let bold = matches!(style.style(), FontStyle::Bold);
        let (sw, sh) = self.get_size();
        let mut pixels: Vec<(i32, i32, f32)> = Vec::new();
        rasterise(text, style.size(), |x, y, cov| {
            pixels.push((x, y, cov));
            if bold {
                pixels.push((x + 1, y, cov));
            }
        });
        for (x, y, cov) in pixels {
            let (x, y) = trans.transform(x + dx, y + dy);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && y >= 0 && (x as u32) < sw && (y as u32) < sh && cov > 0.0 {
                self.inner.draw_pixel(
                    (x, y),
                    BackendColor {
                        alpha: color.alpha * cov.min(1.0) as f64,
                        rgb: color.rgb,
                    },
                )?;
            }
        }
        Ok(())
    }

    fn estimate_text_size<T: BackendTextStyle>(
        &self,
        text: &str,
        style: &T,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        Ok(text_size(text, style.size()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_includes_side_bearings() {
        assert!(font_ok());
        let (w1, h) = text_size("1", 20.0);
        let (w11, _) = text_size("11", 20.0);
        assert!((18..=26).contains(&h), "{h}");
        assert!(w11 >= 2 * w1 - 1 && w11 <= 2 * w1 + 1);
        // Every glyph's pixels fall inside the layout box (give or take antialiasing).
        let (w, h) = text_size("embedded 1191", 16.0);
        let mut minx = i32::MAX;
        let mut maxx = i32::MIN;
        rasterise("embedded 1191", 16.0, |x, y, _| {
            assert!(y >= -1 && y <= h as i32 + 1, "{y}");
            minx = minx.min(x);
            maxx = maxx.max(x);
        });
        assert!(minx >= 0 && maxx <= w as i32 + 1, "{minx} {maxx} {w}");
    }
}
