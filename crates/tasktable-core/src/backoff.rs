//! Retry delays: `initial * multiplier^(attempt-1)`, capped, with symmetric jitter.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long to wait before the next attempt after a retryable error.
///
/// The delay after attempt `n` (1-based) is `min(initial * multiplier^(n-1), max)`, then
/// multiplied by a factor drawn uniformly from `[1 - jitter, 1 + jitter]` and capped at
/// `max` again, so many tasks that failed together do not all come back in the same
/// instant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Backoff {
    /// Delay after the first failed attempt; serialized as whole milliseconds.
    #[serde(with = "millis")]
    pub initial: Duration,
    /// Growth per attempt, at least 1.0.
    pub multiplier: f64,
    /// Upper bound for any delay, jitter included; at most [`MAX_BACKOFF`]. Serialized
    /// as whole milliseconds.
    #[serde(with = "millis")]
    pub max: Duration,
    /// Fraction in `[0, 1]` by which a delay may be shortened or lengthened at random.
    pub jitter: f64,
}

impl Default for Backoff {
    /// 5 s, doubling, capped at 1 h, ±10 %.
    fn default() -> Self {
        Backoff {
            initial: Duration::from_secs(5),
            multiplier: 2.0,
            max: Duration::from_secs(3600),
            jitter: 0.1,
        }
    }
}

/// Why a backoff cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidBackoff {
    /// The multiplier given is below 1.0, infinite or NaN: delays must not shrink.
    #[error("backoff multiplier must be a finite number >= 1.0, got {0}")]
    Multiplier(f64),
    /// The jitter given is outside `[0, 1]`, or NaN.
    #[error("backoff jitter must be between 0.0 and 1.0, got {0}")]
    Jitter(f64),
    /// The first delay is longer than the cap every delay is held to.
    #[error("backoff initial delay ({initial:?}) must not exceed its cap ({max:?})")]
    InitialAboveMax {
        /// The [`Backoff::initial`] given.
        initial: Duration,
        /// The [`Backoff::max`] given.
        max: Duration,
    },
    /// The cap given is longer than [`MAX_BACKOFF`] (30 days).
    #[error("backoff cap must be at most 30 days, got {0:?}")]
    MaxTooLarge(Duration),
}

/// The longest delay any backoff may produce; keeps timestamp arithmetic far from overflow.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30 * 24 * 3600);

impl Backoff {
    /// Checks the bounds the field docs state; the error names the first one broken, in
    /// the order multiplier, jitter, cap, initial delay.
    pub fn validate(&self) -> Result<(), InvalidBackoff> {
        if !self.multiplier.is_finite() || self.multiplier < 1.0 {
            return Err(InvalidBackoff::Multiplier(self.multiplier));
        }
        if !(0.0..=1.0).contains(&self.jitter) || self.jitter.is_nan() {
            return Err(InvalidBackoff::Jitter(self.jitter));
        }
        if self.max > MAX_BACKOFF {
            return Err(InvalidBackoff::MaxTooLarge(self.max));
        }
        if self.initial > self.max {
            return Err(InvalidBackoff::InitialAboveMax {
                initial: self.initial,
                max: self.max,
            });
        }
        Ok(())
    }

    /// The delay before the attempt after attempt number `attempt` (1-based) failed, with
    /// `unit` a random number in `[0, 1)` supplied by the caller. A `unit` outside that
    /// range is clamped to `[0, 1]`, and a NaN or infinite one means no jitter (0.5).
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let exponent = attempt.saturating_sub(1).min(1024) as i32;
        let max = self.max.as_secs_f64();
        let base = (self.initial.as_secs_f64() * self.multiplier.powi(exponent)).min(max);
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 1.0)
        } else {
            0.5
        };
        let factor = 1.0 + self.jitter * (2.0 * unit - 1.0);
        Duration::from_secs_f64((base * factor).clamp(0.0, max))
    }
}

pub(crate) mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis().min(u64::MAX as u128) as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn no_jitter() -> Backoff {
        Backoff {
            initial: Duration::from_secs(1),
            multiplier: 2.0,
            max: Duration::from_secs(60),
            jitter: 0.0,
        }
    }

    #[test]
    fn doubles_then_caps() {
        let b = no_jitter();
        let secs: Vec<u64> = (1..=8).map(|n| b.delay(n, 0.3).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 32, 60, 60]);
    }

    #[test]
    fn jitter_spans_both_sides() {
        let b = Backoff {
            jitter: 0.5,
            ..no_jitter()
        };
        assert_eq!(b.delay(3, 0.0), Duration::from_secs(2));
        assert_eq!(b.delay(3, 0.5), Duration::from_secs(4));
        assert_eq!(b.delay(3, 1.0), Duration::from_secs(6));
    }

    #[test]
    fn huge_attempt_numbers_do_not_overflow() {
        let b = Backoff::default();
        assert_eq!(b.delay(u32::MAX, 0.99), b.max);
    }

    #[test]
    fn rejects_nonsense() {
        let ok = Backoff::default();
        assert!(ok.validate().is_ok());
        assert!(Backoff {
            multiplier: 0.5,
            ..ok
        }
        .validate()
        .is_err());
        assert!(Backoff {
            multiplier: f64::NAN,
            ..ok
        }
        .validate()
        .is_err());
        assert!(Backoff { jitter: 1.5, ..ok }.validate().is_err());
        assert!(Backoff {
            initial: Duration::from_secs(7200),
            ..ok
        }
        .validate()
        .is_err());
        assert!(Backoff {
            max: MAX_BACKOFF * 2,
            initial: Duration::ZERO,
            ..ok
        }
        .validate()
        .is_err());
    }

    fn valid_backoff() -> impl Strategy<Value = Backoff> {
        (0u64..10_000, 1.0f64..10.0, 0u64..100_000, 0.0f64..=1.0).prop_map(
            |(initial, multiplier, extra, jitter)| Backoff {
                initial: Duration::from_millis(initial),
                multiplier,
                max: Duration::from_millis(initial + extra),
                jitter,
            },
        )
    }

    proptest! {
        #[test]
        fn never_above_cap(b in valid_backoff(), n in 1u32..200, u in 0.0f64..1.0) {
            prop_assert!(b.delay(n, u) <= b.max);
        }

        #[test]
        fn grows_without_jitter(b in valid_backoff(), n in 1u32..200) {
            let b = Backoff { jitter: 0.0, ..b };
            prop_assert!(b.delay(n + 1, 0.0) >= b.delay(n, 0.0));
        }

        #[test]
        fn stays_within_jitter_band(b in valid_backoff(), n in 1u32..60, u in 0.0f64..1.0) {
            let plain = Backoff { jitter: 0.0, ..b }.delay(n, 0.0).as_secs_f64();
            let got = b.delay(n, u).as_secs_f64();
            prop_assert!(got >= plain * (1.0 - b.jitter) - 1e-6);
            prop_assert!(got <= plain * (1.0 + b.jitter) + 1e-6);
        }
    }
}
