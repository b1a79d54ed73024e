//! LOLWUT [VERSION v] [args]: Redis's piece of computer art per version. Version 5 draws
//! Georg Nees's "Schotter" (1968) in Braille characters, as Redis 5 does: a grid of squares
//! turned and shifted more and more at random down the rows. Version 6 draws a random city
//! skyline in the terminal's four grays, as Redis 6 does: two rows of plain buildings in the
//! back, one of buildings with lit windows in front. Any other version answers the version
//! line alone, as Redis 7 does for its own version.

use crate::cmd::{eq, parse_int, ConnCtx, Reg, ERR_NOT_INT};
use darner_resp::ReplyWriter;
use std::f64::consts::PI;

pub fn register(r: &mut Reg) {
    r.conn("lolwut", lolwut);
}

fn lolwut(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut rest = &args[1..];
    // Redis turns the number into "<v>.0.0" (as an unsigned int) and picks the drawing by
    // that string: version 5 (and 4.9) is Schotter, version 6 (and 5.9) the skyline.
    let mut version = crate::REDIS_COMPAT_VERSION.to_string();
    if args.len() >= 3 && eq(args[1], "version") {
        let Some(v) = parse_int(args[2]) else {
            return w.error(ERR_NOT_INT);
        };
        version = format!("{}.0.0", v as u32);
        rest = &args[3..];
    }
    let v = version.as_bytes();
    let is = |major: u8, nine: bool| v[0] == major && v[1] == b'.' && (v[2] == b'9') == nine;
    let text = if is(b'5', false) || is(b'4', true) {
        schotter(rest)
    } else if is(b'6', false) || is(b'5', true) {
        skyline(rest)
    } else {
        Ok(format!("Redis ver. {}\n", crate::REDIS_COMPAT_VERSION))
    };
    match text {
        Ok(text) => w.verbatim(b"txt", text.as_bytes()),
        Err(e) => w.error(e),
    }
}

/// The version's optional integer arguments over their defaults; any past them are ignored.
fn int_args<const N: usize>(
    mut params: [i64; N],
    rest: &[&[u8]],
) -> Result<[i64; N], &'static [u8]> {
    for (p, a) in params.iter_mut().zip(rest) {
        *p = parse_int(a).ok_or(ERR_NOT_INT)?;
    }
    Ok(params)
}

/// LOLWUT VERSION 5 [columns [squares-per-row [squares-per-col]]].
fn schotter(rest: &[&[u8]]) -> Result<String, &'static [u8]> {
    let [cols, per_row, per_col] = int_args([66, 8, 12], rest)?;
    let cols = cols.clamp(1, 1000) as i32;
    let per_row = per_row.clamp(1, 200) as i32;
    let per_col = per_col.clamp(1, 200) as i32;
    let canvas = schotter_canvas(cols, per_row, per_col, Rand::from_clock());
    let mut text = canvas.render_braille();
    text.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
    text.push_str(crate::REDIS_COMPAT_VERSION);
    text.push('\n');
    Ok(text)
}

/// LOLWUT VERSION 6 [columns [rows]]: one character per pixel.
fn skyline(rest: &[&[u8]]) -> Result<String, &'static [u8]> {
    let [cols, rows] = int_args([80, 20], rest)?;
    let canvas = skyline_canvas(
        cols.clamp(1, 1000) as i32,
        rows.clamp(1, 1000) as i32,
        Rand::from_clock(),
    );
    let mut text = canvas.render_grays();
    text.push_str(
        "\nDedicated to the 8 bit game developers of past and present.\n\
         Original 8 bit image from Plaguemon by hikikomori. Redis ver. ",
    );
    text.push_str(crate::REDIS_COMPAT_VERSION);
    text.push('\n');
    Ok(text)
}

/// Stands in for C's rand(): 0..=RAND_MAX, from an xorshift generator.
struct Rand(u64);

impl Rand {
    const MAX: i32 = i32::MAX;

    fn from_clock() -> Rand {
        Rand(crate::shared::Shared::now_us() as u64 | 1)
    }

    fn next(&mut self) -> i32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 33) as i32 & Rand::MAX
    }
}

/// A canvas of colour indexes, one byte per pixel; drawing outside it is ignored and reading
/// outside it gives 0.
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, background: u8) -> Canvas {
        let (w, h) = (width.max(0), height.max(0));
        Canvas {
            width: w,
            height: h,
            pixels: vec![background; (w as usize) * (h as usize)],
        }
    }

    fn draw(&mut self, x: i32, y: i32, color: u8) {
        if (0..self.width).contains(&x) && (0..self.height).contains(&y) {
            self.pixels[(x + y * self.width) as usize] = color;
        }
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if (0..self.width).contains(&x) && (0..self.height).contains(&y) {
            self.pixels[(x + y * self.width) as usize]
        } else {
            0
        }
    }

    /// Bresenham's line from (x1, y1) to (x2, y2).
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.draw(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square of side `size` centred on (x, y), turned by `angle` radians: its corners lie
    /// on a circle, at 45 degrees plus the angle and then every 90 degrees.
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        let r = (size / std::f32::consts::SQRT_2).round() as f64;
        let mut k = PI / 4.0 + angle as f64;
        let mut px = [0i32; 4];
        let mut py = [0i32; 4];
        for j in 0..4 {
            px[j] = (k.sin() * r + x as f64).round() as i32;
            py[j] = (k.cos() * r + y as f64).round() as i32;
            k += PI / 2.0;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], color);
        }
    }

    /// Braille characters, each 2 pixels wide and 4 high (a pixel is set when not 0), rows of
    /// them separated by newlines (Redis's layout, including its newline rule for the last row).
    fn render_braille(&self) -> String {
        let mut s = String::new();
        let mut y = 0;
        while y < self.height {
            let mut x = 0;
            while x < self.width {
                let mut byte = 0u32;
                for (bit, (dx, dy)) in [
                    (0, 0),
                    (0, 1),
                    (0, 2),
                    (1, 0),
                    (1, 1),
                    (1, 2),
                    (0, 3),
                    (1, 3),
                ]
                .into_iter()
                .enumerate()
                {
                    if self.get(x + dx, y + dy) != 0 {
                        byte |= 1 << bit;
                    }
                }
                s.push(char::from_u32(0x2800 + byte).expect("a Braille code point"));
                x += 2;
            }
            if y != self.height - 1 {
                s.push('\n');
            }
            y += 4;
        }
        s
    }

    /// One space per pixel in the terminal's four grays (0 black to 3 white), each with its
    /// foreground and background escape and a reset after it, rows separated by newlines.
    fn render_grays(&self) -> String {
        let mut s = String::with_capacity(self.pixels.len() * 18);
        for y in 0..self.height {
            for x in 0..self.width {
                s.push_str(match self.get(x, y) {
                    1 => "\x1b[0;90;100m \x1b[0m",
                    2 => "\x1b[0;37;47m \x1b[0m",
                    3 => "\x1b[0;97;107m \x1b[0m",
                    _ => "\x1b[0;30;40m \x1b[0m",
                });
            }
            if y != self.height - 1 {
                s.push('\n');
            }
        }
        s
    }

    /// A building standing on the bottom row: `height` pixels tall, its roof row two pixels
    /// narrower on each side. With windows, the inner part (two pixels in from each side,
    /// below the roof's two rows and above the ground's) has windows two pixels wide and one
    /// high on every other column pair and row, each lit at random in a gray other than the
    /// building's.
    fn building(&mut self, b: &Building, rand: &mut Rand) {
        let bottom = self.height - 1;
        let top = bottom - b.height + 1;
        let (left, right) = (b.xoff, b.xoff + b.width - 1);
        for y in (top..=bottom).rev() {
            for x in left..=right {
                if y == top && (x <= left + 1 || x >= right - 1) {
                    continue;
                }
                let mut color = b.color;
                if b.windows && x > left + 1 && x < right - 1 && y > top + 1 && y < bottom - 1 {
                    let (relx, rely) = (x - (left + 1), y - (top + 1));
                    if (relx / 2) % 2 == 1 && rely % 2 == 1 {
                        loop {
                            color = 1 + (rand.next() % 2) as u8;
                            if color != b.color {
                                break;
                            }
                        }
                        // The window's second pixel takes the first one's colour.
                        if relx % 2 == 1 {
                            color = self.get(x - 1, y);
                        }
                    }
                }
                self.draw(x, y, color);
            }
        }
    }
}

struct Building {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

/// Schotter on a canvas `cols` characters wide (two pixels each), as Redis 5 lays it out.
fn schotter_canvas(cols: i32, per_row: i32, per_col: i32, mut rand: Rand) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32) as i32 + padding * 2;
    let mut canvas = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0) as i32 + padding;
            let mut sy = (y as f32 * side + side / 2.0) as i32 + padding;
            let mut angle = 0.0f32;
            if y > 1 {
                let mut r = [0f32; 3];
                for v in r.iter_mut() {
                    *v = rand.next() as f32 / Rand::MAX as f32 / per_col as f32 * y as f32;
                }
                for v in r.iter_mut() {
                    if rand.next() % 2 == 1 {
                        *v = -*v;
                    }
                }
                angle = r[0];
                sx = (sx as f32 + r[1] * side / 3.0) as i32;
                sy = (sy as f32 + r[2] * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }
    canvas
}

/// Redis 6's skyline on a white canvas of `width` x `height` pixels, left to right from 10
/// pixels before the edge: the light gray buildings (overlapping, up to the top but one row),
/// then the darker gray ones (spaced, lower), then the black ones with windows in front.
fn skyline_canvas(width: i32, height: i32, mut rand: Rand) -> Canvas {
    let mut canvas = Canvas::new(width, height, 3);
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < width {
            offset += rand.next() % 8;
            let b = Building {
                xoff: offset,
                width: 10 + rand.next() % 9,
                height: height / 2 + (rand.next() % height) / if color == 2 { 2 } else { 3 },
                windows: false,
                color,
            };
            canvas.building(&b, &mut rand);
            offset += if color == 2 { b.width / 2 } else { b.width + 1 };
        }
    }
    let mut offset = -10;
    while offset < width {
        offset += rand.next() % 8;
        let mut w = 5 + rand.next() % 14;
        if w % 4 != 0 {
            w += w % 3;
        }
        let b = Building {
            xoff: offset,
            width: w,
            height: height / 3 + (rand.next() % height) / 2,
            windows: true,
            color: 0,
        };
        canvas.building(&b, &mut rand);
        offset += b.width + 5;
    }
    canvas
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unturned_square_is_drawn_closed() {
        let mut c = Canvas::new(20, 20, 0);
        c.square(10, 10, 8.0, 0.0, 1);
        // Corners at 45 degrees: an axis-aligned square of half-side round(8/sqrt2 * sin45).
        let set: usize = c.pixels.iter().map(|&p| p as usize).sum();
        assert!(set > 0);
        assert!(c.get(14, 14) == 1 && c.get(6, 6) == 1 && c.get(14, 6) == 1 && c.get(6, 14) == 1);
        assert_eq!(c.get(10, 10), 0);
    }

    #[test]
    fn render_layout() {
        let mut c = Canvas::new(4, 4, 0);
        c.draw(0, 0, 1);
        c.draw(3, 3, 1);
        // One row of two characters; height-1 = 3 is not a row start, so a newline follows.
        assert_eq!(c.render_braille(), "\u{2801}\u{2880}\n");
        let c = Canvas::new(2, 1, 0);
        assert_eq!(c.render_braille(), "\u{2800}");
    }

    #[test]
    fn schotter_dimensions() {
        let c = schotter_canvas(66, 8, 12, Rand(7));
        assert_eq!(
            (c.width, c.height),
            (132, (128.0f32 / 8.0 * 12.0) as i32 + 4)
        );
        let lines = c.render_braille();
        assert_eq!(lines.split('\n').filter(|l| !l.is_empty()).count(), 196 / 4);
    }

    #[test]
    fn building_with_windows_has_a_narrower_roof_and_paired_window_pixels() {
        let mut c = Canvas::new(12, 10, 3);
        let b = Building {
            xoff: 1,
            width: 10,
            height: 8,
            windows: true,
            color: 0,
        };
        c.building(&b, &mut Rand(7));
        // Roof (row 2): two sky pixels each side of it; the rows above stay sky.
        assert_eq!(
            &c.pixels[2 * 12..3 * 12],
            &[3, 3, 3, 0, 0, 0, 0, 0, 0, 3, 3, 3]
        );
        assert!(c.pixels[..2 * 12].iter().all(|&p| p == 3));
        // Windows (inside x 3..=8, y 4..=7): rows 4 and 6, the pixel pair at x 4-5 and the
        // lone left half of the next pair at x 8, each lit in a gray, a pair in one gray.
        for y in [4, 6] {
            let (l, r) = (c.get(4, y), c.get(5, y));
            assert!(l == 1 || l == 2);
            assert_eq!(l, r);
            assert!(matches!(c.get(8, y), 1 | 2));
            assert_eq!(c.get(6, y), 0);
        }
        for y in [3, 5, 7, 8, 9] {
            assert!((1..=10).all(|x| c.get(x, y) == 0));
        }
    }

    #[test]
    fn skyline_keeps_the_top_row_as_sky_and_the_palette_to_four_grays() {
        for (w, h, seed) in [(80, 20, 1), (1, 1, 2), (7, 3, 3), (200, 61, 4)] {
            let c = skyline_canvas(w, h, Rand(seed));
            assert_eq!(c.pixels.len(), (w * h) as usize);
            assert!(c.pixels[..w as usize].iter().all(|&p| p == 3));
            assert!(c.pixels.iter().all(|&p| p <= 3));
        }
    }
}
