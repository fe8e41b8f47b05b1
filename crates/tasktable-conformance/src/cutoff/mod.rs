//! Store calls whose callers are dropped half way, as a client that hangs up drops its
//! HTTP handler or a timer runs out: wherever a call is cut off, no connection goes back
//! to the pool inside a transaction, and a shielded store's calls run to their end (a
//! claim nobody heard of giving its tasks back).

pub mod calls;
