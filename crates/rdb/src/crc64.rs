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

    #[test]
    fn checksum_in_pieces_equals_checksum_at_once() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = crc64(0, &data);
        for cut in [0, 1, 17, 500, 999, 1000] {
            assert_eq!(crc64(crc64(0, &data[..cut]), &data[cut..]), whole);
        }
    }
}
