//! File bodies of exact sizes that are valid for their type: CSS, JavaScript, PNG, a TrueType
//! font and random binary. Deterministic given the RNG.

use rand::{Rng, RngCore};

/// The bundled font, served as the page's font.
pub use crate::support::font::FONT_TTF;

const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// Random letters and digits (incompressible enough; bodies are served uncompressed anyway).
fn filler(rng: &mut impl Rng, n: usize) -> String {
    (0..n)
        .map(|_| ALNUM[rng.random_range(0..ALNUM.len())] as char)
        .collect()
}

/// Pads `body` to exactly `size` bytes with a comment `/*…*/`; if the body is too long it is cut
/// back to whole lines first. Used for CSS and JS, whose comments have the same syntax.
fn pad_with_comment(rng: &mut impl Rng, mut body: String, size: usize) -> String {
    const OPEN: &str = "/*";
    const CLOSE: &str = "*/\n";
    let overhead = OPEN.len() + CLOSE.len();
    while body.len() + overhead > size {
        match body[..body.len().saturating_sub(1)].rfind('\n') {
            Some(i) => body.truncate(i + 1),
            None => {
                body.clear();
                break;
            }
        }
    }
    if body.len() + overhead > size {
        // Too small for a comment: spaces are valid CSS and JS too.
        return " ".repeat(size);
    }
    let n = size - body.len() - overhead;
    body.push_str(OPEN);
    body.push_str(&filler(rng, n));
    body.push_str(CLOSE);
    debug_assert_eq!(body.len(), size);
    body
}

/// The page font's declaration (served at `url`) and the body text set in it.
fn font_rules(url: &str) -> String {
    let face = format!(
        "@font-face{{font-family:\"PbSans\";src:url(\"{url}\") format(\"truetype\");font-display:block}}\n"
    );
    let body = "body{font-family:\"PbSans\",sans-serif;margin:0 auto;max-width:60em}\n";
    face + body
}

/// A stylesheet of exactly `size` bytes. The first one (`with_font`) declares the page font.
pub fn css(rng: &mut impl Rng, size: usize, index: usize, font_url: Option<&str>) -> Vec<u8> {
    let mut s = format!("/* pagebench stylesheet {index} */\n");
    if let Some(url) = font_url {
        s.push_str(&font_rules(url));
    }
    let mut rule = 0;
    while s.len() + 120 < size * 3 / 4 {
        s.push_str(&format!(
            ".pb-{index}-{rule}{{color:#{:06x};margin:{}px {}px;padding:{}px;border:1px solid #{:06x}}}\n",
            rng.random_range(0..0xffffffu32),
            rng.random_range(0..16),
            rng.random_range(0..16),
            rng.random_range(0..8),
            rng.random_range(0..0xffffffu32),
        ));
        rule += 1;
    }
    pad_with_comment(rng, s, size).into_bytes()
}

/// A script of exactly `size` bytes that runs without error and counts itself in
/// `window.__pbScripts`.
pub fn js(rng: &mut impl Rng, size: usize, index: usize) -> Vec<u8> {
    let mut s = format!("/* pagebench script {index} */\n(function(){{var d=[];\n");
    let tail = "var s=0;for(var i=0;i<d.length;i++){s=(s+d[i])|0;}\
window.__pbScripts=(window.__pbScripts||0)+1;window.__pbSum=((window.__pbSum||0)+s)|0;})();\n";
    while s.len() + tail.len() + 80 < size * 3 / 4 {
        let nums: Vec<String> = (0..8)
            .map(|_| rng.random_range(0..100_000u32).to_string())
            .collect();
        s.push_str(&format!("d.push({});\n", nums.join(",")));
    }
    s.push_str(tail);
    if s.len() + 5 > size {
        // Tiny script: the smallest body that still counts itself.
        let tiny = "window.__pbScripts=(window.__pbScripts||0)+1;\n".to_string();
        return pad_with_comment(rng, tiny, size).into_bytes();
    }
    pad_with_comment(rng, s, size).into_bytes()
}

/// A valid PNG of exactly `size` bytes: random RGB pixels sized to fit, then a `tEXt` chunk
/// that pads it to the byte.
pub fn png(rng: &mut impl Rng, size: usize) -> Vec<u8> {
    // tEXt chunk: length(4) + type(4) + "Comment\0"(8) + text + crc(4).
    const TEXT_OVERHEAD: usize = 20;
    let mut side = (((size.saturating_sub(120)) as f64 / 3.0).sqrt().floor() as u32).max(1);
    loop {
        let encoded = encode_png(rng, side);
        if encoded.len() + TEXT_OVERHEAD <= size {
            return pad_png(rng, encoded, size);
        }
        if side == 1 {
            panic!(
                "PNG of {size} bytes is too small (minimum {})",
                encoded.len() + TEXT_OVERHEAD
            );
        }
        side = (side as f64 * 0.9).floor().max(1.0) as u32;
    }
}

/// The largest hero picture, and how many bytes a PNG of it needs at least.
pub const HERO_SIZE: (u32, u32) = (640, 320);

pub fn hero_min_bytes() -> usize {
    encode_gradient_png(HERO_SIZE.0, HERO_SIZE.1).len() + PNG_TEXT_OVERHEAD
}

/// tEXt chunk: length(4) + type(4) + "Comment\0"(8) + text + crc(4).
const PNG_TEXT_OVERHEAD: usize = 20;

/// The hero image of a generated page: a wide, smooth picture (a gradient compresses to 1.6 KB)
/// of up to [`HERO_SIZE`], padded to exactly `size` bytes — large enough on screen to
/// be the page's Largest Contentful Paint. Smaller when `size` cannot hold it; `None` when not
/// even 64 × 32 fits (the caller keeps an ordinary image).
pub fn hero_png(rng: &mut impl Rng, size: usize) -> Option<Vec<u8>> {
    let (mut w, mut h) = HERO_SIZE;
    while w >= 64 {
        let encoded = encode_gradient_png(w, h);
        if encoded.len() + PNG_TEXT_OVERHEAD <= size {
            return Some(pad_png(rng, encoded, size));
        }
        (w, h) = (w * 4 / 5, h * 4 / 5);
    }
    None
}

/// The width and height of a PNG (its IHDR), `None` if `png` is not one.
pub fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if png.len() < 24 || &png[12..16] != b"IHDR" {
        return None;
    }
    let be = |i: usize| u32::from_be_bytes([png[i], png[i + 1], png[i + 2], png[i + 3]]);
    Some((be(16), be(20)))
}

fn encode_gradient_png(w: u32, h: u32) -> Vec<u8> {
    let mut pixels = Vec::with_capacity((w * h * 3) as usize);
    for _ in 0..h {
        for x in 0..w {
            let f = x as f32 / w as f32;
            pixels.extend([(40.0 + 60.0 * f) as u8, (90.0 + 80.0 * f) as u8, 200]);
        }
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Best);
        enc.set_filter(png::FilterType::Up);
        let mut wr = enc.write_header().expect("PNG header into a Vec");
        wr.write_image_data(&pixels).expect("PNG data into a Vec");
    }
    out
}

fn encode_png(rng: &mut impl Rng, side: u32) -> Vec<u8> {
    let mut pixels = vec![0u8; (side * side * 3) as usize];
    rng.fill_bytes(&mut pixels);
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, side, side);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Fast);
        let mut w = enc.write_header().expect("PNG header into a Vec");
        w.write_image_data(&pixels).expect("PNG data into a Vec");
    }
    out
}

/// Inserts a `tEXt` chunk before `IEND` so the file is exactly `size` bytes.
fn pad_png(rng: &mut impl Rng, mut encoded: Vec<u8>, size: usize) -> Vec<u8> {
    const IEND_LEN: usize = 12;
    let iend = encoded.split_off(encoded.len() - IEND_LEN);
    debug_assert_eq!(&iend[4..8], b"IEND");
    let text_len = size - encoded.len() - IEND_LEN - 20;
    let mut data = b"Comment\0".to_vec();
    data.extend(filler(rng, text_len).into_bytes());
    encoded.extend((data.len() as u32).to_be_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(b"tEXt");
    crc.update(&data);
    encoded.extend(b"tEXt");
    encoded.extend(&data);
    encoded.extend(crc.finalize().to_be_bytes());
    encoded.extend(iend);
    debug_assert_eq!(encoded.len(), size);
    encoded
}

/// Random bytes (the download body).
pub fn binary(rng: &mut impl RngCore, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    rng.fill_bytes(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn exact_sizes() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for size in [128usize, 500, 900, 4096, 20_000] {
            assert_eq!(css(&mut rng, size, 1, None).len(), size);
            assert_eq!(js(&mut rng, size, 1).len(), size);
            assert_eq!(png(&mut rng, size).len(), size);
        }
        assert_eq!(css(&mut rng, 3000, 0, Some("f.ttf")).len(), 3000);
    }

    #[test]
    fn png_decodes_with_padding() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for size in [128usize, 900, 12_345] {
            let bytes = png(&mut rng, size);
            let decoder = png::Decoder::new(std::io::Cursor::new(&bytes));
            let mut reader = decoder.read_info().expect("valid PNG header");
            let mut buf = vec![0; reader.output_buffer_size()];
            reader.next_frame(&mut buf).expect("valid PNG data");
        }
    }

    #[test]
    fn css_and_js_are_plain_ascii_with_closed_comments() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let c = String::from_utf8(css(&mut rng, 5000, 2, None)).unwrap();
        assert_eq!(c.matches("/*").count(), c.matches("*/").count());
        let j = String::from_utf8(js(&mut rng, 5000, 2)).unwrap();
        assert!(j.contains("__pbScripts"));
        assert_eq!(j.matches("/*").count(), j.matches("*/").count());
    }

    #[test]
    fn font_is_truetype() {
        assert_eq!(&FONT_TTF[..4], &[0, 1, 0, 0]);
    }
}
