//! darner-resp
