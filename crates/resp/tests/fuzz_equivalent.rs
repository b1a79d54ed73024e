//! Stable stand-in for the cargo-fuzz target: runs the same body
//! (`darner_resp::fuzz_support::exercise`) over 100,000 generated inputs.

use darner_resp::fuzz_support::exercise;
use darner_resp::{encode, Bytes, Frame};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const ALPHABET: &[u8] = b"*$+-:_,#(=!%~|>?\r\n\r\n0123456789-\"'\\ x\t\0tfinaTXT";

fn valid_seed(rng: &mut Rng) -> Vec<u8> {
    let mut v = Vec::new();
    match rng.below(4) {
        0 => {
            let n = rng.below(4) + 1;
            let args = (0..n)
                .map(|i| Frame::Bulk(Bytes::from(format!("arg{i}{}", rng.below(1000)))))
                .collect();
            encode(&Frame::Array(args), &mut v);
        }
        1 => v.extend_from_slice(b"set k \"a\\x41 b\" 'c\\'d'\r\nPING\n"),
        2 => {
            let f = Frame::Map(vec![(
                Frame::Simple(Bytes::from_static(b"k")),
                Frame::Array(vec![
                    Frame::Double(rng.next() as f64 / 7.0),
                    Frame::Verbatim {
                        format: *b"txt",
                        text: Bytes::from_static(b"hi"),
                    },
                    Frame::BigNumber(Bytes::from_static(b"-12345678901234567890")),
                    Frame::Boolean(true),
                    Frame::Null,
                ]),
            )]);
            encode(&f, &mut v);
        }
        _ => v.extend_from_slice(b"*0\r\n\r\n*-1\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
    }
    v
}

fn input(rng: &mut Rng) -> Vec<u8> {
    let len = rng.below(80);
    match rng.below(3) {
        0 => (0..len).map(|_| rng.next() as u8).collect(),
        1 => (0..len)
            .map(|_| ALPHABET[rng.below(ALPHABET.len())])
            .collect(),
        _ => {
            let mut v = valid_seed(rng);
            for _ in 0..rng.below(4) {
                if v.is_empty() {
                    break;
                }
                let at = rng.below(v.len());
                match rng.below(3) {
                    0 => v[at] = ALPHABET[rng.below(ALPHABET.len())],
                    1 => {
                        v.remove(at);
                    }
                    _ => v.insert(at, rng.next() as u8),
                }
            }
            v
        }
    }
}

#[test]
fn fuzz_body_over_100k_inputs() {
    let mut rng = Rng(0x5eed_1234_abcd_9876);
    for _ in 0..100_000 {
        let data = input(&mut rng);
        exercise(&data);
    }
}
