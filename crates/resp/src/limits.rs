//! Limits applied while decoding.

/// Redis's default `proto-max-bulk-len` (512 MiB).
pub const DEFAULT_MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Redis accepts multibulk counts up to `INT_MAX`.
pub const DEFAULT_MAX_MULTIBULK_LEN: usize = i32::MAX as usize;
/// Most arguments a client that has not authenticated may send in one
/// request.
pub const UNAUTHENTICATED_MAX_ARGS: usize = 10;
/// Longest argument a client that has not authenticated may send.
pub const UNAUTHENTICATED_MAX_BULK_LEN: usize = 16384;
/// Redis's `PROTO_INLINE_MAX_SIZE`: the longest an inline request or a
/// `*`/`$` header line may grow without its terminator.
pub const INLINE_MAX_SIZE: usize = 64 * 1024;

/// Limits applied while decoding requests (and, for the two lengths, while
/// decoding frames with [`crate::decode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `proto-max-bulk-len`: longest bulk argument. Default 512 MiB.
    pub max_bulk_len: usize,
    /// Largest `*<n>` count accepted. Default `i32::MAX`, as Redis.
    pub max_multibulk_len: usize,
    /// When false (the server requires a password and this client has not
    /// authenticated), requests are limited to 10 arguments of at most 16384
    /// bytes each, as Redis does. Ignored by [`crate::decode`].
    /// Default `true`.
    pub authenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: DEFAULT_MAX_BULK_LEN,
            max_multibulk_len: DEFAULT_MAX_MULTIBULK_LEN,
            authenticated: true,
        }
    }
}
