//! The screen as Xvfb keeps it in its `-fbdir` file (pure): an XWD image (X Window Dump: a
//! header of big-endian 32-bit fields, the window name, a colour map, then the pixels), read
//! into RGB at half size. Only the layout Xvfb writes at depth 24 is accepted: 32 bits per
//! pixel, ZPixmap, 8-bit channel masks.

use anyhow::{ensure, Context, Result};

use crate::evidence::visual::{Rgb, WHITE_ABOVE};

/// The fixed part of the header: 25 big-endian u32 fields.
const HEADER_FIELDS: usize = 25;
/// XWD's only version, and its ZPixmap format (whole pixels, not bit planes).
const VERSION: u32 = 7;
const Z_PIXMAP: u32 = 2;
/// One colour-map entry: pixel (u32), red, green, blue (u16 each), flags, pad.
const COLOUR_ENTRY: usize = 12;

/// Where the pixels are in the file and how to read one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub width: u32,
    pub height: u32,
    pub bytes_per_line: usize,
    /// Offset of the first pixel.
    pub pixels_at: usize,
    /// Byte of a pixel that holds red, green and blue.
    channel_bytes: [usize; 3],
}

impl Layout {
    /// The layout from the file's first bytes; errors naming the field Xvfb did not write as
    /// expected.
    pub fn parse(bytes: &[u8]) -> Result<Layout> {
        ensure!(
            bytes.len() >= HEADER_FIELDS * 4,
            "an XWD screen file needs a {}-byte header, it has {} bytes",
            HEADER_FIELDS * 4,
            bytes.len()
        );
        let f = |i: usize| u32::from_be_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap());
        let [header_size, version, format] = [f(0), f(1), f(2)];
        ensure!(
            version == VERSION,
            "XWD file_version is {version}, not {VERSION}"
        );
        ensure!(
            format == Z_PIXMAP,
            "XWD pixmap_format is {format}, not ZPixmap ({Z_PIXMAP})"
        );
        let (width, height, lsb_first) = (f(4), f(5), f(7) == 0);
        let (bits_per_pixel, bytes_per_line, ncolors) = (f(11), f(12) as usize, f(19) as usize);
        ensure!(
            bits_per_pixel == 32,
            "XWD bits_per_pixel is {bits_per_pixel}: start Xvfb at depth 24 (32 bits a pixel)"
        );
        ensure!(
            bytes_per_line >= width as usize * 4,
            "XWD bytes_per_line {bytes_per_line} is shorter than {width} pixels"
        );
        let masks = [f(14), f(15), f(16)];
        let mut channel_bytes = [0; 3];
        for (slot, mask) in channel_bytes.iter_mut().zip(masks) {
            *slot = mask_byte(mask, lsb_first)
                .with_context(|| format!("XWD colour mask {mask:#x} is not one whole byte"))?;
        }
        Ok(Layout {
            width,
            height,
            bytes_per_line,
            pixels_at: header_size as usize + ncolors * COLOUR_ENTRY,
            channel_bytes,
        })
    }

    /// How many bytes the pixels take.
    pub fn pixel_bytes(&self) -> usize {
        self.bytes_per_line * self.height as usize
    }

    /// The pixels (`pixel_bytes()` of them, from `pixels_at`) at half size: each output pixel
    /// the mean of a 2×2 block, which also evens out the noise of antialiased edges.
    pub fn half_size(&self, pixels: &[u8]) -> Result<Rgb> {
        ensure!(
            pixels.len() >= self.pixel_bytes(),
            "an XWD screen of {}×{} needs {} pixel bytes, got {}",
            self.width,
            self.height,
            self.pixel_bytes(),
            pixels.len()
        );
        let (w, h) = (self.width / 2, self.height / 2);
        let mut out = Vec::with_capacity(w as usize * h as usize * 3);
        for y in 0..h as usize {
            let rows = [2 * y, 2 * y + 1].map(|r| &pixels[r * self.bytes_per_line..]);
            for x in 0..w as usize {
                for &c in &self.channel_bytes {
                    let sum: u32 = rows
                        .iter()
                        .flat_map(|row| [row[8 * x + c], row[8 * x + 4 + c]])
                        .map(u32::from)
                        .sum();
                    out.push(((sum + 2) / 4) as u8);
                }
            }
        }
        Rgb::new(w, h, out)
    }
}

impl Layout {
    /// Whether every pixel is white (each channel above the visual analysis' background
    /// threshold).
    pub fn is_white(&self, pixels: &[u8]) -> bool {
        (0..self.height as usize).all(|y| {
            let row = &pixels[y * self.bytes_per_line..][..self.width as usize * 4];
            row.chunks_exact(4)
                .all(|p| self.channel_bytes.iter().all(|&c| p[c] > WHITE_ABOVE))
        })
    }
}

/// The byte of a 32-bit pixel a one-byte channel mask selects, in the file's byte order.
fn mask_byte(mask: u32, lsb_first: bool) -> Option<usize> {
    let shift = [0, 8, 16, 24].into_iter().find(|&s| mask == 0xff << s)?;
    let from_lsb = (shift / 8) as usize;
    Some(if lsb_first { from_lsb } else { 3 - from_lsb })
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// An XWD file as Xvfb writes it at depth 24 (LSB first, BGRX pixels, 256 colour-map
    /// entries), `w`×`h`, every pixel `rgb`.
    pub fn xvfb_file(w: u32, h: u32, rgb: [u8; 3]) -> Vec<u8> {
        let name = b"Xvfb main window\0";
        let header_size = (HEADER_FIELDS * 4 + name.len()) as u32;
        let mut fields = [0u32; HEADER_FIELDS];
        fields[..6].copy_from_slice(&[header_size, VERSION, Z_PIXMAP, 24, w, h]);
        fields[11] = 32;
        fields[12] = w * 4;
        fields[14..17].copy_from_slice(&[0xff0000, 0xff00, 0xff]);
        fields[19] = 256;
        let mut out: Vec<u8> = fields.iter().flat_map(|v| v.to_be_bytes()).collect();
        out.extend_from_slice(name);
        out.extend(std::iter::repeat_n(0, 256 * COLOUR_ENTRY));
        let pixel = [rgb[2], rgb[1], rgb[0], 0];
        out.extend(pixel.repeat(w as usize * h as usize));
        out
    }

    #[test]
    fn an_xvfb_screen_reads_as_rgb_at_half_size() {
        let file = xvfb_file(8, 6, [0x33, 0x66, 0xcc]);
        let layout = Layout::parse(&file).unwrap();
        assert_eq!(
            (layout.width, layout.height, layout.bytes_per_line),
            (8, 6, 32)
        );
        assert_eq!(layout.pixels_at + layout.pixel_bytes(), file.len());
        let rgb = layout.half_size(&file[layout.pixels_at..]).unwrap();
        assert_eq!((rgb.width, rgb.height), (4, 3));
        assert_eq!(rgb.pixel(3, 2), Some([0x33, 0x66, 0xcc]));
    }

    #[test]
    fn half_size_averages_each_block() {
        let mut file = xvfb_file(2, 2, [0, 0, 0]);
        let layout = Layout::parse(&file).unwrap();
        // One white pixel of four: a quarter grey, rounded.
        file[layout.pixels_at..layout.pixels_at + 3].copy_from_slice(&[255, 255, 255]);
        let rgb = layout.half_size(&file[layout.pixels_at..]).unwrap();
        assert_eq!(rgb.pixel(0, 0), Some([64, 64, 64]));
    }

    #[test]
    fn white_is_every_pixel_white() {
        let mut file = xvfb_file(4, 2, [255, 255, 255]);
        let layout = Layout::parse(&file).unwrap();
        assert!(layout.is_white(&file[layout.pixels_at..]));
        // Firefox's grey about:blank is not white.
        let at = layout.pixels_at + layout.bytes_per_line + 4;
        file[at..at + 3].copy_from_slice(&[0xfb, 0xf9, 0xf9]);
        assert!(!layout.is_white(&file[layout.pixels_at..]));
    }

    #[test]
    fn other_layouts_are_refused_with_the_field() {
        let mut file = xvfb_file(4, 4, [0, 0, 0]);
        file[44..48].copy_from_slice(&16u32.to_be_bytes());
        let e = Layout::parse(&file).unwrap_err().to_string();
        assert!(
            e.contains("bits_per_pixel is 16") && e.contains("depth 24"),
            "{e}"
        );
        let mut file = xvfb_file(4, 4, [0, 0, 0]);
        file[56..60].copy_from_slice(&0xf800u32.to_be_bytes());
        assert!(format!("{:#}", Layout::parse(&file).unwrap_err()).contains("0xf800"));
        assert!(Layout::parse(&file[..40]).is_err());
        let short = xvfb_file(4, 4, [0, 0, 0]);
        let layout = Layout::parse(&short).unwrap();
        assert!(layout.half_size(&short[layout.pixels_at + 4..]).is_err());
    }

    #[test]
    fn msb_first_files_read_the_other_bytes() {
        assert_eq!(mask_byte(0xff0000, true), Some(2));
        assert_eq!(mask_byte(0xff0000, false), Some(1));
        assert_eq!(mask_byte(0xff, false), Some(3));
        assert_eq!(mask_byte(0xfff, true), None);
    }
}
