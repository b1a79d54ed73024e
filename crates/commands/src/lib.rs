//! darner-commands
