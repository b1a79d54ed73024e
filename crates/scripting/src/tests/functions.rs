//! FUNCTION libraries and FCALL.

use bytes::Bytes;

use super::*;

fn load(e: &mut FunctionEngine, code: &str) -> Result<String, String> {
    e.load(&mut FakeHost::default(), code.as_bytes(), false)
}

fn fcall(e: &mut FunctionEngine, name: &str, keys: &[&[u8]], args: &[&[u8]]) -> String {
    resp2_of(&e.fcall(&mut FakeHost::default(), name, keys, args), "")
}

#[test]
fn register_and_call() {
    let mut e = FunctionEngine::new();
    assert_eq!(
        load(&mut e, "#!lua name=lib1\nredis.register_function('f1', function(keys, args) return {keys[1], args[1], #keys, #args} end)"),
        Ok("lib1".into())
    );
    assert_eq!(
        fcall(&mut e, "f1", &[b"k"], &[b"a", b"b"]),
        "*4 $1 k $1 a :1 :2"
    );
    assert_eq!(
        load(&mut e, "#!lua name=lib2\nredis.register_function{function_name='f2', callback=function() return redis.call('ping') end, flags={'no-writes', 'ALLOW-OOM'}, description='d'}"),
        Ok("lib2".into())
    );
    assert_eq!(fcall(&mut e, "f2", &[], &[]), "+PONG");
    let flags = e.function_flags("f2").unwrap();
    assert!(flags.no_writes && flags.allow_oom && !flags.eval_compat_mode);
    assert_eq!(flags.names(), vec!["no-writes", "allow-oom"]);
    assert_eq!(e.function_flags("f1"), Some(ScriptFlags::default()));
    assert_eq!(fcall(&mut e, "nosuch", &[], &[]), "-ERR Function not found");
    assert_eq!(e.function_count(), 2);
    let libs: Vec<_> = e.libraries().collect();
    assert_eq!(libs.len(), 2);
    assert_eq!(libs[1].name, "lib2");
    assert_eq!(libs[1].engine, "LUA");
    assert_eq!(
        libs[1].functions[0].description,
        Some(Bytes::from_static(b"d"))
    );
    assert!(libs[1].code.starts_with(b"#!lua name=lib2\n"));
}

#[test]
fn runtime_errors_name_the_function() {
    let mut e = FunctionEngine::new();
    load(&mut e, "#!lua name=l\nredis.register_function('f8', function() return error('x') end)\nredis.register_function('f11', function() return redis.call('nosuch') end)\nredis.register_function('f14', function() return KEYS end)\nredis.register_function('f13', function() return redis.register_function end)").unwrap();
    assert_eq!(
        fcall(&mut e, "f8", &[], &[]),
        "-ERR user_function:2: x script: f8, on @user_function:2."
    );
    assert_eq!(
        fcall(&mut e, "f11", &[], &[]),
        "-ERR Unknown Redis command called from script script: f11, on @user_function:3."
    );
    assert_eq!(fcall(&mut e, "f14", &[], &[]), "-ERR user_function:4: Script attempted to access nonexistent global variable 'KEYS' script: f14, on @user_function:4.");
    assert_eq!(fcall(&mut e, "f13", &[], &[]), "$-1");
}

#[test]
fn the_load_environment_is_restricted() {
    let mut e = FunctionEngine::new();
    let cases = [
        ("#!lua name=l\nredis.call('ping')", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'"),
        ("#!lua name=l\nreturn redis.setresp", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'setresp'"),
        ("#!lua name=l\nlocal s = string.len('ab')", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'string'"),
        ("#!lua name=l\nerror('boom')", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'error'"),
        ("#!lua name=l\nx = 1", "ERR Error registering functions: ERR user_function:2: Attempt to modify a readonly table"),
        ("#!lua name=l\nredis.log(redis.LOG_WARNING, 'x')", "ERR No functions registered"),
    ];
    for (code, want) in cases {
        assert_eq!(load(&mut e, code), Err(want.to_string()), "{code}");
    }
    // What a function captured while loading sees the runtime API when called.
    load(&mut e, "#!lua name=l10\nlocal function g() return redis.setresp end redis.register_function('f10', function() return type(g()) .. ' ' .. string.upper('x') end)").unwrap();
    assert_eq!(fcall(&mut e, "f10", &[], &[]), "$10 function X");
    // redis.log works while loading.
    let mut h = FakeHost::default();
    e.load(&mut h, b"#!lua name=lg\nredis.log(redis.LOG_NOTICE, 'loading') redis.register_function('g', function() end)", false).unwrap();
    assert_eq!(h.logs, vec![(LogLevel::Notice, b"loading".to_vec())]);
    assert_eq!(e.function_count(), 2, "failed loads registered nothing");
}

#[test]
fn library_metadata_and_registration_errors() {
    let mut e = FunctionEngine::new();
    let cases = [
        ("return 1", "ERR Missing library metadata"),
        ("#!lua\nreturn 1", "ERR Library name was not given"),
        ("#!lua name=lib1\nreturn 1", "ERR No functions registered"),
        ("#!luax name=x\nreturn 1", "ERR Engine 'luax' not found"),
        ("#!lua name=x foo\nreturn 1", "ERR Invalid metadata value given: foo"),
        ("#!lua name=lib-3\nreturn 1", "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"),
        ("#!lua name=a name=b\nreturn 1", "ERR Invalid metadata value, name argument was given multiple times"),
        ("#!lua name=l flags=no-writes\nreturn 1", "ERR Invalid metadata value given: flags=no-writes"),
        ("#!lua name=l\n+", "ERR Error compiling function: user_function:2: unexpected symbol near '+'"),
        ("#!lua name=l\nredis.register_function{function_name='f3', callback=function() end, flags={'bad'}}", "ERR Error registering functions: ERR unknown flag given"),
        ("#!lua name=l\nredis.register_function{function_name='f3', callbac=function() end}", "ERR Error registering functions: ERR unknown argument given to redis.register_function"),
        ("#!lua name=l\nredis.register_function{[1]='f', callback=function() end}", "ERR Error registering functions: ERR unknown argument given to redis.register_function"),
        ("#!lua name=l\nredis.register_function{function_name='a'}", "ERR Error registering functions: ERR redis.register_function must get a callback argument"),
        ("#!lua name=l\nredis.register_function{callback=function() end}", "ERR Error registering functions: ERR redis.register_function must get a function name argument"),
        ("#!lua name=l\nredis.register_function{function_name='b', callback=function() end, flags='no-writes'}", "ERR Error registering functions: ERR flags argument to redis.register_function must be a table representing function flags"),
        ("#!lua name=l\nredis.register_function{function_name={}, callback=function() end}", "ERR Error registering functions: ERR function_name argument given to redis.register_function must be a string"),
        ("#!lua name=l\nredis.register_function('f 3', function() end)", "ERR Error registering functions: ERR Function names can only contain letters, numbers, or underscores(_) and must be at least one character long"),
        ("#!lua name=l\nredis.register_function('f3')", "ERR Error registering functions: ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."),
        ("#!lua name=l\nredis.register_function()", "ERR Error registering functions: ERR wrong number of arguments to redis.register_function"),
        ("#!lua name=l\nredis.register_function('f3', 1)", "ERR Error registering functions: ERR second argument to redis.register_function must be a function"),
        ("#!lua name=l\nredis.register_function({}, function() end)", "ERR Error registering functions: ERR first argument to redis.register_function must be a string"),
        ("#!lua name=l\nredis.register_function('f', function() end) redis.register_function('f', function() end)", "ERR Error registering functions: ERR Function already exists in the library"),
    ];
    for (code, want) in cases {
        assert_eq!(load(&mut e, code), Err(want.to_string()), "{code}");
    }
    assert_eq!(e.function_count(), 0);
    // Case-insensitive engine, and the description may be a number.
    assert_eq!(load(&mut e, "#!LUA name=ld8\nredis.register_function{function_name='f8', callback=function() end, description=1}"), Ok("ld8".into()));
    assert_eq!(
        e.libraries().next().unwrap().functions[0].description,
        Some(Bytes::from_static(b"1"))
    );
}

#[test]
fn replace_delete_flush() {
    let mut e = FunctionEngine::new();
    load(
        &mut e,
        "#!lua name=lib1\nredis.register_function('f1', function() return 1 end)",
    )
    .unwrap();
    assert_eq!(
        load(
            &mut e,
            "#!lua name=lib1\nredis.register_function('f1', function() return 2 end)"
        ),
        Err("ERR Library 'lib1' already exists".into())
    );
    assert_eq!(
        load(
            &mut e,
            "#!lua name=lib2\nredis.register_function('f1', function() return 1 end)"
        ),
        Err("ERR Function f1 already exists".into())
    );
    assert_eq!(
        e.load(
            &mut FakeHost::default(),
            b"#!lua name=lib2\nredis.register_function('f1', function() return 1 end)",
            true
        ),
        Err("ERR Function f1 already exists".into())
    );
    assert_eq!(
        e.load(
            &mut FakeHost::default(),
            b"#!lua name=lib1\nredis.register_function('f2', function() return 2 end)",
            true
        ),
        Ok("lib1".into())
    );
    assert_eq!(fcall(&mut e, "f1", &[], &[]), "-ERR Function not found");
    assert_eq!(fcall(&mut e, "f2", &[], &[]), ":2");
    assert_eq!(e.delete("nosuch"), Err("ERR Library not found".into()));
    assert_eq!(e.delete("lib1"), Ok(()));
    assert_eq!(fcall(&mut e, "f2", &[], &[]), "-ERR Function not found");
    load(
        &mut e,
        "#!lua name=lib3\nredis.register_function('f3', function() return 3 end)",
    )
    .unwrap();
    e.flush();
    assert_eq!(e.libraries().count(), 0);
    assert_eq!(fcall(&mut e, "f3", &[], &[]), "-ERR Function not found");
    load(
        &mut e,
        "#!lua name=lib3\nredis.register_function('f3', function() return 3 end)",
    )
    .unwrap();
    assert_eq!(fcall(&mut e, "f3", &[], &[]), ":3");
}

#[test]
fn load_times_out() {
    let mut e = FunctionEngine::new();
    let t = std::time::Instant::now();
    assert_eq!(
        load(&mut e, "#!lua name=lt\nwhile true do end"),
        Err("ERR Error registering functions: ERR FUNCTION LOAD timeout".into())
    );
    assert!(t.elapsed() >= crate::functions::LOAD_TIMEOUT);
    load(&mut e, "#!lua name=ok\nredis.register_function('f', function() local n = 0 for i = 1, 3e6 do n = n + 1 end return n end)").unwrap();
    std::thread::sleep(crate::functions::LOAD_TIMEOUT);
    assert_eq!(
        fcall(&mut e, "f", &[], &[]),
        ":3000000",
        "the deadline applies to loading only"
    );
}

#[test]
fn dump_and_restore() {
    // FUNCTION DUMP of redis-server 7.0 for this library (RDB version 10).
    let code = b"#!lua name=lib1\nredis.register_function('f1', function(keys, args) return 1 end)";
    let mut payload = vec![0xf5, 0x40, 0x50];
    payload.extend_from_slice(code);
    payload.extend_from_slice(&[0x0a, 0x00, 0xba, 0xb3, 0xff, 0xb4, 0x06, 0x06, 0x73, 0xaa]);
    let mut e = FunctionEngine::new();
    let mut h = FakeHost::default();
    e.restore(&mut h, &payload, RestorePolicy::Append).unwrap();
    assert_eq!(fcall(&mut e, "f1", &[], &[]), ":1");
    assert_eq!(
        e.restore(&mut h, &payload, RestorePolicy::Append),
        Err("ERR Library lib1 already exists".into())
    );
    e.restore(&mut h, &payload, RestorePolicy::Replace).unwrap();
    load(
        &mut e,
        "#!lua name=other\nredis.register_function('g', function() return 2 end)",
    )
    .unwrap();
    // Our own dump: version 10 (Redis 7.0 restores it too), and it restores into a fresh
    // engine.
    let dump = e.dump();
    assert_eq!(&dump[dump.len() - 10..dump.len() - 8], &[10, 0]);
    let mut e2 = FunctionEngine::new();
    e2.restore(&mut h, &dump, RestorePolicy::Append).unwrap();
    assert_eq!(
        e2.libraries().map(|l| l.name.clone()).collect::<Vec<_>>(),
        vec!["lib1", "other"]
    );
    assert_eq!(fcall(&mut e2, "g", &[], &[]), ":2");
    // FLUSH drops what was there.
    let mut e3 = FunctionEngine::new();
    load(
        &mut e3,
        "#!lua name=x\nredis.register_function('x', function() end)",
    )
    .unwrap();
    e3.restore(&mut h, &payload, RestorePolicy::Flush).unwrap();
    assert_eq!(
        e3.libraries().map(|l| l.name.clone()).collect::<Vec<_>>(),
        vec!["lib1"]
    );
    // Corrupt payloads.
    let mut bad = payload.clone();
    bad[5] ^= 1;
    assert_eq!(
        e3.restore(&mut h, &bad, RestorePolicy::Flush),
        Err("ERR payload version or checksum are wrong".into())
    );
    assert_eq!(
        e3.restore(&mut h, b"x", RestorePolicy::Flush),
        Err("ERR payload version or checksum are wrong".into())
    );
    let not_fn = crate::dump::encode(std::iter::empty());
    let mut other = vec![0x00];
    other.extend_from_slice(&not_fn[..not_fn.len() - 10]);
    other.extend_from_slice(&[11, 0]);
    let crc = crc64(0, &other);
    other.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(
        e3.restore(&mut h, &other, RestorePolicy::Append),
        Err("ERR given type is not a function".into())
    );
    assert_eq!(
        e3.libraries().count(),
        1,
        "a failed restore changes nothing"
    );
}

#[test]
fn function_kill() {
    let mut e = FunctionEngine::new();
    load(
        &mut e,
        "#!lua name=busy\nredis.register_function('spin', function() while true do end end)",
    )
    .unwrap();
    let control = e.control();
    let killer = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !control.is_running() {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        control.kill()
    });
    assert_eq!(
        fcall(&mut e, "spin", &[], &[]),
        "-ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2."
    );
    assert_eq!(killer.join().unwrap(), KillOutcome::Killed);
}

/// `body` sealed as a payload (version 10 and its CRC64), so that the parser, not the
/// checksum, meets whatever the body holds.
fn sealed(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// FUNCTION RESTORE of hostile payloads: an error (or libraries, for a body that happens
    /// to parse), never a panic, and a refused payload changes nothing.
    #[test]
    fn restore_payloads_never_panic(
        body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..96),
        raw in proptest::prelude::any::<bool>(),
        opcode_first in proptest::prelude::any::<bool>(),
    ) {
        let mut body = body;
        if opcode_first {
            body.insert(0, 245); // RDB_OPCODE_FUNCTION2: get into the string decoder
        }
        let payload = if raw { body.clone() } else { sealed(&body) };
        let mut e = FunctionEngine::new();
        load(&mut e, "#!lua name=kept\nredis.register_function('kept', function() return 1 end)").unwrap();
        let mut h = FakeHost::default();
        for policy in [RestorePolicy::Append, RestorePolicy::Replace, RestorePolicy::Flush] {
            if e.restore(&mut h, &payload, policy).is_err() {
                proptest::prop_assert!(e.libraries().any(|l| l.name == "kept"));
            }
        }
    }
}
