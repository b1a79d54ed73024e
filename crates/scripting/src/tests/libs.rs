//! cjson, cmsgpack, struct and bit, against the texts and bytes of Redis.

use proptest::prelude::*;

use super::*;

#[test]
fn cjson_encode() {
    check(&[
        ("cjson.encode(string.char(127,1,8,9,47,34,92,200))", "$25 \"\\u007f\\u0001\\b\\t\\/\\\"\\\\\u{fffd}\""),
        ("cjson.encode({1,2,nil,4})", "$12 [1,2,null,4]"),
        ("cjson.encode({[1]=1,[20]=2})", "-ERR user_script:1: Cannot serialise table: excessively sparse array script: SHA, on @user_script:1."),
        ("cjson.encode({})", "$2 {}"),
        ("cjson.encode({a={b={}}, [3.5]=1})", "$22 {\"a\":{\"b\":{}},\"3.5\":1}"),
        ("cjson.encode(1/3)", "$16 0.33333333333333"),
        ("cjson.encode(1e20)", "$5 1e+20"),
        ("cjson.encode(12345678901234567)", "$19 1.2345678901235e+16"),
        ("cjson.encode(0/0)", "-ERR user_script:1: Cannot serialise number: must not be NaN or Inf script: SHA, on @user_script:1."),
        ("cjson.encode(function() end)", "-ERR user_script:1: Cannot serialise function: type not supported script: SHA, on @user_script:1."),
        ("cjson.encode({[true]=1})", "-ERR user_script:1: Cannot serialise boolean: table key must be a number or string script: SHA, on @user_script:1."),
        ("cjson.encode(cjson.null)", "$4 null"),
        ("cjson.encode('\\0')", "$8 \"\\u0000\""),
        ("cjson.encode()", "-ERR user_script:1: bad argument #1 to 'encode' (expected 1 argument) script: SHA, on @user_script:1."),
        ("cjson.encode({true, false, 'x'})", "$16 [true,false,\"x\"]"),
        ("cjson.encode({[1]='a', [2]='b', x=1})", "$23 {\"1\":\"a\",\"2\":\"b\",\"x\":1}"),
        ("cjson.encode({1, 2, [4]=4})", "$12 [1,2,null,4]"),
        ("cjson.encode({{}, {{}}})", "$9 [{},[{}]]"),
        // Numbers mlua would read as 0 (tiny magnitudes, -0) keep their value.
        ("cjson.encode(1e-20)", "$5 1e-20"),
        ("cjson.encode(-0.0)", "$2 -0"),
        ("cjson.encode({1e-20, {a=-0.0}})", "$16 [1e-20,{\"a\":-0}]"),
        ("struct.unpack('d', struct.pack('d', 1e-300)) == 1e-300", ":1"),
        ("cmsgpack.unpack(cmsgpack.pack({5e-324}))[1] == 5e-324", ":1"),
    ]);
}

#[test]
fn cjson_decode() {
    check(&[
        ("cjson.decode('x')", "-ERR user_script:1: Expected value but found invalid token at character 1 script: SHA, on @user_script:1."),
        ("cjson.decode('[1,')", "-ERR user_script:1: Expected value but found T_END at character 4 script: SHA, on @user_script:1."),
        ("cjson.decode('{1:2}')", "-ERR user_script:1: Expected object key string but found T_NUMBER at character 2 script: SHA, on @user_script:1."),
        ("cjson.decode('[1 2]')", "-ERR user_script:1: Expected comma or array end but found T_NUMBER at character 4 script: SHA, on @user_script:1."),
        ("cjson.decode('{\"a\" 1}')", "-ERR user_script:1: Expected colon but found T_NUMBER at character 6 script: SHA, on @user_script:1."),
        ("cjson.decode('1 2')", "-ERR user_script:1: Expected the end but found T_NUMBER at character 3 script: SHA, on @user_script:1."),
        ("cjson.decode('\"\\\\q\"')", "-ERR user_script:1: Expected value but found invalid escape code at character 2 script: SHA, on @user_script:1."),
        ("cjson.decode('\"ab')", "-ERR user_script:1: Expected value but found unexpected end of string at character 4 script: SHA, on @user_script:1."),
        ("cjson.decode('\"\\\\u12\"')", "-ERR user_script:1: Expected value but found invalid unicode escape code at character 2 script: SHA, on @user_script:1."),
        ("cjson.decode('[1,]')", "-ERR user_script:1: Expected value but found T_ARR_END at character 4 script: SHA, on @user_script:1."),
        ("cjson.decode(' ')", "-ERR user_script:1: Expected value but found T_END at character 2 script: SHA, on @user_script:1."),
        ("cjson.decode('tru')", "-ERR user_script:1: Expected value but found invalid token at character 1 script: SHA, on @user_script:1."),
        ("cjson.decode('[' .. string.rep('[', 1001))", "-ERR user_script:1: Found too many nested data structures (1001) at character 1001 script: SHA, on @user_script:1."),
        ("cjson.decode()", "-ERR user_script:1: bad argument #1 to 'decode' (expected 1 argument) script: SHA, on @user_script:1."),
        ("cjson.decode('01')", ":1"),
        ("cjson.decode(1)", ":1"),
        ("cjson.decode('-1.5e3')", ":-1500"),
        ("cjson.decode('NaN')", ":-9223372036854775808"),
        ("type(cjson.decode('null'))", "$8 userdata"),
        ("cjson.decode('null') == cjson.null", ":1"),
        ("cjson.decode('\"\\\\u00e9\\\\ud83d\\\\ude00\"')", "$6 é😀"),
        ("cjson.decode('[1,2]')[2]", ":2"),
        ("cjson.decode('{\"a\":[true,{\"b\":null}]}').a[1]", ":1"),
        ("cjson.decode('{\"a\":1,\"a\":2}').a", ":2"),
        ("cjson.decode('[]')", "*0"),
        ("cjson.decode('\"\\\\/\"')", "$1 /"),
        ("cjson.decode('1e400')", ":-9223372036854775808"),
        ("cjson.decode('0x10')", ":16"),
        ("cjson.decode('inf')", ":-9223372036854775808"),
        ("cjson.decode('+1')", ":1"),
    ]);
}

#[test]
fn cjson_configuration() {
    check(&[
        ("cjson.encode_max_depth()", ":1000"),
        ("cjson.decode_max_depth()", ":1000"),
        ("cjson.encode_keep_buffer()", ":1"),
        ("cjson.encode_invalid_numbers()", "$-1"),
        ("cjson.decode_invalid_numbers()", ":1"),
        ("cjson.encode_sparse_array()", "$-1"),
        ("{select(2, cjson.encode_sparse_array())}", "*2 :2 :10"),
        ("cjson.encode_number_precision(15)", "-ERR user_script:1: bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14) script: SHA, on @user_script:1."),
        ("{cjson._NAME, cjson._VERSION}", "*2 $5 cjson $5 2.1.0"),
        // Settings of a cjson.new() instance are its own.
        ("(function() local j = cjson.new() j.encode_max_depth(1) return {pcall(j.encode, {{}})} end)()", "*2 $-1 $39 Cannot serialise, excessive nesting (2)"),
        ("cjson.encode({{}})", "$4 [{}]"),
        // Deeper than the hard limit is an error, not a stack overflow.
        ("(function() local j = cjson.new() j.encode_max_depth(1e9) local t = {} local c = t for i = 1, 100000 do c[1] = {} c = c[1] end return {pcall(j.encode, t)} end)()", "*2 $-1 $42 Cannot serialise, excessive nesting (1001)"),
        ("(function() local j = cjson.new() j.decode_max_depth(1e9) return {pcall(j.decode, string.rep('[', 100000))} end)()", "*2 $-1 $62 Found too many nested data structures (1001) at character 1001"),
        ("(function() local j = cjson.new() j.encode_number_precision(3) return j.encode(1/3) end)()", "$5 0.333"),
        ("(function() local j = cjson.new() j.encode_invalid_numbers('null') return j.encode(1/0) end)()", "$4 null"),
        ("(function() local j = cjson.new() j.encode_sparse_array(true) return j.encode({[1]=1,[20]=2}) end)()", "$14 {\"1\":1,\"20\":2}"),
    ]);
}

#[test]
fn cmsgpack_behaviour() {
    check(&[
        ("cmsgpack.pack()", "-ERR user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.) script: SHA, on @user_script:1."),
        ("select('#', cmsgpack.unpack(''))", ":0"),
        ("cmsgpack.unpack(string.char(145))", "-ERR user_script:1: Missing bytes in input. script: SHA, on @user_script:1."),
        ("cmsgpack.unpack(string.char(193))", "-ERR user_script:1: Bad data format in input. script: SHA, on @user_script:1."),
        ("cmsgpack.unpack(string.char(196,1,97))", "-ERR user_script:1: Bad data format in input. script: SHA, on @user_script:1."),
        ("{cmsgpack.unpack(cmsgpack.pack(1,2,'a'))}", "*3 :1 :2 $1 a"),
        ("{cmsgpack.unpack_one(cmsgpack.pack(1,2))}", "*2 :1 :1"),
        ("{cmsgpack.unpack_one(cmsgpack.pack(1,2), 1)}", "*2 :-1 :2"),
        ("cmsgpack.unpack_one('', 0)", ":-1"),
        ("{cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 2)}", "*3 :2 :1 :2"),
        ("{cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 3)}", "*4 :-1 :1 :2 :3"),
        ("{cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 0)}", "*3 :1 :2 :3"),
        ("{cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), -1)}", "-ERR user_script:1: Invalid request to unpack with offset of 0 and limit of 3. script: SHA, on @user_script:1."),
        ("cmsgpack.unpack_one(cmsgpack.pack(1), 5)", "-ERR user_script:1: Start offset 5 greater than input length 1. script: SHA, on @user_script:1."),
        ("cmsgpack.unpack_limit(cmsgpack.pack(1))", "-ERR user_script:1: bad argument #2 to 'unpack_limit' (number expected, got no value) script: SHA, on @user_script:1."),
        ("#cmsgpack.pack({{{{{{{{{{{{{{{{{{{{}}}}}}}}}}}}}}}}}}}})", ":17"),
        ("cmsgpack.pack({{{{{{{{{{{{{{{{{{{{}}}}}}}}}}}}}}}}}}}}):byte(17)", ":192"),
        ("cmsgpack.unpack(string.char(207,255,255,255,255,255,255,255,255))", ":-1"),
        ("{cmsgpack.pack(1.5):byte(1, -1)}", "*5 :202 :63 :192 :0 :0"),
        ("cmsgpack.pack(0.1):byte()", ":203"),
        ("{cmsgpack.pack(string.rep('a', 40)):byte(1, 2)}", "*2 :217 :40"),
        ("{cmsgpack.pack({}):byte(), cmsgpack.pack({a=1}):byte()}", "*2 :144 :129"),
        ("{cmsgpack.pack(2^40):byte(), cmsgpack.pack(-2^40):byte(), cmsgpack.pack(-5):byte(), cmsgpack.pack(-100):byte()}", "*4 :207 :211 :251 :208"),
        ("cmsgpack.pack(cjson.null):byte()", ":192"),
        ("cmsgpack._VERSION", "$18 lua-cmsgpack 0.4.0"),
        ("#cmsgpack.pack(string.rep('x', 70000))", ":70005"),
        ("cmsgpack.pack({1,2,3,nil,5}):byte()", ":132"),
        ("cmsgpack.pack({[2]=1}):byte()", ":129"),
        ("{cmsgpack.pack(2^31):byte(), cmsgpack.pack(-2^31):byte(), cmsgpack.pack(-2^31 - 1):byte(), cmsgpack.pack(65535):byte(), cmsgpack.pack(65536):byte()}", "*5 :206 :210 :211 :205 :206"),
    ]);
}

#[test]
fn struct_behaviour() {
    check(&[
        ("{struct.pack('>i2', 258):byte(1, -1)}", "*2 :1 :2"),
        ("{struct.pack('<i2', 258):byte(1, -1)}", "*2 :2 :1"),
        ("struct.pack('i40', 1)", "-ERR user_script:1: integral size 40 is larger than limit of 32 script: SHA, on @user_script:1."),
        ("struct.pack('q', 1)", "-ERR user_script:1: bad argument #1 to 'pack' (invalid format option 'q') script: SHA, on @user_script:1."),
        ("struct.pack('!3i', 1)", "-ERR user_script:1: alignment 3 is not a power of 2 script: SHA, on @user_script:1."),
        ("{struct.unpack('>I2', 'ab')}", "*2 :24930 :3"),
        ("struct.unpack('>I4', 'ab')", "-ERR user_script:1: bad argument #2 to 'unpack' (data string too short) script: SHA, on @user_script:1."),
        ("struct.size('s')", "-ERR user_script:1: bad argument #1 to 'size' (option 's' has no fixed size) script: SHA, on @user_script:1."),
        ("struct.size('!8bd')", ":16"),
        ("struct.size('bd')", ":9"),
        ("{struct.unpack('s', 'ab')}", "-ERR user_script:1: unfinished string in data script: SHA, on @user_script:1."),
        ("{struct.unpack('bc0', string.char(2) .. 'xyz')}", "*2 $2 xy :4"),
        ("struct.pack('c5', 'ab')", "-ERR user_script:1: bad argument #3 to 'pack' (string too short) script: SHA, on @user_script:1."),
        ("{struct.unpack('b', 'a', 0)}", "-ERR user_script:1: bad argument #3 to 'unpack' (offset must be 1 or greater) script: SHA, on @user_script:1."),
        ("{struct.unpack('>i16', string.rep(string.char(255), 16))}", "*2 :-1 :17"),
        ("{struct.unpack('>i16', string.rep(string.char(1), 16))}", "*2 :72340172838076672 :17"),
        ("struct.pack('i', 'x')", "-ERR user_script:1: bad argument #2 to 'pack' (number expected, got string) script: SHA, on @user_script:1."),
        ("struct.pack('i')", "-ERR user_script:1: bad argument #2 to 'pack' (number expected, got nil) script: SHA, on @user_script:1."),
        ("{struct.unpack('<d', struct.pack('<d', 1.5))}", "*2 :1 :9"),
        ("struct.pack('b', 300):byte()", ":44"),
        ("struct.pack('B', -1):byte()", ":255"),
        ("{struct.unpack('>hsfc2', struct.pack('>hsfc2', -2, 'str', 0.5, 'xy'))}", "*5 :-2 $3 str :0 $2 xy :13"),
        ("struct.pack('c0', 'abc')", "$3 abc"),
        ("{struct.size('i'), struct.size('l'), struct.size('T'), struct.size('!ci')}", "*4 :4 :8 :8 :8"),
        ("{struct.unpack('<L', struct.pack('<L', -1))}", "*2 :-9223372036854775808 :9"),
        ("{struct.unpack('<l', struct.pack('<l', -1))}", "*2 :-1 :9"),
        ("{struct.unpack('>i3', struct.pack('>i3', -2))}", "*2 :-2 :4"),
        ("{struct.unpack('xb', 'ab')}", "*2 :98 :3"),
        ("struct.pack('>I', 2^32 + 5):byte(4)", ":5"),
        ("{struct.unpack('!4 b i', struct.pack('!4 b i', 1, 7))}", "*3 :1 :7 :9"),
    ]);
}

#[test]
fn bit_behaviour() {
    check(&[
        (
            "{bit.tohex(65535), bit.tohex(-1, -4), bit.band(0xff, 0x0f), bit.bnot(0), bit.lshift(1, 33), bit.arshift(-256, 4), bit.rol(1, 31), bit.bswap(0x12345678), bit.tobit(2^32 + 3), bit.bxor(1,3,4)}",
            "*10 $8 0000ffff $4 FFFF :15 :-1 :2 :-16 :-2147483648 :2018915346 :3 :6",
        ),
        ("{bit.rshift(-1, 28), bit.ror(1, 1), bit.bor(1, 2, 4, 8), bit.tohex(255, 2), bit.tohex(1, 0)}", "*5 :15 :-2147483648 :15 $2 ff $0"),
        ("bit.band()", "-ERR user_script:1: bad argument #1 to 'band' (number expected, got no value) script: SHA, on @user_script:1."),
        ("bit.tohex('x')", "-ERR user_script:1: bad argument #1 to 'tohex' (number expected, got string) script: SHA, on @user_script:1."),
        ("bit.tobit('16')", ":16"),
        ("{bit.tobit(0xffffffff), bit.band(1.5, 3), bit.lshift(1, -1)}", "*3 :-1 :2 :-2147483648"),
    ]);
}

/// A Lua value as source text, for the round-trip properties.
#[derive(Debug, Clone)]
enum Val {
    Int(i32),
    Num(f64),
    Str(Vec<u8>),
    Bool(bool),
    Arr(Vec<Val>),
    Obj(Vec<(String, Val)>),
}

fn lua_src(v: &Val, out: &mut String) {
    match v {
        Val::Int(n) => out.push_str(&format!("({n})")),
        Val::Num(n) => out.push_str(&format!("({n:e})")),
        Val::Str(s) => {
            out.push('"');
            for b in s {
                out.push_str(&format!("\\{b}"));
            }
            out.push('"');
        }
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Arr(items) => {
            out.push('{');
            for i in items {
                lua_src(i, out);
                out.push(',');
            }
            out.push('}');
        }
        Val::Obj(kv) => {
            out.push('{');
            for (k, v) in kv {
                out.push_str(&format!("[\"k{k}\"]="));
                lua_src(v, out);
                out.push(',');
            }
            out.push('}');
        }
    }
}

fn val(depth: u32) -> impl Strategy<Value = Val> {
    let leaf = prop_oneof![
        any::<i32>().prop_map(Val::Int),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Val::Num),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Val::Str),
        any::<bool>().prop_map(Val::Bool),
    ];
    leaf.prop_recursive(depth, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..6).prop_map(Val::Arr),
            proptest::collection::vec(("[a-z]{1,4}", inner), 1..6).prop_map(Val::Obj),
        ]
    })
}

const DEEP_EQUAL: &str = "local function eq(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= 'table' then return a == b end
  for k, v in pairs(a) do if not eq(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end
";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn cmsgpack_round_trips(v in val(4)) {
        let mut src = String::new();
        lua_src(&v, &mut src);
        let body = format!("{DEEP_EQUAL} local v = {src} local w = cmsgpack.unpack(cmsgpack.pack(v)) return eq(v, w) and 'same' or cjson.encode(w)");
        prop_assert_eq!(resp2_of(&run(&body), &body), "$4 same");
    }

    #[test]
    fn cjson_decode_inverts_encode(v in val(4)) {
        let mut src = String::new();
        lua_src(&v, &mut src);
        // Numbers go through %.14g, so compare after one round trip.
        let body = format!("{DEEP_EQUAL} local a = cjson.decode(cjson.encode({src})) local b = cjson.decode(cjson.encode(a)) return eq(a, b) and 'same' or 'diff'");
        prop_assert_eq!(resp2_of(&run(&body), &body), "$4 same");
    }

    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut e = EvalEngine::new();
        let mut h = FakeHost::default();
        for f in ["cjson.decode", "cmsgpack.unpack", "function(s) return struct.unpack('>i4sbc0d', s) end"] {
            let body = format!("return {{pcall({f}, ARGV[1])}}");
            let r = e.eval(&mut h, body.as_bytes(), &[], &[&bytes]);
            prop_assert!(matches!(r, Frame::Array(_)), "{:?}", r);
        }
    }
}
