//! The future every seam's I/O method returns: one boxed, sendable type, so the traits stay
//! object-safe and a verb awaits any seam the same way.

use std::future::Future;
use std::pin::Pin;

/// What trait methods that do I/O return: verbs await it through `Context::block_on`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
