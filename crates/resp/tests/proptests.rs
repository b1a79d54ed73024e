//! Property tests: frame round trips, request streams fed in every split,
//! garbage never panics, number rules against reference models.

use darner_resp::fuzz_support::{check_decode, check_parser, run_parser, End, Outcome};
use darner_resp::{
    decode, encode, format_double, parse_f64_strict, parse_i64_strict, Bytes, Frame, Limits,
    ReplyWriter,
};
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn line_bytes(max: usize) -> impl Strategy<Value = Bytes> {
    prop::collection::vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..max,
    )
    .prop_map(Bytes::from)
}

fn leaf() -> impl Strategy<Value = Frame> {
    prop_oneof![
        line_bytes(20).prop_map(Frame::Simple),
        bytes(20).prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        bytes(40).prop_map(Frame::Bulk),
        Just(Frame::NullBulk),
        Just(Frame::NullArray),
        Just(Frame::Null),
        any::<f64>()
            .prop_filter("no NaN", |d| !d.is_nan())
            .prop_map(Frame::Double),
        any::<bool>().prop_map(Frame::Boolean),
        ("-?[1-9][0-9]{0,40}").prop_map(|s| Frame::BigNumber(Bytes::from(s))),
        (prop::array::uniform3(any::<u8>()), bytes(30))
            .prop_map(|(format, text)| Frame::Verbatim { format, text }),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Frame::Array),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Frame::Set),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Frame::Push),
            prop::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(Frame::Map),
            prop::collection::vec((inner.clone(), inner), 0..4).prop_map(Frame::Attribute),
        ]
    })
}

/// One element of a request stream, with the requests it must produce.
#[derive(Debug, Clone)]
enum Item {
    Multibulk(Vec<Vec<u8>>),
    /// Inline tokens: (bytes of the argument, whether to write it quoted).
    Inline(Vec<(Vec<u8>, bool)>, bool),
    Blank(Vec<u8>),
    Empty(&'static [u8]),
}

fn item() -> impl Strategy<Value = Item> {
    let plain = "[a-zA-Z0-9_:.+-]{1,12}".prop_map(|s| (s.into_bytes(), false));
    let quoted = prop::collection::vec(any::<u8>(), 0..12).prop_map(|v| (v, true));
    prop_oneof![
        4 => prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6)
            .prop_map(Item::Multibulk),
        3 => (
            prop::collection::vec(prop_oneof![3 => plain, 1 => quoted], 1..5),
            any::<bool>()
        )
            .prop_map(|(t, crlf)| Item::Inline(t, crlf)),
        1 => "[ \t]{0,3}\r?\n".prop_map(|s| Item::Blank(s.into_bytes())),
        1 => prop_oneof![Just(&b"*0\r\n"[..]), Just(&b"*-1\r\n"[..])].prop_map(Item::Empty),
    ]
}

fn quote(arg: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in arg {
        match c {
            b'"' | b'\\' => {
                out.push(b'\\');
                out.push(c);
            }
            b'\n' => out.extend_from_slice(b"\\n"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// Wire bytes and the expected requests of a stream.
/// Requests as (inline, arguments).
type Requests = Vec<(bool, Vec<Vec<u8>>)>;

fn render(items: &[Item]) -> (Vec<u8>, Requests) {
    let mut wire = Vec::new();
    let mut want = Vec::new();
    for it in items {
        match it {
            Item::Multibulk(args) => {
                let f = Frame::Array(
                    args.iter()
                        .map(|a| Frame::Bulk(Bytes::copy_from_slice(a)))
                        .collect(),
                );
                encode(&f, &mut wire);
                want.push((false, args.clone()));
            }
            Item::Inline(toks, crlf) => {
                for (i, (t, q)) in toks.iter().enumerate() {
                    if i > 0 {
                        wire.push(b' ');
                    }
                    if *q {
                        quote(t, &mut wire);
                    } else {
                        wire.extend_from_slice(t);
                    }
                }
                wire.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
                want.push((true, toks.iter().map(|(t, _)| t.clone()).collect()));
            }
            Item::Blank(b) => wire.extend_from_slice(b),
            Item::Empty(b) => wire.extend_from_slice(b),
        }
    }
    (wire, want)
}

fn garbage() -> impl Strategy<Value = Vec<u8>> {
    let biased = prop_oneof![
        Just(b'*'),
        Just(b'$'),
        Just(b'\r'),
        Just(b'\n'),
        Just(b'"'),
        Just(b'\''),
        Just(b'\\'),
        Just(b' '),
        Just(b'-'),
        Just(0u8),
        b'0'..=b'9',
        any::<u8>(),
    ];
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        prop::collection::vec(biased, 0..200),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn frame_encode_decode_round_trip(f in frame()) {
        let mut wire = Vec::new();
        encode(&f, &mut wire);
        prop_assert_eq!(decode(&wire, &Limits::default()), Ok(Some((f.clone(), wire.len()))));
        // Trailing bytes are left alone.
        wire.extend_from_slice(b"+next\r\n");
        prop_assert_eq!(decode(&wire, &Limits::default()), Ok(Some((f, wire.len() - 7))));
    }

    #[test]
    fn frame_prefixes_are_incomplete(f in frame()) {
        let mut wire = Vec::new();
        encode(&f, &mut wire);
        for i in 0..wire.len() {
            prop_assert_eq!(decode(&wire[..i], &Limits::default()), Ok(None));
        }
    }

    #[test]
    fn request_stream_at_every_split(items in prop::collection::vec(item(), 1..8)) {
        let (wire, want) = render(&items);
        let l = Limits::default();
        let whole = run_parser([&wire[..]], &l, false);
        let expected_end = End::Pending(whole_pending(&items));
        prop_assert_eq!(&whole, &Outcome { requests: want, end: expected_end });
        for cut in 0..=wire.len() {
            let two = run_parser([&wire[..cut], &wire[cut..]], &l, false);
            prop_assert_eq!(&two, &whole, "cut at {}", cut);
        }
        let bytewise = run_parser(wire.chunks(1), &l, false);
        prop_assert_eq!(&bytewise, &whole);
        let dropping = run_parser(wire.chunks(3), &l, true);
        prop_assert_eq!(&dropping.requests, &whole.requests);
    }

    #[test]
    fn garbage_never_panics_and_is_stable(data in garbage(), seed in any::<u64>()) {
        check_decode(&data);
        check_parser(&data, seed);
    }

    #[test]
    fn garbage_after_valid_prefix(items in prop::collection::vec(item(), 0..4), tail in garbage(), seed in any::<u64>()) {
        let (mut wire, _) = render(&items);
        wire.extend_from_slice(&tail);
        check_parser(&wire, seed);
        check_decode(&wire);
    }

    #[test]
    fn i64_strict_is_canonical_decimal(s in "-?[0-9]{0,21}|[-+ 0-9a]{0,5}") {
        let model = s.parse::<i64>().ok().filter(|v| v.to_string() == s);
        prop_assert_eq!(parse_i64_strict(s.as_bytes()), model);
    }

    #[test]
    fn i64_strict_accepts_every_value(v in any::<i64>()) {
        prop_assert_eq!(parse_i64_strict(v.to_string().as_bytes()), Some(v));
    }

    #[test]
    fn double_text_round_trips(bits in any::<u64>()) {
        let v = f64::from_bits(bits);
        let mut out = Vec::new();
        format_double(v, &mut out);
        if v.is_nan() {
            prop_assert_eq!(&out[..], b"nan");
        } else {
            let back = parse_f64_strict(&out).unwrap();
            prop_assert_eq!(back.to_bits(), v.to_bits());
        }
    }

    #[test]
    fn f64_strict_agrees_with_std_on_decimal_text(
        s in "[+-]?([0-9]{1,5}(\\.[0-9]{0,5})?|\\.[0-9]{1,5})([eE][+-]?[0-9]{1,3})?"
    ) {
        let std: f64 = s.parse().unwrap();
        let ours = parse_f64_strict(s.as_bytes());
        if std.is_infinite() || (std == 0.0 && s.bytes().take_while(|c| *c != b'e' && *c != b'E').any(|c| (b'1'..=b'9').contains(&c))) {
            prop_assert_eq!(ours, None);
        } else {
            prop_assert_eq!(ours.map(f64::to_bits), Some(std.to_bits()));
        }
    }

    #[test]
    fn reply_writer_output_decodes(ops in prop::collection::vec((0u8..9, any::<i64>(), bytes(20), any::<f64>()), 1..20), resp3 in any::<bool>()) {
        let mut out = Vec::new();
        let mut want = Vec::new();
        {
            let mut w = ReplyWriter::new(&mut out, resp3);
            for (op, i, b, d) in &ops {
                match op {
                    0 => { w.int(*i); want.push(Frame::Integer(*i)); }
                    1 => { w.bulk(b); want.push(Frame::Bulk(b.clone())); }
                    2 => { w.null(); want.push(if resp3 { Frame::Null } else { Frame::NullBulk }); }
                    3 => { w.boolean(*i > 0); want.push(if resp3 { Frame::Boolean(*i > 0) } else { Frame::Integer(i64::from(*i > 0)) }); }
                    4 => {
                        w.double(*d);
                        let mut t = Vec::new();
                        format_double(*d, &mut t);
                        want.push(if resp3 { Frame::Double(*d) } else { Frame::Bulk(Bytes::from(t)) });
                    }
                    5 => {
                        w.map(1); w.int(*i); w.bulk(b);
                        let (k, v) = (Frame::Integer(*i), Frame::Bulk(b.clone()));
                        want.push(if resp3 { Frame::Map(vec![(k, v)]) } else { Frame::Array(vec![k, v]) });
                    }
                    6 => {
                        w.verbatim(b"txt", b);
                        want.push(if resp3 { Frame::Verbatim { format: *b"txt", text: b.clone() } } else { Frame::Bulk(b.clone()) });
                    }
                    7 => {
                        let msg: Vec<u8> = b.iter().map(|&c| if c == b'\r' || c == b'\n' || c == b'-' { b'x' } else { c }).collect();
                        w.error(&msg);
                        want.push(Frame::Error(Bytes::from(msg)));
                    }
                    _ => { w.null_array(); want.push(if resp3 { Frame::Null } else { Frame::NullArray }); }
                }
            }
        }
        let mut pos = 0;
        for f in want {
            let (got, used) = decode(&out[pos..], &Limits::default()).unwrap().unwrap();
            match (&got, &f) {
                (Frame::Double(a), Frame::Double(b)) if b.is_nan() => prop_assert!(a.is_nan()),
                _ => prop_assert_eq!(got, f),
            }
            pos += used;
        }
        prop_assert_eq!(pos, out.len());
    }
}

/// Bytes left unconsumed after a rendered stream: trailing skipped items.
fn whole_pending(items: &[Item]) -> usize {
    let mut n = 0;
    for it in items.iter().rev() {
        match it {
            Item::Blank(b) => n += b.len(),
            Item::Empty(b) => n += b.len(),
            _ => break,
        }
    }
    n
}
