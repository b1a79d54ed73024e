//! The list commands. (Being built: issue 3. Until a command is registered here it answers
//! Redis's unknown-command error.)

use super::Reg;

pub fn register(_r: &mut Reg) {}
