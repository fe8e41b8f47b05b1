//! Integer fields of request bodies, read the way JSON means them. JSON has one number
//! type, and JSON Schema counts `2.0` as the integer 2, so the OpenAPI document's
//! `"type": "integer"` admits it; serde alone would refuse it for a `u64`. These readers
//! take any JSON number that is a whole number in the field's range, and still refuse
//! `2.5`, strings and numbers out of range, saying which.
//!
//! Use with `#[serde(deserialize_with = "whole::number")]`, or `whole::optional` beside
//! `#[serde(default)]` on an `Option`.

use serde::de::{Error, Unexpected};
use serde::{Deserialize, Deserializer};
use serde_json::Number;

/// A whole number that fits `T`.
pub fn number<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    whole(Number::deserialize(deserializer)?)
}

/// A whole number that fits `T`, or null.
pub fn optional<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    Option::<Number>::deserialize(deserializer)?
        .map(whole)
        .transpose()
}

fn whole<T: TryFrom<i128>, E: Error>(n: Number) -> Result<T, E> {
    let expected = &"a whole number in the field's range";
    let value: i128 = if let Some(i) = n.as_i64() {
        i.into()
    } else if let Some(u) = n.as_u64() {
        u.into()
    } else {
        let f = n.as_f64().unwrap_or(f64::NAN);
        // Past 2^53 a float no longer spells one integer; such a value is refused rather
        // than read as the nearest one.
        if f.fract() != 0.0 || f.abs() > 9_007_199_254_740_992.0 {
            return Err(E::invalid_value(Unexpected::Float(f), expected));
        }
        f as i128
    };
    T::try_from(value).map_err(|_| match i64::try_from(value) {
        Ok(i) => E::invalid_value(Unexpected::Signed(i), expected),
        Err(_) => E::invalid_value(Unexpected::Unsigned(value as u64), expected),
    })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Fields {
        #[serde(deserialize_with = "super::number")]
        count: u32,
        #[serde(default, deserialize_with = "super::optional")]
        delay: Option<u64>,
        #[serde(default, deserialize_with = "super::optional")]
        offset: Option<i64>,
    }

    fn read(value: serde_json::Value) -> Result<Fields, String> {
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    #[test]
    fn whole_numbers_are_read_however_json_spells_them() {
        let want = Fields {
            count: 2,
            delay: Some(18_446_744_073_709_551_615),
            offset: Some(-3),
        };
        let spelled = json!({"count": 2.0, "delay": u64::MAX, "offset": -3.0});
        assert_eq!(read(spelled), Ok(want));
        let bare = read(json!({"count": 2, "delay": null})).unwrap();
        assert_eq!((bare.delay, bare.offset), (None, None));
    }

    #[test]
    fn fractions_strings_and_numbers_out_of_range_are_refused() {
        for bad in [
            json!({"count": 2.5}),
            json!({"count": -1}),
            json!({"count": 4_294_967_296u64}),
            json!({"count": "2"}),
            json!({"count": 1e300}),
            json!({"count": 1, "delay": -1.0}),
        ] {
            let err = read(bad.clone()).unwrap_err();
            assert!(
                err.contains("whole number") || err.contains("invalid type"),
                "{bad}: {err}"
            );
        }
    }
}
