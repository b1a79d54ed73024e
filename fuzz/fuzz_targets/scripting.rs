//! Fuzzes the decoders a Lua script or a client can feed hostile bytes to: `cjson.decode`,
//! `cmsgpack.unpack`, `struct.unpack` (through a script, with the bytes as ARGV[1]) and the
//! FUNCTION RESTORE payload parser. Every input gives a reply or an error, never a panic.
//!
//! Run with `cargo +nightly fuzz run scripting` from the repository root. The property tests
//! `decoders_never_panic` (crates/scripting/src/tests/libs.rs) and
//! `restore_payloads_never_panic` (tests/functions.rs) check the same under `cargo test`.

#![no_main]

use darner_scripting::{CallCtx, EvalEngine, Frame, FunctionEngine, Host, RestorePolicy};
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;

/// Scripts here call no command.
struct NoCommands;

impl Host for NoCommands {
    fn call(&mut self, _: &[&[u8]], _: &CallCtx) -> Frame {
        Frame::Error("ERR no commands here".into())
    }
}

thread_local! {
    static ENGINES: RefCell<(EvalEngine, FunctionEngine)> =
        RefCell::new((EvalEngine::new(), FunctionEngine::new()));
}

// Each decoder's results are gathered in a table inside the protected function: Lua 5.1's
// own `pcall` pushes its status after a call of LUA_MULTRET results without growing the stack
// (fine in a release build, where the stack has room left by the callee; but a debug build of
// Lua checks the API and stops there, as it would in Redis), so `pcall` sees one result.
const DECODERS: &[&[u8]] = &[
    b"return {pcall(function(s) local t = {cjson.decode(s)} return #t end, ARGV[1])}",
    b"return {pcall(function(s) local t = {cmsgpack.unpack(s)} return #t end, ARGV[1])}",
    b"return {pcall(function(s) local t = {struct.unpack('>i4sbc0d', s)} return #t end, ARGV[1])}",
];

fuzz_target!(|data: &[u8]| {
    ENGINES.with(|e| {
        let (eval, functions) = &mut *e.borrow_mut();
        for script in DECODERS {
            let reply = eval.eval(&mut NoCommands, script, &[], &[data]);
            assert!(matches!(reply, Frame::Array(_)), "{reply:?}");
        }
        let _ = functions.restore(&mut NoCommands, data, RestorePolicy::Append);
        functions.flush();
    });
});
