//! The rate limit: a token bucket refilled at `rate` tokens a second, holding at most
//! `burst`; each item takes one before it starts.

use std::time::Duration;

/// A batch's rate limit. It reads no clock: every call takes the time as seconds on the
/// caller's monotonic clock.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    /// Seconds on the caller's clock when `tokens` was last brought up to date.
    at: f64,
}

impl TokenBucket {
    /// A full bucket for `rate` items a second at `now` (seconds on the caller's
    /// monotonic clock). The burst is a tenth of a second's worth, at least one token, so
    /// over any span `t` at most `rate * t + burst` items start.
    pub fn new(rate: u32, now: f64) -> Self {
        let rate = f64::from(rate.max(1));
        let burst = (rate / 10.0).max(1.0);
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// The most items that may start at once after a pause.
    pub fn burst(&self) -> f64 {
        self.burst
    }

    /// Takes a token at `now`, or answers how long until one is there.
    pub fn take(&mut self, now: f64) -> Result<(), Duration> {
        if now > self.at {
            self.tokens = (self.tokens + (now - self.at) * self.rate).min(self.burst);
            self.at = now;
        }
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }
}
