//! Redis's CRC-64 (the Jones polynomial `0xad93d23594c935a9`, bit-reflected, initial value 0,
//! no final xor): the trailer of RDB files (`rdbchecksum`) and of DUMP / FUNCTION DUMP payloads.
//!
//! Slicing by 8 (eight tables built at compile time, 16 KiB): eight bytes a step, whose table
//! lookups do not wait on each other. Byte at a time (one lookup that waits on the previous
//! one per byte) ran at about 0.5 GB/s: a 220 MB BGSAVE spent ~0.4 s of its writer thread's
//! CPU on the checksum, on a machine where that thread takes the CPU from the shards
//! (docs/benchmarks.md, "Snapshots").

const fn table() -> [u64; 256] {
    // 0xad93d23594c935a9 with its bits reversed.
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

/// `TABLES[k][b]`: the CRC of byte `b` followed by `k` zero bytes (`TABLES[0]` is the
/// byte-at-a-time table).
const fn tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    t[0] = table();
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u64; 256]; 8] = tables();

/// Continues the checksum `crc` over `data` (`crc64(0, ..)` starts one), so a file can be
/// checksummed in pieces as it is written or read.
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if data.len() >= clmul::MIN_LEN && clmul::available() {
        // SAFETY: the CPU has the instructions `clmul::crc64` is compiled for (checked just
        // above).
        return unsafe { clmul::crc64(crc, data) };
    }
    crc64_table(crc, data)
}

/// [`crc64`] with the tables alone (any CPU; and the tail of what the folding leaves).
fn crc64_table(crc: u64, data: &[u8]) -> u64 {
    let t = &TABLES;
    let mut c = crc;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let x = c ^ u64::from_le_bytes(w.try_into().expect("8 bytes"));
        c = t[7][(x & 0xff) as usize]
            ^ t[6][((x >> 8) & 0xff) as usize]
            ^ t[5][((x >> 16) & 0xff) as usize]
            ^ t[4][((x >> 24) & 0xff) as usize]
            ^ t[3][((x >> 32) & 0xff) as usize]
            ^ t[2][((x >> 40) & 0xff) as usize]
            ^ t[1][((x >> 48) & 0xff) as usize]
            ^ t[0][(x >> 56) as usize];
    }
    for &b in words.remainder() {
        c = t[0][((c ^ b as u64) & 0xff) as usize] ^ (c >> 8);
    }
    c
}

/// The checksum by carry-less multiplication (PCLMULQDQ), 16 bytes a step and eight
/// blocks in flight: about ten times the tables' speed, which ran at about 1 GB/s. A full
/// sync checksums every byte twice (the primary as it writes, the replica as it reads), and
/// with the tables that was a tenth of each side's CPU.
///
/// The method is the folding of Intel's "Fast CRC Computation for Generic Polynomials Using
/// PCLMULQDQ" in its bit-reflected form. A 16-byte block read little-endian is the
/// polynomial `H·x^64 + L` (H in the low half: the reflected order puts the first bits in
/// the low bits); moving it `d` bits further on multiplies it by `x^d`, which modulo P is
/// `H·(x^(d+64) mod P) + L·(x^d mod P)`, two 64×64 products that fit 128 bits. A reflected
/// product comes out one bit short, so the constants are `x^(d+63)` and `x^(d-1)` mod P
/// (bit-reflected). The last 128 bits are reduced to the 64-bit remainder by Barrett's
/// method. The constants below were computed from the polynomial by GF(2) arithmetic; the
/// tests check the result against the tables at every length and alignment.
#[cfg(target_arch = "x86_64")]
mod clmul {
    use std::arch::x86_64::*;

    /// Below this the tables are as fast (and there is nothing to fold).
    pub const MIN_LEN: usize = 64;

    /// `K[d]` = bit-reflected `x^d mod P`, for the fold distances used.
    const K127: u64 = 0x381d_0015_c96f_4444;
    const K191: u64 = 0xd9d7_be7d_505d_a32c;
    const K255: u64 = 0xef3d_1d18_ed88_9ed2;
    const K319: u64 = 0x6ba4_d760_ab38_201e;
    const K383: u64 = 0x7b32_11a7_6016_0db8;
    const K447: u64 = 0xa062_b231_9d66_692f;
    const K511: u64 = 0xf497_84a6_34f0_14e4;
    const K575: u64 = 0xaf86_efb1_6d9a_b4fb;
    const K639: u64 = 0xe4dd_0d81_cbfc_e585;
    const K703: u64 = 0xb715_e37b_96ed_8633;
    const K767: u64 = 0x3885_fd59_e440_d95a;
    const K831: u64 = 0xbccb_a393_6411_fb7e;
    const K895: u64 = 0x5bc9_4ba8_e208_7636;
    const K959: u64 = 0x6cf0_9c8f_3771_0b75;
    const K1023: u64 = 0x7683_6152_4d29_ed0b;
    const K1087: u64 = 0xcc26_fa7c_57f8_054c;
    /// P bit-reflected with its x^0 term kept (the x^64 term implied), and
    /// `floor(x^128 / P)` bit-reflected: Barrett's pair.
    const POLY: u64 = 0x2b59_2653_5897_936b;
    const MU: u64 = 0x3e6c_fa32_9aef_9f77;

    pub fn available() -> bool {
        is_x86_feature_detected!("pclmulqdq") && is_x86_feature_detected!("sse2")
    }

    /// The pair that moves a block `d` bits on: high half for L, low half for H.
    #[inline(always)]
    unsafe fn pair(k_l: u64, k_h: u64) -> __m128i {
        _mm_set_epi64x(k_l as i64, k_h as i64)
    }

    #[inline(always)]
    unsafe fn fold(x: __m128i, k: __m128i) -> __m128i {
        _mm_xor_si128(
            _mm_clmulepi64_si128(x, k, 0x00),
            _mm_clmulepi64_si128(x, k, 0x11),
        )
    }

    /// # Safety
    /// The CPU must have PCLMULQDQ and SSE2 ([`available`]); `data` at least 16 bytes.
    #[target_feature(enable = "pclmulqdq,sse2")]
    pub unsafe fn crc64(crc: u64, data: &[u8]) -> u64 {
        let blocks = data.len() / 16;
        let at = data.as_ptr();
        // SAFETY (every load): block `i` < `blocks` lies within `data`; loadu takes any
        // alignment.
        let load = |i: usize| _mm_loadu_si128(at.add(i * 16) as *const __m128i);
        // The running checksum joins the first 64 bits of data (what the tables' register
        // does byte by byte).
        let mut x = _mm_xor_si128(load(0), _mm_set_epi64x(0, crc as i64));
        let mut i = 1;
        if blocks >= 8 {
            let mut xs = [
                x,
                load(1),
                load(2),
                load(3),
                load(4),
                load(5),
                load(6),
                load(7),
            ];
            i = 8;
            let k = pair(K1023, K1087);
            while i + 8 <= blocks {
                for (j, xj) in xs.iter_mut().enumerate() {
                    *xj = _mm_xor_si128(fold(*xj, k), load(i + j));
                }
                i += 8;
            }
            let ks = [
                pair(K895, K959),
                pair(K767, K831),
                pair(K639, K703),
                pair(K511, K575),
                pair(K383, K447),
                pair(K255, K319),
                pair(K127, K191),
            ];
            x = xs[7];
            for (xj, k) in xs.iter().zip(ks) {
                x = _mm_xor_si128(x, fold(*xj, k));
            }
        }
        let k = pair(K127, K191);
        while i < blocks {
            x = _mm_xor_si128(fold(x, k), load(i));
            i += 1;
        }
        // 128 bits to a 128-bit value congruent to x·x^64 (H moved on 64 bits, L as it is),
        // then Barrett's reduction to the 64-bit remainder.
        let t = _mm_xor_si128(
            _mm_clmulepi64_si128(x, _mm_set_epi64x(0, K127 as i64), 0x00),
            _mm_srli_si128(x, 8),
        );
        let polymu = _mm_set_epi64x(POLY as i64, MU as i64);
        let t1 = _mm_clmulepi64_si128(t, polymu, 0x00);
        let r = _mm_xor_si128(
            _mm_xor_si128(
                _mm_slli_si128(t1, 8),
                _mm_clmulepi64_si128(t1, polymu, 0x10),
            ),
            t,
        );
        let c = _mm_cvtsi128_si64(_mm_srli_si128(r, 8)) as u64;
        super::crc64_table(c, &data[blocks * 16..])
    }
}

#[cfg(test)]
mod tests {
    use super::crc64;

    #[test]
    fn check_value_of_the_jones_crc() {
        // The standard check input; Redis's crc64.c test prints the same value.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    /// Slicing by 8 gives the byte-at-a-time result, at every length and alignment.
    #[test]
    fn eight_bytes_a_step_equal_a_byte_at_a_time() {
        let slow = |data: &[u8]| {
            data.iter().fold(0u64, |c, &b| {
                super::TABLES[0][((c ^ b as u64) & 0xff) as usize] ^ (c >> 8)
            })
        };
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 31 + i / 7) as u8).collect();
        for start in 0..9 {
            for len in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4000] {
                let d = &data[start..start + len];
                assert_eq!(crc64(0, d), slow(d), "start {start} len {len}");
            }
        }
    }

    /// The folding (where the CPU has it) equals the tables at every length around its
    /// thresholds and block counts, every alignment, and from any running checksum.
    #[test]
    fn folding_equals_the_tables() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let data: Vec<u8> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for start in 0..17 {
            for len in (0..700).chain([1023, 1024, 1025, 2047, 2048, 4096, 4977]) {
                let d = &data[start..start + len];
                for init in [0, 1, 0xdead_beef_0bad_f00d, u64::MAX] {
                    assert_eq!(
                        super::crc64(init, d),
                        super::crc64_table(init, d),
                        "start {start} len {len} init {init:x}"
                    );
                }
            }
        }
        assert_eq!(
            super::crc64(0, &[0u8; 4096]),
            super::crc64_table(0, &[0u8; 4096])
        );
    }

    #[test]
    fn checksum_in_pieces_equals_checksum_at_once() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = crc64(0, &data);
        for cut in [0, 1, 17, 500, 999, 1000] {
            assert_eq!(crc64(crc64(0, &data[..cut]), &data[cut..]), whole);
        }
    }
}
