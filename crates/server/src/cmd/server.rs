//! Server commands: COMMAND, INFO, DBSIZE, FLUSHDB, FLUSHALL, TIME, CONFIG, SLOWLOG, MONITOR,
//! SHUTDOWN, DEBUG, LASTSAVE.

use super::Reg;

pub fn register(_r: &mut Reg) {}
