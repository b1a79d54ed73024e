//! placeholder
use mlua::{Lua, Table};
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    lua.create_table()
}
