//! Key-pattern generators (sans-I/O): which key index each request uses.
//!
//! Every generator yields indexes in `0..key_maximum` and is deterministic for a given seed,
//! so two runs with the same seed send the same keys.

/// A small, fast, seedable PRNG (xoshiro256**, seeded through SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (`n > 0`), without modulo bias worth speaking of (Lemire's multiply).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// The distribution of key indexes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyPattern {
    Uniform,
    /// 0, 1, 2, ... wrapping at the maximum.
    Sequential,
    /// Normal around the middle of the range, standard deviation a sixth of the range
    /// (memtier's default); draws outside the range are drawn again.
    Gaussian,
    /// Zipf with exponent `s` (> 0): index 0 is the most popular, then 1, ...
    Zipf(f64),
}

impl KeyPattern {
    /// `uniform`, `sequential`, `gaussian`, `zipf` (exponent 0.99) or `zipf:S`.
    pub fn parse(s: &str) -> Result<KeyPattern, String> {
        match s {
            "uniform" | "R" => Ok(KeyPattern::Uniform),
            "sequential" | "P" => Ok(KeyPattern::Sequential),
            "gaussian" | "G" => Ok(KeyPattern::Gaussian),
            "zipf" | "Z" => Ok(KeyPattern::Zipf(0.99)),
            _ => match s.strip_prefix("zipf:") {
                Some(e) => match e.parse::<f64>() {
                    Ok(x) if x > 0.0 && x.is_finite() => Ok(KeyPattern::Zipf(x)),
                    _ => Err(format!("zipf exponent must be a number > 0, got {e:?}")),
                },
                None => Err(format!(
                    "unknown key pattern {s:?} (uniform, sequential, gaussian, zipf[:S])"
                )),
            },
        }
    }
}

/// Draws key indexes in `0..max` following a [`KeyPattern`].
#[derive(Clone, Debug)]
pub struct KeyGen {
    max: u64,
    rng: Rng,
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Uniform,
    Sequential { next: u64 },
    Gaussian { spare: Option<f64> },
    Zipf(Zipf),
}

impl KeyGen {
    /// `max` must be at least 1. `start` is where a sequential pattern begins (taken modulo
    /// `max`), so that connections can start at different places.
    pub fn new(pattern: KeyPattern, max: u64, seed: u64, start: u64) -> KeyGen {
        assert!(max >= 1, "key maximum must be at least 1");
        let kind = match pattern {
            KeyPattern::Uniform => Kind::Uniform,
            KeyPattern::Sequential => Kind::Sequential { next: start % max },
            KeyPattern::Gaussian => Kind::Gaussian { spare: None },
            KeyPattern::Zipf(s) => Kind::Zipf(Zipf::new(max, s)),
        };
        KeyGen {
            max,
            rng: Rng::new(seed),
            kind,
        }
    }

    pub fn next_key(&mut self) -> u64 {
        match &mut self.kind {
            Kind::Uniform => self.rng.below(self.max),
            Kind::Sequential { next } => {
                let k = *next;
                *next = if k + 1 >= self.max { 0 } else { k + 1 };
                k
            }
            Kind::Gaussian { spare } => {
                let mean = (self.max as f64 - 1.0) / 2.0;
                let sd = (self.max as f64 / 6.0).max(f64::MIN_POSITIVE);
                loop {
                    let z = match spare.take() {
                        Some(z) => z,
                        None => {
                            // Box-Muller: two independent standard normals per two uniforms.
                            let u1 = 1.0 - self.rng.next_f64(); // (0, 1]
                            let u2 = self.rng.next_f64();
                            let r = (-2.0 * u1.ln()).sqrt();
                            let th = std::f64::consts::TAU * u2;
                            *spare = Some(r * th.sin());
                            r * th.cos()
                        }
                    };
                    let x = (mean + z * sd).round();
                    if x >= 0.0 && x < self.max as f64 {
                        return x as u64;
                    }
                }
            }
            Kind::Zipf(z) => z.sample(&mut self.rng) - 1,
        }
    }
}

/// Zipf over ranks `1..=n` with exponent `s`, by rejection-inversion (Hörmann and Derflinger,
/// 1996): constant time and memory per draw, whatever `n`.
#[derive(Clone, Debug)]
struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    cut: f64,
}

impl Zipf {
    fn new(n: u64, s: f64) -> Zipf {
        let mut z = Zipf {
            n: n as f64,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            cut: 0.0,
        };
        z.h_x1 = z.big_h(1.5) - 1.0;
        z.h_n = z.big_h(z.n + 0.5);
        z.cut = 2.0 - z.big_h_inv(z.big_h(2.5) - z.h(2.0));
        z
    }

    /// The density, x^-s.
    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    /// Its integral, (x^(1-s) - 1) / (1-s), or ln x when s = 1.
    fn big_h(&self, x: f64) -> f64 {
        let lx = x.ln();
        expm1_over_x((1.0 - self.s) * lx) * lx
    }

    fn big_h_inv(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (ln1p_over_x(t) * x).exp()
    }

    fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + rng.next_f64() * (self.h_x1 - self.h_n);
            let x = self.big_h_inv(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.cut || u >= self.big_h(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

/// (e^x - 1) / x, continuous at 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + x * 0.25))
    }
}

/// ln(1 + x) / x, continuous at 0.
fn ln1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn draws(p: KeyPattern, max: u64, seed: u64, n: usize) -> Vec<u64> {
        let mut g = KeyGen::new(p, max, seed, 0);
        (0..n).map(|_| g.next_key()).collect()
    }

    fn pattern() -> impl Strategy<Value = KeyPattern> {
        prop_oneof![
            Just(KeyPattern::Uniform),
            Just(KeyPattern::Sequential),
            Just(KeyPattern::Gaussian),
            (0.01f64..4.0).prop_map(KeyPattern::Zipf),
            Just(KeyPattern::Zipf(1.0)),
        ]
    }

    proptest! {
        #[test]
        fn every_pattern_stays_in_range(p in pattern(), max in 1u64..2_000_000, seed: u64) {
            for k in draws(p, max, seed, 500) {
                prop_assert!(k < max, "{p:?} max {max} gave {k}");
            }
        }

        #[test]
        fn every_pattern_is_deterministic_for_a_seed(p in pattern(), max in 1u64..1000, seed: u64) {
            prop_assert_eq!(draws(p, max, seed, 200), draws(p, max, seed, 200));
        }
    }

    #[test]
    fn sequential_walks_the_range_and_wraps() {
        let mut g = KeyGen::new(KeyPattern::Sequential, 3, 1, 2);
        let got: Vec<u64> = (0..5).map(|_| g.next_key()).collect();
        assert_eq!(got, [2, 0, 1, 2, 0]);
    }

    #[test]
    fn uniform_covers_the_range_evenly() {
        let mut counts = [0u32; 10];
        for k in draws(KeyPattern::Uniform, 10, 7, 100_000) {
            counts[k as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn gaussian_centres_on_the_middle_with_a_sixth_of_the_range_as_deviation() {
        let xs = draws(KeyPattern::Gaussian, 600_000, 3, 100_000);
        let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!((mean - 300_000.0).abs() < 2_000.0, "mean {mean}");
        // A sixth of the range is 100,000; cutting at 3 deviations shrinks it by about 1.5%.
        assert!(
            (95_000.0..101_000.0).contains(&var.sqrt()),
            "sd {}",
            var.sqrt()
        );
    }

    #[test]
    fn zipf_frequencies_fall_as_rank_to_the_minus_s() {
        // With s = 1 and n = 1000, P(rank 1) = 1 / H(1000) = 0.1336, and rank 1 is twice as
        // frequent as rank 2.
        let n = 200_000;
        let mut counts = [0u32; 3];
        for k in draws(KeyPattern::Zipf(1.0), 1000, 11, n) {
            if k < 3 {
                counts[k as usize] += 1;
            }
        }
        let p1 = counts[0] as f64 / n as f64;
        assert!((p1 - 0.1336).abs() < 0.005, "p1 {p1}");
        let ratio = counts[0] as f64 / counts[1] as f64;
        assert!((ratio - 2.0).abs() < 0.1, "ratio {ratio}");
        // A steeper exponent concentrates more on the first rank.
        let steep = draws(KeyPattern::Zipf(2.0), 1000, 11, n)
            .iter()
            .filter(|&&k| k == 0)
            .count();
        assert!(
            steep as f64 / n as f64 > 0.55,
            "s=2 p1 {}",
            steep as f64 / n as f64
        );
    }

    #[test]
    fn key_pattern_parses_names_and_zipf_exponents() {
        assert_eq!(KeyPattern::parse("uniform"), Ok(KeyPattern::Uniform));
        assert_eq!(KeyPattern::parse("zipf"), Ok(KeyPattern::Zipf(0.99)));
        assert_eq!(KeyPattern::parse("zipf:1.2"), Ok(KeyPattern::Zipf(1.2)));
        assert!(KeyPattern::parse("zipf:0").is_err());
        assert!(KeyPattern::parse("zipf:x").is_err());
        assert!(KeyPattern::parse("hot").is_err());
    }
}
