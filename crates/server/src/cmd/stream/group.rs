//! Consumer groups: XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO.

use crate::cmd::Reg;

pub fn register(_r: &mut Reg) {}
