//! LOLWUT [VERSION v] [args]: Redis's piece of computer art per version. Version 5 draws
//! Georg Nees's "Schotter" (1968) in Braille characters, as Redis 5 does: a grid of squares
//! turned and shifted more and more at random down the rows. Any other version answers the
//! version line alone, as Redis 7 does for its own version (Darner has no version 6 drawing:
//! see docs/compatibility.md).

use crate::cmd::{eq, parse_int, ConnCtx, Reg, ERR_NOT_INT};
use darner_resp::ReplyWriter;
use std::f64::consts::PI;

pub fn register(r: &mut Reg) {
    r.conn("lolwut", lolwut);
}

fn lolwut(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut rest = &args[1..];
    // Redis turns the number into "<v>.0.0" (as an unsigned int) and picks the drawing by
    // that string: version 5 (and 4.9) is Schotter.
    let mut version = crate::REDIS_COMPAT_VERSION.to_string();
    if args.len() >= 3 && eq(args[1], "version") {
        let Some(v) = parse_int(args[2]) else {
            return w.error(ERR_NOT_INT);
        };
        version = format!("{}.0.0", v as u32);
        rest = &args[3..];
    }
    let v = version.as_bytes();
    let schotter = v[1] == b'.' && matches!((v[0], v[2] == b'9'), (b'5', false) | (b'4', true));
    if !schotter {
        let text = format!("Redis ver. {}\n", crate::REDIS_COMPAT_VERSION);
        return w.verbatim(b"txt", text.as_bytes());
    }
    let mut params = [66i64, 8, 12];
    for (p, a) in params.iter_mut().zip(rest) {
        match parse_int(a) {
            Some(n) => *p = n,
            None => return w.error(ERR_NOT_INT),
        }
    }
    let cols = params[0].clamp(1, 1000) as i32;
    let per_row = params[1].clamp(1, 200) as i32;
    let per_col = params[2].clamp(1, 200) as i32;
    let seed = crate::shared::Shared::now_us() as u64 | 1;
    let canvas = schotter_canvas(cols, per_row, per_col, seed);
    let mut text = canvas.render();
    text.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
    text.push_str(crate::REDIS_COMPAT_VERSION);
    text.push('\n');
    w.verbatim(b"txt", text.as_bytes());
}

/// A black-and-white canvas, one byte per pixel; drawing outside it is ignored.
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32) -> Canvas {
        let (w, h) = (width.max(0), height.max(0));
        Canvas {
            width: w,
            height: h,
            pixels: vec![0; (w as usize) * (h as usize)],
        }
    }

    fn set(&mut self, x: i32, y: i32) {
        if (0..self.width).contains(&x) && (0..self.height).contains(&y) {
            self.pixels[(x + y * self.width) as usize] = 1;
        }
    }

    fn get(&self, x: i32, y: i32) -> bool {
        (0..self.width).contains(&x)
            && (0..self.height).contains(&y)
            && self.pixels[(x + y * self.width) as usize] != 0
    }

    /// Bresenham's line from (x1, y1) to (x2, y2).
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1);
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
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32) {
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
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4]);
        }
    }

    /// Braille characters, each 2 pixels wide and 4 high, rows of them separated by newlines
    /// (Redis's layout, including its newline rule for the last row).
    fn render(&self) -> String {
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
                    if self.get(x + dx, y + dy) {
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
}

/// Schotter on a canvas `cols` characters wide (two pixels each), as Redis 5 lays it out.
fn schotter_canvas(cols: i32, per_row: i32, per_col: i32, mut seed: u64) -> Canvas {
    // C's rand(): 0..=RAND_MAX.
    const RAND_MAX: u32 = i32::MAX as u32;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 33) as u32 & RAND_MAX
    };
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32) as i32 + padding * 2;
    let mut canvas = Canvas::new(width, height);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0) as i32 + padding;
            let mut sy = (y as f32 * side + side / 2.0) as i32 + padding;
            let mut angle = 0.0f32;
            if y > 1 {
                let mut r = [0f32; 3];
                for v in r.iter_mut() {
                    *v = rand() as f32 / RAND_MAX as f32 / per_col as f32 * y as f32;
                }
                for v in r.iter_mut() {
                    if rand() % 2 == 1 {
                        *v = -*v;
                    }
                }
                angle = r[0];
                sx = (sx as f32 + r[1] * side / 3.0) as i32;
                sy = (sy as f32 + r[2] * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle);
        }
    }
    canvas
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unturned_square_is_drawn_closed() {
        let mut c = Canvas::new(20, 20);
        c.square(10, 10, 8.0, 0.0);
        // Corners at 45 degrees: an axis-aligned square of half-side round(8/sqrt2 * sin45).
        let set: usize = c.pixels.iter().map(|&p| p as usize).sum();
        assert!(set > 0);
        assert!(c.get(14, 14) && c.get(6, 6) && c.get(14, 6) && c.get(6, 14));
        assert!(!c.get(10, 10));
    }

    #[test]
    fn render_layout() {
        let mut c = Canvas::new(4, 4);
        c.set(0, 0);
        c.set(3, 3);
        // One row of two characters; height-1 = 3 is not a row start, so a newline follows.
        assert_eq!(c.render(), "\u{2801}\u{2880}\n");
        let c = Canvas::new(2, 1);
        assert_eq!(c.render(), "\u{2800}");
    }

    #[test]
    fn schotter_dimensions() {
        let c = schotter_canvas(66, 8, 12, 7);
        assert_eq!(
            (c.width, c.height),
            (132, (128.0f32 / 8.0 * 12.0) as i32 + 4)
        );
        let lines = c.render();
        assert_eq!(lines.split('\n').filter(|l| !l.is_empty()).count(), 196 / 4);
    }
}
