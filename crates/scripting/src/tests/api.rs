//! The `redis` API, the conversions both ways, the cache and the shebang.

use bytes::Bytes;
use darner_resp::ReplyWriter;

use super::*;

fn bulk(s: &str) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn lua_values_become_redis_replies() {
    check(&[
        ("1", ":1"),
        ("3.99", ":3"),
        ("-3.5", ":-3"),
        ("0/0", ":-9223372036854775808"),
        ("1e300", ":-9223372036854775808"),
        ("'x'", "$1 x"),
        ("{1,2,nil,3}", "*2 :1 :2"),
        ("{1,{2,{'a'}}}", "*2 :1 *2 :2 *1 $1 a"),
        ("{double=3.5}", "$3 3.5"),
        ("{big_number='123'}", "$3 123"),
        ("{map={a=1}}", "*2 $1 a :1"),
        ("{set={a=true}}", "*1 $1 a"),
        ("{verbatim_string={format='txt',string='hi'}}", "$2 hi"),
        ("true", ":1"),
        ("false", "$-1"),
        ("nil", "$-1"),
        ("{err='x'}", "-x"),
        ("{err='ERR a\\nb'}", "-ERR a b"),
        ("{ok='a\\r\\nb'}", "+a  b"),
        ("{ok='OK', err='E x'}", "-E x"),
        ("function() end", "$-1"),
        ("{}", "*0"),
    ]);
}

#[test]
fn setresp_3_returns_resp3_types() {
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    let f = eval(
        &mut e,
        &mut h,
        "redis.setresp(3) return {true, false, {double=1.5}, {map={k='v'}}, {set={m=true}}, {big_number='9'}, {verbatim_string={format='mkd', string='x'}}}",
    );
    assert_eq!(
        f,
        Frame::Array(vec![
            Frame::Boolean(true),
            Frame::Boolean(false),
            Frame::Double(1.5),
            Frame::Map(vec![(bulk("k"), bulk("v"))]),
            Frame::Set(vec![bulk("m")]),
            Frame::BigNumber(Bytes::from_static(b"9")),
            Frame::Verbatim {
                format: *b"mkd",
                text: Bytes::from_static(b"x"),
            },
        ])
    );
    // As a RESP3 client and a RESP2 client receive it.
    let mut three = Vec::new();
    write_reply(&f, &mut ReplyWriter::new(&mut three, true));
    assert_eq!(
        String::from_utf8_lossy(&three),
        "*7\r\n#t\r\n#f\r\n,1.5\r\n%1\r\n$1\r\nk\r\n$1\r\nv\r\n~1\r\n$1\r\nm\r\n(9\r\n=5\r\nmkd:x\r\n"
    );
    let mut two = Vec::new();
    write_reply(&f, &mut ReplyWriter::new(&mut two, false));
    assert_eq!(
        String::from_utf8_lossy(&two),
        "*7\r\n:1\r\n:0\r\n$3\r\n1.5\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n*1\r\n$1\r\nm\r\n$1\r\n9\r\n$1\r\nx\r\n"
    );
    // Without setresp(3), false is a null for either client.
    let f = eval(&mut e, &mut h, "return false");
    let mut three = Vec::new();
    write_reply(&f, &mut ReplyWriter::new(&mut three, true));
    assert_eq!(three, b"_\r\n");
}

#[test]
fn redis_replies_become_lua_values_resp2() {
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    let f = eval(
        &mut e,
        &mut h,
        "local r = redis.call('types')
         return {type(r[1]), r[1][1], r[2][1], r[3], r[4], r[5], r[6], tostring(r[7]),
                 redis.call('ping').ok, type(redis.call('get', 'nokey')), tostring(redis.call('get', 'nokey'))}",
    );
    assert_eq!(
        resp2_of(&f, ""),
        "*11 $5 table $1 f $1 m $3 3.5 :1 $30 123456789012345678901234567890 $5 hello $5 false $4 PONG $7 boolean $5 false"
    );
    assert_eq!(h.calls[0].1, 2, "the host is told the script's protocol");
}

#[test]
fn redis_replies_become_lua_values_resp3() {
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    let f = eval(
        &mut e,
        &mut h,
        "redis.setresp(3)
         local r = redis.call('types')
         return {r[1].map.f, next(r[2].set), r[2].set.m and 1, r[3].double, tostring(r[4]), r[5].big_number,
                 r[6].verbatim_string.format, r[6].verbatim_string.string, tostring(r[7]), #r,
                 tostring(redis.call('get', 'nokey'))}",
    );
    assert_eq!(
        resp2_of(&f, ""),
        "*11 :1 $1 m :1 :3 $4 true $30 123456789012345678901234567890 $3 txt $5 hello $3 nil :6 $3 nil"
    );
    assert!(h.calls.iter().all(|c| c.1 == 3));
}

#[test]
fn error_replies_in_lua() {
    check(&[
        ("redis.pcall('incr', 'nokey') and 0", ":0"),
        ("redis.pcall('nosuch')", "-ERR Unknown Redis command called from script"),
        ("redis.pcall('nosuch').err", "$44 ERR Unknown Redis command called from script"),
        (
            "redis.call('nosuch')",
            "-ERR Unknown Redis command called from script script: SHA, on @user_script:1.",
        ),
        (
            "redis.call('get')",
            "-ERR Wrong number of args calling Redis command from script script: SHA, on @user_script:1.",
        ),
        ("redis.pcall()", "-ERR Please specify at least one argument for this redis lib call"),
        (
            "redis.call()",
            "-ERR Please specify at least one argument for this redis lib call script: SHA, on @user_script:1.",
        ),
        (
            "redis.call('echo', {})",
            "-ERR Lua redis lib command arguments must be strings or integers script: SHA, on @user_script:1.",
        ),
        ("redis.pcall('echo', nil).err", "$63 ERR Lua redis lib command arguments must be strings or integers"),
        ("redis.error_reply(1)", "-ERR wrong number or type of arguments"),
        ("redis.error_reply('FOO bar')", "-FOO bar"),
        ("redis.error_reply('-FOO bar')", "-FOO bar"),
        ("redis.error_reply('bar')", "-ERR bar"),
        ("redis.status_reply()", "-ERR wrong number or type of arguments"),
        ("redis.status_reply('x')", "+x"),
        // pcall hands back the err string of error tables, as Redis 7.
        ("pcall(function() redis.call('nosuch') end)", "$-1"),
        (
            "select(2, pcall(function() redis.call('nosuch') end))",
            "$44 ERR Unknown Redis command called from script",
        ),
        ("select(2, pcall(function() error({err='X y'}) end))", "$3 X y"),
        ("select(2, pcall(function() error('plain') end))", "$20 user_script:1: plain"),
        ("select('#', pcall(function() return 1, 2 end))", ":3"),
    ]);
    // A command error stops the script at the failing line.
    let body = "local a = 1\nredis.call('set', 'k', 'v')\nreturn redis.call('incr', 'k')";
    assert_eq!(
        run_err(body),
        "ERR value is not an integer or out of range script: SHA, on @user_script:3."
    );
}

#[test]
fn script_errors_as_redis_formats_them() {
    assert_eq!(
        run_err("error('boom')"),
        "ERR user_script:1: boom script: SHA, on @user_script:1."
    );
    assert_eq!(
        run_err("error('x', 0)"),
        "ERR x script: SHA, on @user_script:1."
    );
    assert_eq!(
        run_err("error({err='oops'})"),
        "oops script: SHA, on @user_script:1."
    );
    assert_eq!(run_err("\n\nlocal x = nil + 1"), "ERR user_script:3: attempt to perform arithmetic on a nil value script: SHA, on @user_script:3.");
    assert_eq!(
        run_err("return +"),
        "ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'"
    );
    // A tail call into a native keeps the script's frame.
    assert_eq!(
        run_err("return cjson.decode('x')"),
        "ERR user_script:1: Expected value but found invalid token at character 1 script: SHA, on @user_script:1."
    );
}

#[test]
fn library_functions_of_the_redis_table() {
    check(&[
        ("redis.sha1hex('')", "$40 da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        ("redis.sha1hex(1)", "$40 356a192b7913b04c54574d18c28d46e6395428ab"),
        // Numbers as Lua's tostring writes them (%.14g): sha1("1e+15").
        ("redis.sha1hex(1e15) == redis.sha1hex('1e+15')", ":1"),
        ("{err=1e15}", "*0"),
        ("redis.sha1hex()", "-ERR wrong number of arguments script: SHA, on @user_script:1."),
        ("redis.setresp(4)", "-ERR RESP version must be 2 or 3. script: SHA, on @user_script:1."),
        ("redis.setresp()", "-ERR redis.setresp() requires one argument. script: SHA, on @user_script:1."),
        ("redis.log(99, 'x')", "-ERR Invalid debug level. script: SHA, on @user_script:1."),
        ("redis.log(1)", "-ERR redis.log() requires two arguments or more. script: SHA, on @user_script:1."),
        ("redis.log('a', 'b')", "-ERR First argument must be a number (log level). script: SHA, on @user_script:1."),
        ("redis.set_repl(8)", "-ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE. script: SHA, on @user_script:1."),
        ("redis.set_repl()", "-ERR redis.set_repl() requires two arguments. script: SHA, on @user_script:1."),
        ("redis.replicate_commands()", ":1"),
        ("redis.breakpoint()", "$-1"),
        ("redis.debug('x')", "$-1"),
        ("{redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}", "*2 $5 7.2.4 :459268"),
        ("{redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}", "*4 :0 :1 :2 :3"),
        ("{redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}", "*5 :0 :1 :2 :2 :3"),
        ("redis.acl_check_cmd('get', 'k')", ":1"),
        ("redis.acl_check_cmd()", "-ERR Please specify at least one argument for this redis lib call script: SHA, on @user_script:1."),
        // Numbers go to commands as %.17g.
        ("redis.call('echo', 0.1)", "$19 0.10000000000000001"),
        ("redis.call('echo', 3)", "$1 3"),
        ("redis.call('echo', -2.5e30)", "$23 -2.4999999999999999e+30"),
        ("redis.call('echo', 1e-20)", "$22 9.9999999999999995e-21"),
        ("redis.call('echo', 1e17)", "$5 1e+17"),
        ("redis.call('echo', 2^53)", "$16 9007199254740992"),
    ]);
}

#[test]
fn log_set_repl_and_setresp_reach_the_host() {
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    eval(
        &mut e,
        &mut h,
        "redis.log(redis.LOG_WARNING, 'a', 1, {}, 'b') redis.set_repl(redis.REPL_AOF) redis.setresp(3) redis.call('ping') redis.pcall('ping')",
    );
    assert_eq!(h.logs, vec![(LogLevel::Warning, b"a 1 b".to_vec())]);
    assert_eq!(h.repl, vec![REPL_AOF]);
    assert_eq!(
        h.calls.iter().map(|c| (c.1, c.2)).collect::<Vec<_>>(),
        vec![(3, false), (3, true)]
    );
    // The protocol resets for the next script.
    eval(&mut e, &mut h, "redis.call('ping')");
    assert_eq!(h.calls.last().unwrap().1, 2);
}

#[test]
fn keys_and_argv() {
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    let f = e.eval(
        &mut h,
        b"return {#KEYS, KEYS[1], ARGV[1], ARGV[2]}",
        &[b"k1"],
        &[b"a", b"\x00b"],
    );
    assert_eq!(resp2_of(&f, ""), "*4 :1 $2 k1 $1 a $2 \u{0}b");
    let f = e.eval(&mut h, b"return {#KEYS, #ARGV}", &[], &[]);
    assert_eq!(resp2_of(&f, ""), "*2 :0 :0");
    e.eval(
        &mut h,
        b"return redis.call('set', KEYS[1], ARGV[1])",
        &[b"x"],
        &[b"1"],
    );
    assert_eq!(h.kv.get(&b"x"[..]), Some(&b"1".to_vec()));
}

#[test]
fn cache_load_exists_flush_and_evalsha() {
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    let (sha, flags) = e.load(b"return 1").unwrap();
    assert_eq!(sha, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    assert!(flags.eval_compat_mode);
    assert!(e.exists(&sha) && e.exists(&sha.to_uppercase()));
    assert_eq!(
        e.evalsha(&mut h, &sha.to_uppercase(), &[], &[]),
        Frame::Integer(1)
    );
    assert_eq!(e.body(&sha).as_deref(), Some(&b"return 1"[..]));
    assert_eq!(e.len(), 1);
    assert_eq!(
        e.load(b"return +"),
        Err(
            "ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'"
                .into()
        )
    );
    assert_eq!(e.len(), 1, "a script that does not compile is not cached");
    e.flush();
    assert!(!e.exists(&sha) && e.is_empty());
    assert_eq!(
        e.evalsha(&mut h, &sha, &[], &[]),
        Frame::Error(Bytes::from_static(
            b"NOSCRIPT No matching script. Please use EVAL."
        ))
    );
    assert_eq!(e.eval(&mut h, b"return 2", &[], &[]), Frame::Integer(2));
}

#[test]
fn shebang_flags_and_errors() {
    let f = |s: &str| parse_shebang(s.as_bytes()).map(|(f, _)| f);
    let flags = f(
        "#!lua flags=no-writes,allow-oom,allow-stale,no-cluster,allow-cross-slot-keys\nreturn 1",
    )
    .unwrap();
    assert!(
        flags.no_writes
            && flags.allow_oom
            && flags.allow_stale
            && flags.no_cluster
            && flags.allow_cross_slot_keys
    );
    assert!(!flags.eval_compat_mode);
    assert_eq!(flags.names().len(), 5);
    assert_eq!(f("#!lua\nreturn 1").unwrap(), ScriptFlags::default());
    assert_eq!(f("#!lua flags=\nreturn 1").unwrap(), ScriptFlags::default());
    assert_eq!(
        f("#!lua flags=no-writes,foo\nreturn 1"),
        Err("ERR Unexpected flag in script shebang: foo".into())
    );
    assert_eq!(
        f("#!lua flags=NO-WRITES\nreturn 1"),
        Err("ERR Unexpected flag in script shebang: NO-WRITES".into())
    );
    assert_eq!(
        f("#!luax\nreturn 1"),
        Err("ERR Unexpected engine in script shebang: #!luax".into())
    );
    assert_eq!(
        f("#! lua\nreturn 1"),
        Err("ERR Unexpected engine in script shebang: #!".into())
    );
    assert_eq!(
        f("#!lua x=1\nreturn 1"),
        Err("ERR Unknown lua shebang option: x=1".into())
    );
    assert_eq!(f("#!lua"), Err("ERR Invalid script shebang".into()));
    // The body keeps its line numbers, and the host sees the flags.
    let body = "#!lua flags=no-writes\nreturn redis.call('set','a','b')";
    assert_eq!(
        run_err(body),
        "ERR Write commands are not allowed from read-only scripts. script: SHA, on @user_script:2."
    );
    assert_eq!(run("#!lua\nreturn 1"), Frame::Integer(1));
    let mut e = EvalEngine::new();
    assert_eq!(
        e.load(b"#!lua flags=bad\nreturn 1"),
        Err("ERR Unexpected flag in script shebang: bad".into())
    );
}
