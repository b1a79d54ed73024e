//! Redis's extra Lua libraries, written in Rust: `cjson`, `cmsgpack`, `bit`
//! and `struct`. Every function answers the sandbox's status protocol.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;
