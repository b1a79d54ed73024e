//! The sandbox: protected globals, the library set, limits, SCRIPT KILL.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::*;

#[test]
fn globals_are_protected() {
    check(&[
        ("x", "-ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: SHA, on @user_script:1."),
        ("rawset(_G, 'x', 1)", "-ERR Attempt to modify a readonly table script: SHA, on @user_script:1."),
        ("setmetatable(_G, nil)", "-ERR Attempt to modify a readonly table script: SHA, on @user_script:1."),
        ("(function() _G.y = 1 end)()", "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1."),
        ("(function() redis.call = nil end)()", "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1."),
        ("(function() getmetatable('').__index.upper = nil end)()", "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1."),
        ("(function() string.len = nil end)()", "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1."),
        ("rawset(cjson, 'x', 1)", "-ERR Attempt to modify a readonly table script: SHA, on @user_script:1."),
        ("loadstring('z = 1')()", "-ERR [string \"z = 1\"]:1: Attempt to modify a readonly table script: SHA, on z = 1:1."),
        ("coroutine.wrap(function() w = 1 end)()", "-ERR user_script:1: user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1."),
        ("getmetatable(_G)", "*0"),
        ("rawget(redis, 'call') ~= nil", ":1"),
        ("rawget(_G, 'redis') == redis", ":1"),
        ("_G == _G._G", ":1"),
        ("#{pairs(redis)}", ":2"),
        ("(function() local n = 0 for k in pairs(redis) do n = n + 1 end return n end)()", ":23"),
        ("next(string) ~= nil", ":1"),
        ("('abc'):upper()", "$3 ABC"),
        ("loadstring('return 5')()", ":5"),
        ("load(function() return nil end) ~= nil", ":1"),
        ("loadstring(string.dump(function() return 1 end))", "$-1"),
        ("select(2, loadstring(string.dump(function() return 1 end)))", "$29 binary chunks are not allowed"),
    ]);
}

#[test]
fn overridden_builtins_report_errors_as_the_originals() {
    check(&[
        ("pairs(nil)", "-ERR user_script:1: bad argument #1 to 'pairs' (table expected, got nil) script: SHA, on @user_script:1."),
        ("pairs()", "-ERR user_script:1: bad argument #1 to 'pairs' (table expected, got no value) script: SHA, on @user_script:1."),
        ("next(1)", "-ERR user_script:1: bad argument #1 to 'next' (table expected, got number) script: SHA, on @user_script:1."),
        ("rawget(1)", "-ERR user_script:1: bad argument #1 to 'rawget' (table expected, got number) script: SHA, on @user_script:1."),
        ("rawset(1)", "-ERR user_script:1: bad argument #1 to 'rawset' (table expected, got number) script: SHA, on @user_script:1."),
        ("setmetatable(1)", "-ERR user_script:1: bad argument #1 to 'setmetatable' (table expected, got number) script: SHA, on @user_script:1."),
        ("setmetatable({}, 1)", "-ERR user_script:1: bad argument #2 to 'setmetatable' (nil or table expected) script: SHA, on @user_script:1."),
        ("loadstring(nil)", "-ERR user_script:1: bad argument #1 to 'loadstring' (string expected, got nil) script: SHA, on @user_script:1."),
        ("loadstring()", "-ERR user_script:1: bad argument #1 to 'loadstring' (string expected, got no value) script: SHA, on @user_script:1."),
        ("pcall()", "$-1"),
        ("coroutine.resume(1)", "-ERR user_script:1: bad argument #1 to 'resume' (coroutine expected) script: SHA, on @user_script:1."),
        ("coroutine.create(1)", "-ERR user_script:1: bad argument #1 to 'create' (Lua function expected) script: SHA, on @user_script:1."),
        ("coroutine.wrap(1)", "-ERR user_script:1: bad argument #1 to 'wrap' (Lua function expected) script: SHA, on @user_script:1."),
        ("coroutine.create(tostring)", "-ERR user_script:1: bad argument #1 to 'create' (Lua function expected) script: SHA, on @user_script:1."),
        ("next({}, 'nokey')", "-ERR invalid key to 'next' script: SHA, on @user_script:1."),
        ("select('#', next({}))", ":1"),
        ("(function() local t = {a = 1} local n = 0 for k, v in pairs(t) do n = n + v end return n end)()", ":1"),
        ("{coroutine.resume(coroutine.create(function(a) return a + 1 end), 1)}", "*2 :1 :2"),
        ("coroutine.wrap(function() coroutine.yield(5) end)()", ":5"),
    ]);
}

#[test]
fn only_redis_libraries_exist() {
    for name in [
        "os", "io", "debug", "require", "package", "module", "dofile", "loadfile", "print",
        "getfenv", "setfenv", "newproxy",
    ] {
        let body = format!("return {name}");
        assert_eq!(
            run_err(&body),
            format!("ERR user_script:1: Script attempted to access nonexistent global variable '{name}' script: SHA, on @user_script:1.")
        );
    }
    check(&[(
        "(function() local r = {} for k in pairs(_G) do r[#r+1] = k end table.sort(r) return table.concat(r, ' ') end)()",
        "$249 ARGV KEYS _G _VERSION assert bit cjson cmsgpack collectgarbage coroutine error gcinfo getmetatable ipairs load loadstring math next pairs pcall rawequal rawget rawset redis select setmetatable string struct table tonumber tostring type unpack xpcall",
    )]);
}

#[test]
fn scripts_cannot_change_state_for_later_scripts() {
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    for body in [
        "string.upper = nil",
        "getmetatable('').__index = {}",
        "setmetatable(string, {})",
        "rawset(math, 'floor', nil)",
        "x = 1",
    ] {
        assert!(
            matches!(eval(&mut e, &mut h, body), Frame::Error(_)),
            "{body}"
        );
    }
    assert_eq!(
        resp2_of(
            &eval(&mut e, &mut h, "return {('a'):upper(), math.floor(1.5)}"),
            ""
        ),
        "*2 $1 A :1"
    );
}

#[test]
fn math_random_is_redis_drand48() {
    // The first value of a fresh engine and of seed 7, as redis-server gives.
    check(&[
        ("tostring(math.random())", "$16 0.39646477363839"),
        ("math.randomseed(7) or tostring(math.random())", "$16 0.26644419658298"),
        ("math.random(0)", "-ERR user_script:1: bad argument #1 to 'random' (interval is empty) script: SHA, on @user_script:1."),
        ("math.random(3,1)", "-ERR user_script:1: bad argument #2 to 'random' (interval is empty) script: SHA, on @user_script:1."),
        ("math.random(1,2,3)", "-ERR user_script:1: wrong number of arguments script: SHA, on @user_script:1."),
        ("math.random('a')", "-ERR user_script:1: bad argument #1 to 'random' (number expected, got string) script: SHA, on @user_script:1."),
    ]);
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    for _ in 0..200 {
        let f = eval(
            &mut e,
            &mut h,
            "return {math.random(10), math.random(5, 7)}",
        );
        let Frame::Array(v) = f else { panic!() };
        assert!(matches!(v[0], Frame::Integer(1..=10)) && matches!(v[1], Frame::Integer(5..=7)));
    }
}

#[test]
fn memory_limit_stops_an_allocation_bomb() {
    let mut e = EvalEngine::with_memory_limit(8 << 20);
    let mut h = FakeHost::default();
    let f = eval(
        &mut e,
        &mut h,
        "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 100) .. i end return #t",
    );
    let Frame::Error(msg) = f else {
        panic!("expected an error, got {f:?}")
    };
    assert!(
        msg.ends_with(b"not enough memory"),
        "{}",
        String::from_utf8_lossy(&msg)
    );
    // The engine works afterwards, its garbage collected.
    assert_eq!(eval(&mut e, &mut h, "return 1"), Frame::Integer(1));
    assert!(e.used_memory() < 4 << 20);
    let f = eval(&mut e, &mut h, "local s = 'x' while true do s = s .. s end");
    assert!(
        matches!(f, Frame::Error(ref m) if m.ends_with(b"not enough memory")),
        "{f:?}"
    );
}

#[test]
fn deep_recursion_and_nesting_are_errors_not_crashes() {
    let f = run("local function f(n) return 1 + f(n + 1) end return f(1)");
    assert!(
        matches!(f, Frame::Error(ref m) if m.windows(14).any(|w| w == b"stack overflow")),
        "{f:?}"
    );
    // A table nested deeper than the reply limit ends in Redis's error element.
    let f = run("local t = {} local c = t for i = 1, 5000 do c[1] = {} c = c[1] end return t");
    let mut depth = 0;
    let mut cur = &f;
    while let Frame::Array(v) = cur {
        depth += 1;
        cur = &v[0];
    }
    assert_eq!(depth, MAX_REPLY_DEPTH + 1);
    assert_eq!(
        cur,
        &Frame::Error(Bytes::from_static(b"reached lua stack limit"))
    );
    // A table that contains itself.
    let f = run("local t = {} t[1] = t return t");
    assert!(matches!(f, Frame::Array(_)));
    let f = run("local t = {} t.map = t return t");
    assert!(matches!(f, Frame::Map(_)));
}

fn kill_when_running(control: Arc<RunControl>) -> std::thread::JoinHandle<KillOutcome> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !control.is_running() {
            assert!(Instant::now() < deadline, "the script never started");
            std::thread::sleep(Duration::from_millis(1));
        }
        control.kill()
    })
}

#[test]
fn script_kill_stops_a_busy_script() {
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    let control = e.control();
    assert_eq!(control.kill(), KillOutcome::NotBusy);
    assert_eq!(control.elapsed_ms(), None);
    for body in [
        "while true do end",
        // pcall cannot swallow the kill.
        "while true do pcall(function() while true do end end) end",
        "while true do local co = coroutine.create(function() while true do end end) coroutine.resume(co) end",
    ] {
        let killer = kill_when_running(control.clone());
        let f = eval(&mut e, &mut h, body);
        assert_eq!(killer.join().unwrap(), KillOutcome::Killed);
        // Where it stopped, as Redis reports it.
        let sha = crate::sha1_hex(body.as_bytes());
        let want = format!("ERR Script killed by user with SCRIPT KILL... script: {sha}, on @user_script:1.");
        assert_eq!(f, Frame::Error(Bytes::from(want)));
        assert!(!control.is_running());
    }
    assert_eq!(eval(&mut e, &mut h, "return 1"), Frame::Integer(1));
}

/// A host whose SET runs SCRIPT KILL itself, after the write.
struct KillInsideHost(FakeHost, Option<KillOutcome>, u64);

impl Host for KillInsideHost {
    fn call(&mut self, args: &[&[u8]], ctx: &CallCtx) -> Frame {
        let r = self.0.call(args, ctx);
        let c = self.0.control.clone().unwrap();
        self.1 = Some(c.kill());
        self.2 = c.elapsed_ms().unwrap();
        assert!(c.is_busy(0) && !c.is_busy(u64::MAX));
        r
    }
}

#[test]
fn a_script_that_wrote_is_unkillable() {
    let mut e = EvalEngine::new();
    let mut h = KillInsideHost(FakeHost::default(), None, 0);
    h.0.control = Some(e.control());
    // Killed while it runs (and had not written): it ends with the kill error.
    assert_eq!(
        e.eval(&mut h, b"return redis.call('get', 'k')", &[], &[]),
        Frame::Error(Bytes::from_static(
            b"ERR Script killed by user with SCRIPT KILL..."
        ))
    );
    assert_eq!(h.1, Some(KillOutcome::Killed));
    let f = e.eval(&mut h, b"redis.call('set', 'k', 'v') return 1", &[], &[]);
    assert_eq!(h.1, Some(KillOutcome::Unkillable));
    assert_eq!(f, Frame::Integer(1));
    assert!(!e.control().has_written() || !e.control().is_running());
}

#[test]
fn the_busy_callback_runs_while_a_script_runs_and_can_kill_it() {
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    let control = e.control();
    let ticks = std::rc::Rc::new(std::cell::Cell::new(0u32));
    let t = ticks.clone();
    e.set_busy_callback(move |_elapsed_ms| {
        t.set(t.get() + 1);
        // As the server would on a SCRIPT KILL from a client of this thread.
        if t.get() == 3 {
            assert_eq!(control.kill(), KillOutcome::Killed);
        }
    });
    let f = eval(&mut e, &mut h, "while true do end");
    let sha = crate::sha1_hex(b"while true do end");
    let want =
        format!("ERR Script killed by user with SCRIPT KILL... script: {sha}, on @user_script:1.");
    assert_eq!(f, Frame::Error(Bytes::from(want)));
    assert_eq!(ticks.get(), 3);
    // Survives SCRIPT FLUSH.
    e.flush();
    eval(
        &mut e,
        &mut h,
        "local n = 0 for i = 1, 1e6 do n = n + i end return n",
    );
    assert!(ticks.get() > 3);
}
