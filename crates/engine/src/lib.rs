//! darner-engine
