//! Redis's CRC-64 (the Jones polynomial `0xad93d23594c935a9`, bit-reflected, initial value 0,
//! no final xor): the trailer of RDB files (`rdbchecksum`) and of DUMP / FUNCTION DUMP payloads.
//!
//! Byte-at-a-time over a table built at compile time. Redis's own implementation is faster
//! (slicing by 8/16), which matters for multi-GB files; this is the simple form until a
//! benchmark of SAVE / load says otherwise.

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

static TABLE: [u64; 256] = table();

/// Continues the checksum `crc` over `data` (`crc64(0, ..)` starts one), so a file can be
/// checksummed in pieces as it is written or read.
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    let mut c = crc;
    for &b in data {
        c = TABLE[((c ^ b as u64) & 0xff) as usize] ^ (c >> 8);
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

    #[test]
    fn checksum_in_pieces_equals_checksum_at_once() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = crc64(0, &data);
        for cut in [0, 1, 17, 500, 999, 1000] {
            assert_eq!(crc64(crc64(0, &data[..cut]), &data[cut..]), whole);
        }
    }
}
