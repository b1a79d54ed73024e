//! The AOF crate's integration tests, one test binary (three binaries each compiled
//! proptest's generics and were linked on their own).
//!
//! Layout: `fixtures` (Redis 7.2's AOF directories loaded against their manifests), `props`
//! (property tests of the manifest and command decoders), `rewrite` (a base written then read
//! back).

mod fixtures;
mod props;
mod rewrite;
